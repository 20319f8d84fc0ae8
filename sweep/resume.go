package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
)

// ResumeOptions say where the resumed sweep runs now and what it may accept.
type ResumeOptions struct {
	StartOptions
	// AcceptRig resumes with a rig other than the one of the sweep's last attempt; the new
	// attempt records it (Attempt.AcceptedRig).
	AcceptRig bool
}

// ErrResumeRefused: the plan, target or rig is not the sweep's, or the folder cannot be resumed.
var ErrResumeRefused = errors.New("resume refused")

// Resume continues the sweep in dir with plan pl as a new attempt. It refuses, naming every
// difference, when the playbook's hash (its resolved JSON, source path left out), the target
// or stack, or (without AcceptRig) the rig differs from the sweep's. It keeps every run whose
// folder says it ended ok (manifest.json status ok and a summary.json), moves the folder of
// every other run that started aside to attempts/N/rNN (N: the attempt that made it) and
// leaves those runs and the never-started ones to run again, in plan order.
//
// sweep.json is written before anything moves, and a move recorded but not made is made by the
// next resume, so a controller killed at any instant leaves a folder Resume and Load accept.
func Resume(dir string, pl *playbooks.Plan, o ResumeOptions) (*Tracker, error) {
	sw, err := Read(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrResumeRefused, err)
	}
	if sw.PlaybookHash == "" {
		return nil, fmt.Errorf("%w: %s has no playbook_hash (written by a rig from before resume): it cannot be checked against a playbook", ErrResumeRefused, filepath.Join(dir, FileName))
	}
	lock, err := lockSweep(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrResumeRefused, err)
	}
	t, err := resume(dir, sw, pl, o)
	if err != nil {
		lock.Close()
		return nil, err
	}
	t.lock = lock
	return t, nil
}

func resume(dir string, sw *Sweep, pl *playbooks.Plan, o ResumeOptions) (*Tracker, error) {
	hash, resolved, err := PlanHash(pl)
	if err != nil {
		return nil, err
	}
	var diffs []string
	if hash != sw.PlaybookHash {
		d := "the playbook differs from the sweep's"
		if ch := jsonChanges(sw.Resolved, resolved); len(ch) > 0 {
			d += ": " + strings.Join(ch, "; ")
		}
		diffs = append(diffs, d)
	} else if len(pl.Runs) != len(sw.Runs) {
		diffs = append(diffs, fmt.Sprintf("the plan has %d runs, the sweep %d", len(pl.Runs), len(sw.Runs)))
	}
	if sw.Target != o.Target || sw.Stack != o.Stack {
		diffs = append(diffs, fmt.Sprintf("the target differs: the sweep ran on %s, this would run on %s", where(sw.Target, sw.Stack), where(o.Target, o.Stack)))
	}
	prev := sw.Rig
	if n := len(sw.Attempts); n > 0 {
		prev = sw.Attempts[n-1].Rig
	}
	cur := rundir.Build()
	rigDiffers := !sameRig(prev, cur)
	if rigDiffers && !o.AcceptRig {
		diffs = append(diffs, fmt.Sprintf("the rig differs: the sweep's last attempt ran %s, this is %s (--accept-rig resumes with this one and records it)", rigName(prev), rigName(cur)))
	}
	if len(diffs) > 0 {
		return nil, fmt.Errorf("%w: %s: %s", ErrResumeRefused, dir, strings.Join(diffs, "; "))
	}

	now := time.Now().UTC()
	if len(sw.Attempts) == 0 {
		sw.Attempts = []Attempt{{N: 1, Started: sw.Started, Status: sw.Status, Rig: sw.Rig}}
	}
	last := &sw.Attempts[len(sw.Attempts)-1]
	if last.Status == rundir.StatusRunning || last.Status == "" {
		last.Status = rundir.StatusAbandoned // its controller died before the sweep report
	}
	n := last.N + 1
	att := Attempt{N: n, Started: now, Status: rundir.StatusRunning, Rig: cur, AcceptedRig: rigDiffers}
	var moves []move
	kept := map[int]bool{}
	for i := range sw.Runs {
		r := &sw.Runs[i]
		rd := filepath.Join(dir, r.Dir)
		_, statErr := os.Stat(rd)
		exists := statErr == nil
		m, ok := endedOK(dir, *r)
		if ok {
			// Ended ok; sweep.json may lag behind (killed between the run's end and End).
			kept[i] = true
			att.Kept = append(att.Kept, r.Dir)
			if r.Status != rundir.StatusOK {
				r.Status, r.RunID = rundir.StatusOK, m.RunID
				if r.Attempt == 0 {
					r.Attempt = last.N
				}
				if r.Ended.IsZero() {
					r.Ended = m.Ended
				}
			}
			continue
		}
		// A move the last resume recorded but did not make.
		if k := len(r.Earlier); k > 0 && r.Attempt == 0 && exists && r.Earlier[k-1].Dir != "" {
			if _, err := os.Stat(filepath.Join(dir, r.Earlier[k-1].Dir)); errors.Is(err, os.ErrNotExist) {
				moves = append(moves, move{r.Dir, r.Earlier[k-1].Dir})
				continue
			}
		}
		if !exists && r.Status == "" {
			continue // never started
		}
		try := EarlierTry{Attempt: r.Attempt, Status: r.Status, Started: r.Started, Moved: now}
		if try.Attempt == 0 {
			try.Attempt = last.N
		}
		if m != nil && m.Status != "" {
			try.Status = m.Status
		}
		if try.Status == rundir.StatusRunning || try.Status == "" {
			try.Status = rundir.StatusAbandoned // the controller died mid-run
		}
		if exists {
			try.Dir = freeName(dir, filepath.ToSlash(filepath.Join(AttemptsDir, strconv.Itoa(try.Attempt), r.Dir)))
			moves = append(moves, move{r.Dir, try.Dir})
		}
		r.Earlier = append(r.Earlier, try)
		r.Status, r.Attempt, r.Started, r.Ended = "", 0, time.Time{}, time.Time{}
		r.RunID = sw.ID + "-" + r.Dir
	}
	sw.Attempts = append(sw.Attempts, att)
	sw.Status, sw.Ended = rundir.StatusRunning, time.Time{}
	if err := sw.Write(dir); err != nil {
		return nil, err
	}
	if err := moveAside(dir, moves); err != nil {
		return nil, err
	}
	t := &Tracker{Dir: dir, Sweep: sw, plan: pl, progress: o.Progress, now: time.Now, kept: kept}
	t.started = t.now()
	return t, nil
}

