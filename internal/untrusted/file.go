// Package untrusted is the one reader of files a user hands the rig: playbooks, stack configs
// (Pulumi.<stack>.yaml), inventories, tuning profiles, engine settings files, config templates,
// ssh keys and known_hosts files. Every such input gets the same limits, and each limit holds
// before memory is spent on the input:
//
//   - only a regular file is opened (a FIFO, device, socket or directory is refused at once,
//     without blocking on it), and at most MaxBytes+1 bytes of it are ever read;
//   - a scan of the bytes, which allocates nothing, refuses nesting deeper than MaxDepth and
//     more than MaxNodes values before a YAML parser builds anything (the parser recurses per
//     level and allocates per token, so a 400 KB file of "[[[[" costs it gigabytes);
//   - after parsing, aliases are counted as the decoders would expand them, so an alias bomb
//     ("billion laughs") is refused before yaml.NodeToValue or a walk multiplies it.
//
// Each refusal says file:line:column, which limit, and its value (docs/security.md lists them).
package untrusted

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Limits. Real inputs are a few KiB with a few hundred values nested a handful deep.
const (
	MaxBytes          = 1 << 20 // 1 MiB
	MaxDepth          = 64      // nested mappings and lists
	MaxNodes          = 10_000  // values (scalars, aliases, mappings, lists) in one file
	MaxAliasExpansion = 100_000 // values the aliases of one file stand for, once expanded
)

var (
	// ErrNotRegular classifies a path that is not a regular file (FIFO, device, directory...).
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge classifies a file over MaxBytes.
	ErrTooLarge = errors.New("file too large")
	// ErrLimit classifies input over a structural limit (depth, values, alias expansion).
	ErrLimit = errors.New("input over a limit")
)

// Error is a refusal at a position of the input. It matches ErrTooLarge or ErrLimit with
// errors.Is.
type Error struct {
	File         string
	Line, Column int
	Msg          string // what is wrong and what the limit is
	kind         error
}

func (e *Error) Error() string { return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg) }

// Is makes errors.Is(err, ErrLimit) (or ErrTooLarge) true for the refusal's class.
func (e *Error) Is(target error) bool { return target == e.kind }

// ReadFile returns the contents of path, which must be a regular file of at most MaxBytes.
// what names the input in errors ("playbook", "stack config"). The file is opened with
// O_NONBLOCK so that a FIFO given by mistake (or on purpose) cannot hang the caller, and its
// type is checked on the open descriptor, so a path swapped between the check and the open
// gains nothing. A file that grows while it is read is still read only to MaxBytes+1.
func ReadFile(path, what string) ([]byte, error) { return ReadFileUpTo(path, what, MaxBytes) }

// ReadFileUpTo is ReadFile with a limit of its own, for a file the rig wrote that the user points
// it at again (a run folder's manifest.json, summary.json, a node's status.json): such a file
// may be longer than a hand-written one, but a FIFO or a symlink to /dev/zero in its place must
// still not hang the rig or exhaust its memory.
func ReadFileUpTo(path, what string, limit int64) ([]byte, error) {
	// Refuse what is plainly not a file before opening it: opening some devices has effects.
	if st, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, path, err)
	} else if err := regular(path, what, st); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, path, err)
	}
	defer f.Close()
	return readOpen(f, path, what, limit)
}

// Open opens path for reading as ReadFile does (a regular file only, never blocking on a FIFO,
// the type checked on the open descriptor) but reads nothing: for a file the caller streams and
// bounds itself, such as a results folder's stage-time history.
func Open(path, what string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, path, err)
	}
	st, err := f.Stat()
	if err == nil {
		err = regular(path, what, st)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFileIn is ReadFile for name inside root, with a limit of its own: a file the rig wrote
// itself (a sweep's sweep.json) may be longer than a hand-written one. The root confines the
// path: a symlink or ".." that leads out of it is refused (os.Root), and display names the file
// in errors.
func ReadFileIn(root *os.Root, name, display, what string, limit int64) ([]byte, error) {
	if st, err := root.Stat(name); err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, display, err)
	} else if err := regular(display, what, st); err != nil {
		return nil, err
	}
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, display, err)
	}
	defer f.Close()
	return readOpen(f, display, what, limit)
}

// OpenIn is Open for name inside root: a regular file only, never blocking on a FIFO, and a
// symlink or ".." that leads out of root refused (os.Root). display names the file in errors.
func OpenIn(root *os.Root, name, display, what string) (*os.File, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, display, err)
	}
	st, err := f.Stat()
	if err == nil {
		err = regular(display, what, st)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readOpen reads the open file f, checking on its descriptor that it is a regular file of at
// most limit bytes, and reading no more than limit+1 of it.
func readOpen(f *os.File, path, what string, limit int64) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, path, err)
	}
	if err := regular(path, what, st); err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, tooLargeAt(path, what, fmt.Sprintf("%d bytes", st.Size()), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, path, err)
	}
	if int64(len(data)) > limit {
		return nil, tooLargeAt(path, what, fmt.Sprintf("more than %d bytes", limit), limit)
	}
	return data, nil
}

func tooLarge(path, what, size string) error { return tooLargeAt(path, what, size, MaxBytes) }

func tooLargeAt(path, what, size string, limit int64) error {
	return &Error{File: path, Line: 1, Column: 1, kind: ErrTooLarge,
		Msg: fmt.Sprintf("the file is %s; a %s may be at most %d bytes (%s)", size, what, limit, mib(limit))}
}

func mib(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// regular refuses anything but a regular file, naming what it is instead.
func regular(path, what string, st fs.FileInfo) error {
	m := st.Mode()
	if m.IsRegular() {
		return nil
	}
	kind := "not a regular file"
	switch {
	case m.IsDir():
		kind = "a directory"
	case m&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	case m&fs.ModeCharDevice != 0:
		kind = "a character device"
	case m&fs.ModeDevice != 0:
		kind = "a block device"
	}
	return fmt.Errorf("%w: %s %s is %s; want a regular file", ErrNotRegular, what, path, kind)
}
