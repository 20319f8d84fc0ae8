package tune

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/internal/untrusted"
)

// StateFileName is the state file's name inside the agent's folder.
const StateFileName = "tune-state.json"

// Options say where settings and the state live.
type Options struct {
	Root      string // filesystem root of /proc and /sys ("/" on a node)
	StateFile string // where prior values are recorded
	// Ethtool is the ethtool command for ring sizes (default "ethtool"). Under a Root other than
	// "/" ring settings are refused unless Ethtool is set, since rings live in the real NIC.
	Ethtool string
	Logger  *slog.Logger
}

func (o *Options) defaults() error {
	if o.Root == "" {
		o.Root = "/"
	}
	if o.StateFile == "" {
		return errors.New("tune: no state file given")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// ErrNotApplied says the state file records no tuning: there is nothing to revert.
var ErrNotApplied = errors.New("no tuning recorded")

// State is the state file: every value as it was before the first Apply touched it.
type State struct {
	Version int       `json:"version"`
	Root    string    `json:"root"`
	Since   time.Time `json:"since"`
	// Prior holds the original values in the order they were recorded; Revert writes them back
	// in that order.
	Prior []Value `json:"prior"`
	// Applied is the merged profile of every Apply since.
	Applied Profile `json:"applied"`
}

// Value is one setting's value.
type Value struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Change is one setting as Apply or Revert left it.
type Change struct {
	Name   string `json:"name"`
	Before string `json:"before"` // as read before the write
	Want   string `json:"want"`
	After  string `json:"after"` // as read back after the write
}

// Report is the outcome of Apply or Revert.
type Report struct {
	Changes   []Change `json:"changes"`
	StateFile string   `json:"state_file"`
}

// LoadState reads the state file; a missing file is ErrNotApplied.
func LoadState(path string) (*State, error) {
	// A regular file of at most 16 MiB: rig tune revert --dir names its folder, and a FIFO there
	// must not hang it.
	b, err := untrusted.ReadFileUpTo(path, "tuning state", 16<<20)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w (%s does not exist)", ErrNotApplied, path)
	}
	if err != nil {
		return nil, err // it names the file and what is wrong with it
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("parse tuning state %s: %w", path, err)
	}
	if st.Version != 1 {
		return nil, fmt.Errorf("tuning state %s: version %d, want 1", path, st.Version)
	}
	return &st, nil
}

func (st *State) prior(name string) (string, bool) {
	for _, v := range st.Prior {
		if v.Name == name {
			return v.Value, true
		}
	}
	return "", false
}

// setByCompanion reports a setting that a companion's write restores: when vm.dirty_bytes was
// in use, writing it back zeroes vm.dirty_ratio as it was; writing the ratio first would leave
// both at zero (no dirty threshold) for a moment.
func (st *State) setByCompanion(s spec) bool {
	for _, c := range s.companions {
		_, cs, _ := lookup(c)
		if v, ok := st.prior(c); ok && cs.nonZeroOnly && v != "0" {
			return true
		}
	}
	return false
}

// saveState writes the state durably (temporary file, fsync, rename, fsync of the folder):
// a crash right after must still find every prior value.
func saveState(path string, st *State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, bytes.NewReader(append(b, '\n')), atomicfile.Options{Durable: true})
}

// Apply records the prior value of every setting in p (and of settings the kernel changes along
// with them) in the state file, then writes p and reads every setting back. It fails naming each
// setting that did not take. The state file stays until Revert, so a failed or partial Apply is
// undone by Revert too. Applying again merges: values recorded earlier are kept, so Revert always
// returns to the state before the first Apply.
func Apply(ctx context.Context, opts Options, p Profile) (Report, error) {
	if err := opts.defaults(); err != nil {
		return Report{}, err
	}
	p, err := p.Normalized()
	if err != nil {
		return Report{}, err
	}
	rep := Report{StateFile: opts.StateFile}
	st, err := LoadState(opts.StateFile)
	switch {
	case errors.Is(err, ErrNotApplied):
		st = &State{Version: 1, Root: opts.Root, Since: time.Now().UTC(), Applied: Profile{}}
	case err != nil:
		return rep, err
	case st.Root != opts.Root:
		return rep, fmt.Errorf("tuning state %s belongs to root %q, not %q: revert it first", opts.StateFile, st.Root, opts.Root)
	}

	// Read everything first: a setting we cannot read fails the Apply before any change.
	names := p.names()
	before := map[string]string{}
	for _, name := range names {
		_, s, _ := lookup(name)
		v, err := read(ctx, opts, name)
		if err != nil {
			return rep, fmt.Errorf("read %s before tuning: %w", name, err)
		}
		before[name] = v
		if _, ok := st.prior(name); !ok {
			st.Prior = append(st.Prior, Value{name, v})
		}
		for _, c := range s.companions {
			if _, ok := st.prior(c); ok {
				continue
			}
			cv, err := read(ctx, opts, c)
			if errors.Is(err, os.ErrNotExist) {
				continue // absent (a fake tree without it): nothing to keep
			}
			if err != nil {
				return rep, fmt.Errorf("read %s (changed by the kernel along with %s) before tuning: %w", c, name, err)
			}
			st.Prior = append(st.Prior, Value{c, cv})
		}
	}
	for _, name := range names {
		st.Applied[name] = p[name]
	}
	if err := saveState(opts.StateFile, st); err != nil {
		return rep, fmt.Errorf("record prior values before tuning: %w", err)
	}

	var failed []string
	for _, name := range names {
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		if before[name] == p[name] {
			continue // already so: no write, no NIC reset
		}
		if err := write(ctx, opts, name, p[name]); err != nil {
			failed = append(failed, fmt.Sprintf("%s: write %s: %v", name, p[name], err))
		}
	}
	for _, name := range names {
		after, err := read(ctx, opts, name)
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: read back: %v", name, err))
		} else if after != p[name] {
			failed = append(failed, fmt.Sprintf("%s: wrote %s, read back %s", name, p[name], after))
		}
		rep.Changes = append(rep.Changes, Change{Name: name, Before: before[name], Want: p[name], After: after})
	}
	if len(failed) > 0 {
		return rep, fmt.Errorf("tuning did not take (prior values are in %s; revert restores them): %s", opts.StateFile, strings.Join(dedupe(failed), "; "))
	}
	opts.Logger.Info("tuning applied", "settings", len(names), "state", opts.StateFile)
	return rep, nil
}

