package playbooks

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrInvalid classifies every problem found in a playbook's content (as opposed to, say, a file
// that cannot be read): errors.Is(err, ErrInvalid) holds for the Problems that Parse and Open return.
var ErrInvalid = errors.New("invalid playbook")

// ErrNotFound is returned by Open when the name is neither a file nor an embedded playbook.
var ErrNotFound = errors.New("playbook not found")

// Problem is one thing wrong with a playbook, placed in its source.
type Problem struct {
	Pos  Pos
	Path string // field path, e.g. timeline[2].kill.node; empty for file-level problems
	Msg  string
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.Pos.String())
	b.WriteString(": ")
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// String renders file:line:column, leaving out what is unknown.
func (p Pos) String() string {
	switch {
	case p.Line > 0 && p.Column > 0:
		return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Column)
	case p.Line > 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	default:
		return p.File
	}
}

// Problems is every problem found in one playbook, in source order. It is an error that prints
// one problem per line.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Is makes errors.Is(err, ErrInvalid) true for any Problems.
func (ps Problems) Is(target error) bool { return target == ErrInvalid }

// problems collects Problems while a playbook is read; add never stops the reading, so one pass
// reports everything.
type problems struct {
	file string
	list Problems
	seen map[string]bool
}

func (c *problems) add(pos Pos, path, format string, args ...any) {
	if pos.File == "" {
		pos.File = c.file
	}
	p := Problem{Pos: pos, Path: path, Msg: fmt.Sprintf(format, args...)}
	key := p.String()
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	if c.seen[key] {
		return
	}
	c.seen[key] = true
	c.list = append(c.list, p)
}

// err returns the collected problems sorted by position, or nil.
func (c *problems) err() error {
	if len(c.list) == 0 {
		return nil
	}
	out := append(Problems(nil), c.list...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Pos, out[j].Pos
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	return out
}
