// Package tune applies a profile of kernel and NIC settings to a node, and puts every one of
// them back: Apply records each prior value in a state file before changing anything and reads
// every value back from where it takes effect; Revert restores exactly the recorded values, from
// the state file, so it also works after the agent restarted.
//
// Settings live in files under a root ("/" on a node, a fake /proc/sys and /sys tree in tests),
// except ring sizes, which ethtool reads and sets.
package tune

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"

	"github.com/rig-dev/rig/internal/untrusted"
)

// Profile maps setting names to values, e.g. {"thp.enabled": "never", "vm.dirty_ratio": "20",
// "net.core.rmem_max": "134217728", "ring.eth0.rx": "4096"}. Names are canonical and values
// normalised once the profile came through ParseProfile or Normalize.
type Profile map[string]string

type kind int

const (
	kindSysctl kind = iota // an integer in /proc/sys
	kindChoice             // a sysfs word list with the active one in [brackets]
	kindRing               // an ethtool ring size
)

type spec struct {
	kind     kind
	path     string // under root, for sysctl and choice files
	min, max int64
	sizes    bool     // accepts KiB/MiB/GiB suffixes
	choices  []string // for kindChoice
	// companions are recorded with the setting because writing it changes them: the kernel
	// zeroes vm.dirty_bytes when vm.dirty_ratio is written (and the reverse), so an exact revert
	// needs both.
	companions []string
	// nonZeroOnly marks a companion that may only be written with a non-zero value (the kernel
	// rejects 0 for vm.dirty_bytes; 0 there just means "the ratio is in use").
	nonZeroOnly bool
	// settable is false for companions that are recorded but not accepted in a profile.
	settable bool
}

const maxInt = 1<<31 - 1

var specs = map[string]spec{
	"thp.enabled": {kind: kindChoice, path: "sys/kernel/mm/transparent_hugepage/enabled", choices: []string{"always", "madvise", "never"}, settable: true},
	"thp.defrag":  {kind: kindChoice, path: "sys/kernel/mm/transparent_hugepage/defrag", choices: []string{"always", "defer", "defer+madvise", "madvise", "never"}, settable: true},

	"vm.dirty_ratio":               {kind: kindSysctl, min: 0, max: 100, companions: []string{"vm.dirty_bytes"}, settable: true},
	"vm.dirty_background_ratio":    {kind: kindSysctl, min: 0, max: 100, companions: []string{"vm.dirty_background_bytes"}, settable: true},
	"vm.dirty_bytes":               {kind: kindSysctl, min: 0, max: 1<<62 - 1, nonZeroOnly: true},
	"vm.dirty_background_bytes":    {kind: kindSysctl, min: 0, max: 1<<62 - 1, nonZeroOnly: true},
	"vm.dirty_expire_centisecs":    {kind: kindSysctl, min: 0, max: maxInt, settable: true},
	"vm.dirty_writeback_centisecs": {kind: kindSysctl, min: 0, max: maxInt, settable: true},
	"vm.swappiness":                {kind: kindSysctl, min: 0, max: 200, settable: true},

	"net.core.rmem_max":           {kind: kindSysctl, min: 1, max: maxInt, sizes: true, settable: true},
	"net.core.wmem_max":           {kind: kindSysctl, min: 1, max: maxInt, sizes: true, settable: true},
	"net.core.rmem_default":       {kind: kindSysctl, min: 1, max: maxInt, sizes: true, settable: true},
	"net.core.wmem_default":       {kind: kindSysctl, min: 1, max: maxInt, sizes: true, settable: true},
	"net.core.netdev_max_backlog": {kind: kindSysctl, min: 1, max: maxInt, settable: true},
}

// aliases are accepted in profiles and mapped to canonical names.
var aliases = map[string]string{"thp": "thp.enabled"}

var ringKey = regexp.MustCompile(`^ring\.([A-Za-z0-9_.:@-]{1,15})\.(rx|tx)$`)

const ringMax = 1 << 16

// lookup returns the spec of a canonical or aliased name, and the canonical name.
func lookup(name string) (string, spec, bool) {
	if a, ok := aliases[name]; ok {
		name = a
	}
	if s, ok := specs[name]; ok {
		return name, s, true
	}
	if ringKey.MatchString(name) {
		return name, spec{kind: kindRing, min: 1, max: ringMax, settable: true}, true
	}
	return name, spec{}, false
}

// sysctlPath maps "vm.dirty_ratio" to "proc/sys/vm/dirty_ratio".
func (s spec) file(name string) string {
	if s.path != "" {
		return s.path
	}
	return "proc/sys/" + strings.ReplaceAll(name, ".", "/")
}