func dedupe(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// Revert writes back every recorded prior value, reads each back and, when all match, removes
// the state file. On failure the state file stays, naming what is still to be restored, and
// Revert can be run again. With no state file it returns ErrNotApplied.
func Revert(ctx context.Context, opts Options) (Report, error) {
	if err := opts.defaults(); err != nil {
		return Report{}, err
	}
	rep := Report{StateFile: opts.StateFile}
	st, err := LoadState(opts.StateFile)
	if err != nil {
		return rep, err
	}
	if st.Root != opts.Root {
		return rep, fmt.Errorf("tuning state %s was recorded for root %q, not %q", opts.StateFile, st.Root, opts.Root)
	}
	var failed []string
	for _, pv := range st.Prior {
		_, s, _ := lookup(pv.Name)
		cur, err := read(ctx, opts, pv.Name)
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: read: %v", pv.Name, err))
			continue
		}
		if cur == pv.Value || (s.nonZeroOnly && pv.Value == "0") || st.setByCompanion(s) {
			continue
		}
		if err := write(ctx, opts, pv.Name, pv.Value); err != nil {
			failed = append(failed, fmt.Sprintf("%s: write %s: %v", pv.Name, pv.Value, err))
		}
	}
	for _, pv := range st.Prior {
		after, err := read(ctx, opts, pv.Name)
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: read back: %v", pv.Name, err))
		} else if after != pv.Value {
			failed = append(failed, fmt.Sprintf("%s: restored %s, read back %s", pv.Name, pv.Value, after))
		}
		rep.Changes = append(rep.Changes, Change{Name: pv.Name, Want: pv.Value, After: after, Before: st.Applied[pv.Name]})
	}
	if len(failed) > 0 {
		return rep, fmt.Errorf("revert incomplete (state kept in %s): %s", opts.StateFile, strings.Join(dedupe(failed), "; "))
	}
	if err := os.Remove(opts.StateFile); err != nil {
		return rep, fmt.Errorf("reverted, but removing %s: %w", opts.StateFile, err)
	}
	atomicfile.SyncDir(filepath.Dir(opts.StateFile))
	opts.Logger.Info("tuning reverted", "settings", len(st.Prior))
	return rep, nil
}

// Read returns the current value of each named setting, as read from where it takes effect
// (for the results manifest's "tuning read back").
func Read(ctx context.Context, opts Options, names []string) (map[string]string, error) {
	if opts.Root == "" {
		opts.Root = "/"
	}
	out := map[string]string{}
	for _, n := range names {
		canon, _, ok := lookup(n)
		if !ok {
			return nil, fmt.Errorf("unknown setting %q", n)
		}
		v, err := read(ctx, opts, canon)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", canon, err)
		}
		out[canon] = v
	}
	return out, nil
}

// read returns a setting's effective value in normalised form.
func read(ctx context.Context, opts Options, name string) (string, error) {
	_, s, ok := lookup(name)
	if !ok {
		return "", fmt.Errorf("unknown setting %q", name)
	}
	switch s.kind {
	case kindRing:
		iface, which := ringParts(name)
		r, err := readRings(ctx, opts, iface)
		if err != nil {
			return "", err
		}
		return fmt.Sprint(r.current(which)), nil
	case kindChoice:
		b, err := os.ReadFile(filepath.Join(opts.Root, s.file(name)))
		if err != nil {
			return "", err
		}
		return selected(string(b)), nil
	default:
		b, err := os.ReadFile(filepath.Join(opts.Root, s.file(name)))
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(string(b)), nil
	}
}

// selected returns the bracketed word of "always [madvise] never", or the whole trimmed text
// when there are no brackets.
func selected(s string) string {
	s = strings.TrimSpace(s)
	i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
	if i >= 0 && j > i {
		return s[i+1 : j]
	}
	return s
}

func write(ctx context.Context, opts Options, name, value string) error {
	_, s, _ := lookup(name)
	if s.kind == kindRing {
		iface, which := ringParts(name)
		return setRing(ctx, opts, iface, which, value)
	}
	path := filepath.Join(opts.Root, s.file(name))
	data := []byte(value + "\n")
	if s.kind == kindChoice {
		if old, err := os.ReadFile(path); err == nil && strings.Contains(string(old), "[") && !isKernelFile(path) {
			data = []byte(reselect(string(old), value))
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	// One write(2): proc and sysfs files take the whole value in one call.
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// reselect moves the brackets of a choice list to value, keeping the rest of the text as it was:
// a fake sysfs tree then reads like the kernel's file does after a write.
func reselect(old, value string) string {
	trail := old[len(strings.TrimRight(old, "\n")):]
	words := strings.Fields(old)
	var b bytes.Buffer
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		w = strings.Trim(w, "[]")
		if w == value {
			w = "[" + w + "]"
		}
		b.WriteString(w)
	}
	return b.String() + trail
}