// move is a run folder to move aside, both paths relative to the sweep folder.
type move struct{ from, to string }

// moveAside makes the moves through an os.Root of the sweep folder, so that neither end can lead
// out of it (Read refused links already; this holds if one appears since), each made durable.
func moveAside(dir string, moves []move) error {
	if len(moves) == 0 {
		return nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("move run folders aside: %w", err)
	}
	defer root.Close()
	for _, mv := range moves {
		parent := filepath.Dir(mv.to)
		if err := root.MkdirAll(parent, 0o755); err != nil {
			return fmt.Errorf("move %s aside: %w", filepath.Join(dir, mv.from), err)
		}
		if err := root.Rename(mv.from, mv.to); err != nil {
			return fmt.Errorf("move %s aside: %w", filepath.Join(dir, mv.from), err)
		}
		if err := atomicfile.SyncDir(filepath.Join(dir, parent)); err != nil {
			return fmt.Errorf("move %s aside: %w", filepath.Join(dir, mv.from), err)
		}
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("move run folders aside: %w", err)
	}
	return nil
}

// endedOK reads the run's manifest (nil when it has none readable) and reports whether the run
// ended ok: manifest status ok and a summary.json beside it.
func endedOK(dir string, r Run) (*rundir.Manifest, bool) {
	rd := filepath.Join(dir, r.Dir)
	m, err := rundir.ReadManifest(rd)
	if err != nil {
		return nil, false
	}
	_, serr := os.Stat(filepath.Join(rd, rundir.SummaryFile))
	return m, m.Status == rundir.StatusOK && serr == nil
}

// freeName is rel, or rel.2, rel.3, … when a folder of that name is in dir already.
func freeName(dir, rel string) string {
	name := rel
	for k := 2; ; k++ {
		if _, err := os.Lstat(filepath.Join(dir, name)); errors.Is(err, os.ErrNotExist) {
			return name
		}
		name = fmt.Sprintf("%s.%d", rel, k)
	}
}

func where(target, stack string) string {
	if target == "" {
		target = "(no target recorded)"
	}
	if stack != "" {
		return target + " (stack " + stack + ")"
	}
	return target
}

func sameRig(a, b rundir.BuildInfo) bool {
	return a.Version == b.Version && a.Commit == b.Commit && a.Modified == b.Modified
}

func rigName(b rundir.BuildInfo) string {
	s := "rig " + b.Version
	if b.Commit != "" {
		s += " (commit " + b.Commit[:min(12, len(b.Commit))]
		if b.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return s
}

// jsonChanges lists the fields that differ between two JSON documents, as path: old → new
// (durations in nanoseconds shown as durations), at most 8.
func jsonChanges(before, after []byte) []string {
	var a, b any
	if json.Unmarshal(before, &a) != nil || json.Unmarshal(after, &b) != nil {
		return nil
	}
	var out []string
	diffJSON("", a, b, &out)
	if len(out) > 8 {
		out = append(out[:8], fmt.Sprintf("and %d more", len(out)-8))
	}
	return out
}

func diffJSON(path string, a, b any, out *[]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			diffJSON(join(path, k), am[k], bm[k], out)
		}
		return
	}
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok && len(as) == len(bs) {
		for i := range as {
			diffJSON(fmt.Sprintf("%s[%d]", path, i), as[i], bs[i], out)
		}
		return
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) == string(jb) {
		return
	}
	*out = append(*out, fmt.Sprintf("%s: %s → %s", path, showJSON(path, a, ja), showJSON(path, b, jb)))
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// durationKeys are the playbook's JSON fields that hold a time.Duration (nanoseconds).
var durationKeys = map[string]bool{"warmup": true, "duration": true, "at": true, "relaunch_after": true, "timeout": true, "spin": true}

func showJSON(path string, v any, raw []byte) string {
	if v == nil {
		return "(none)"
	}
	key := path[strings.LastIndexAny(path, ".]")+1:]
	if f, ok := v.(float64); ok && durationKeys[key] {
		return time.Duration(f).String()
	}
	return string(raw)
}