// ValidNames lists the names a profile accepts.
func ValidNames() []string {
	var out []string
	for k, s := range specs {
		if s.settable {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return append(out, "ring.<interface>.rx", "ring.<interface>.tx")
}

// Normalize checks one setting and returns its canonical name and value (sizes in bytes,
// integers without leading zeros).
func Normalize(name, value string) (string, string, error) {
	canon, s, ok := lookup(name)
	if !ok || !s.settable {
		return "", "", fmt.Errorf("unknown setting %q; valid settings: %s", name, strings.Join(ValidNames(), ", "))
	}
	value = strings.TrimSpace(value)
	switch s.kind {
	case kindChoice:
		for _, c := range s.choices {
			if value == c {
				return canon, value, nil
			}
		}
		return "", "", fmt.Errorf("%s: %q is not one of %s", canon, value, strings.Join(s.choices, ", "))
	default:
		n, err := parseInt(value, s.sizes)
		if err != nil {
			hint := "an integer"
			if s.sizes {
				hint = "an integer number of bytes, optionally with KiB, MiB or GiB"
			}
			return "", "", fmt.Errorf("%s: %q is not %s", canon, value, hint)
		}
		if n < s.min || n > s.max {
			return "", "", fmt.Errorf("%s: %d is out of range %d..%d", canon, n, s.min, s.max)
		}
		return canon, strconv.FormatInt(n, 10), nil
	}
}

func parseInt(v string, sizes bool) (int64, error) {
	mult := int64(1)
	if sizes {
		for suf, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
			if strings.HasSuffix(v, suf) {
				v, mult = strings.TrimSpace(strings.TrimSuffix(v, suf)), m
				break
			}
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, err
	}
	if n > (1<<62)/mult {
		return 0, errors.New("too large")
	}
	return n * mult, nil
}

// Validate reports the first bad setting of p, if any.
func (p Profile) Validate() error {
	_, err := p.Normalized()
	return err
}

// Normalized returns a copy of p with canonical names and values (aliases resolved, sizes in
// bytes), or the first bad setting.
func (p Profile) Normalized() (Profile, error) {
	if len(p) == 0 {
		return nil, errors.New("tuning profile is empty")
	}
	out := Profile{}
	for _, name := range p.names() {
		canon, v, err := Normalize(name, p[name])
		if err != nil {
			return nil, err
		}
		if _, dup := out[canon]; dup {
			return nil, fmt.Errorf("%s is set twice (once through an alias)", canon)
		}
		out[canon] = v
	}
	return out, nil
}

// names returns the settings in the order they are applied: THP first, then sysctls, then
// rings (a ring change resets the NIC, so it comes last), each group sorted.
func (p Profile) names() []string {
	out := make([]string, 0, len(p))
	for k := range p {
		out = append(out, k)
	}
	rank := func(k string) int {
		_, s, _ := lookup(k)
		switch s.kind {
		case kindChoice:
			return 0
		case kindSysctl:
			return 1
		}
		return 2
	}
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a, b))
	})
	return out
}

// ParseProfile reads a profile from YAML or JSON: one mapping of setting to value. Errors name
// the file, line and column.
func ParseProfile(filename string, data []byte) (Profile, error) {
	f, err := untrusted.ParseYAML(filename, data) // depth, values and aliases bounded first
	if err != nil {
		var le *untrusted.Error
		if errors.As(err, &le) {
			return nil, le
		}
		var ye yaml.Error
		if errors.As(err, &ye) && ye.GetToken() != nil {
			p := ye.GetToken().Position
			return nil, fmt.Errorf("%s:%d:%d: %s", filename, p.Line, p.Column, ye.GetMessage())
		}
		return nil, fmt.Errorf("%s: %w", filename, err)
	}
	if len(f.Docs) == 0 || f.Docs[0] == nil || f.Docs[0].Body == nil {
		return nil, fmt.Errorf("%s: tuning profile is empty", filename)
	}
	var pairs []*ast.MappingValueNode
	switch b := f.Docs[0].Body.(type) {
	case *ast.MappingNode:
		pairs = b.Values
	case *ast.MappingValueNode:
		pairs = []*ast.MappingValueNode{b}
	default:
		pos := b.GetToken().Position
		return nil, fmt.Errorf("%s:%d:%d: a tuning profile is a mapping of setting to value, e.g. \"vm.dirty_ratio: 20\"", filename, pos.Line, pos.Column)
	}
	at := func(n ast.Node) string {
		pos := n.GetToken().Position
		return fmt.Sprintf("%s:%d:%d", filename, pos.Line, pos.Column)
	}
	p := Profile{}
	for _, kv := range pairs {
		name := kv.Key.GetToken().Value
		var value string
		switch v := kv.Value.(type) {
		case *ast.IntegerNode, *ast.StringNode, *ast.FloatNode, *ast.BoolNode:
			value = v.GetToken().Value
		default:
			return nil, fmt.Errorf("%s: %s: want a single value, not a %s", at(kv.Value), name, kv.Value.Type())
		}
		canon, norm, err := Normalize(name, value)
		if err != nil {
			where := at(kv.Key)
			if _, _, known := lookup(name); known {
				where = at(kv.Value)
			}
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if _, dup := p[canon]; dup {
			return nil, fmt.Errorf("%s: %s is set twice", at(kv.Key), canon)
		}
		p[canon] = norm
	}
	if len(p) == 0 {
		return nil, fmt.Errorf("%s: tuning profile is empty", filename)
	}
	return p, nil
}
