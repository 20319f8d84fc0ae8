// Package sweep owns the sweep folder: the runs of one plan of more than one run, kept together
// as results/<sweep-id>/r01, r02, … in plan order, with sweep.json saying which run had which
// matrix values and round. It pools each combination's rounds into one table per experiment
// (with n and the spread), tests every combination against a baseline for a difference that
// stands out of the noise (package stats), draws each figure against each matrix axis, and
// compares two runs or two sweeps (`rig compare`).
package sweep

import (
	"bytes"
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

// Files of a sweep folder.
const (
	FileName   = "sweep.json"
	ReportName = "report.md"
	PlotsDir   = "plots"
)

// DefaultWarmFrom is the first snapshot of a run counted as warm when the playbook does not say:
// the first snapshot after a boot is usually the slow one (cold page cache and code paths), so
// snapshots #2 onwards are the ones compared.
const DefaultWarmFrom = 2

// Sweep is sweep.json. Its JSON field names are a contract: add fields, never rename them.
type Sweep struct {
	ID       string    `json:"sweep_id"`
	Playbook string    `json:"playbook"`
	Source   string    `json:"source,omitempty"`
	Status   string    `json:"status"` // running | ok | failed | interrupted, as a run's manifest
	Started  time.Time `json:"started"`
	Ended    time.Time `json:"ended,omitzero"`
	Axes     []Axis    `json:"axes"` // the matrix, in playbook order
	Rounds   int       `json:"rounds"`
	// WarmFrom is the first snapshot (1-based, in timeline order) of each run whose take and
	// pause count as warm; earlier ones are reported apart.
	WarmFrom int   `json:"snapshot_warm_from"`
	Runs     []Run `json:"runs"` // plan order
	// PlaybookHash is rundir.Hash of the playbook as planned, its source path left out (a copy
	// of the file elsewhere is the same plan); Resolved is that playbook's JSON, so a resume
	// can name what an edit changed.
	PlaybookHash string           `json:"playbook_hash,omitempty"`
	Resolved     json.RawMessage  `json:"playbook_resolved,omitempty"`
	Rig          rundir.BuildInfo `json:"rig"`              // the rig that started the sweep (each attempt has its own)
	Target       string           `json:"target,omitempty"` // target.Target.Name(): "local", "inventory:FILE", …
	Stack        string           `json:"stack,omitempty"`  // the Pulumi stack, for `rig run --stack`
	// Attempts are the controller sessions that ran the plan: 1 for `rig run`, one more for
	// every `rig run --resume`.
	Attempts []Attempt `json:"attempts,omitempty"`
	// PricePerHour is the cluster's cost in USD per hour (rig run --stack-config), 0: not known.
	PricePerHour float64 `json:"price_per_hour_usd,omitempty"`
}

// Attempt is one controller session of the sweep.
type Attempt struct {
	N       int              `json:"n"`
	Started time.Time        `json:"started"`
	Ended   time.Time        `json:"ended,omitzero"`
	Status  string           `json:"status"` // running until the session finished the sweep report
	Rig     rundir.BuildInfo `json:"rig"`
	// AcceptedRig: resumed with a rig other than the previous attempt's (rig run --accept-rig).
	AcceptedRig bool `json:"accepted_rig,omitempty"`
	// Kept are the run folders of earlier attempts this one kept (they had ended ok); Ran the
	// ones it started, in plan order.
	Kept []string `json:"kept,omitempty"`
	Ran  []string `json:"ran,omitempty"`
	// Stopped says why the attempt stopped before the end of the plan on its own (a --deadline or
	// --budget the next run would pass); the sweep is resumable.
	Stopped string `json:"stopped,omitempty"`
}

// Axis is one matrix key and its values.
type Axis struct {
	Key    string   `json:"key"`
	Values []string `json:"values"`
}

// Run is one planned run of the sweep.
type Run struct {
	Dir      string            `json:"dir"` // r01, r02, … relative to the sweep folder
	Index    int               `json:"index"`
	Round    int               `json:"round"`
	Settings map[string]string `json:"settings,omitempty"`
	RunID    string            `json:"run_id,omitempty"`
	Status   string            `json:"status,omitempty"` // empty until the run started, running until it ended
	// Attempt made the run folder now at Dir (0: never started); Started and Ended are its
	// times in that attempt.
	Attempt int       `json:"attempt,omitempty"`
	Started time.Time `json:"started,omitzero"`
	Ended   time.Time `json:"ended,omitzero"`
	// Earlier are the tries of this run before the one at Dir that did not end ok, their folders
	// moved aside by a resume.
	Earlier []EarlierTry `json:"earlier,omitempty"`
}

// EarlierTry is a try of a run that a resume moved aside to rerun it.
type EarlierTry struct {
	Attempt int       `json:"attempt"`
	Dir     string    `json:"dir"`    // attempts/N/rNN, relative to the sweep folder; "" when it left no folder
	Status  string    `json:"status"` // as its manifest said (abandoned: the controller died mid-run)
	Started time.Time `json:"started,omitzero"`
	Moved   time.Time `json:"moved"`
}

// AttemptsDir holds the folders of the tries a resume moved aside: attempts/N/rNN.
const AttemptsDir = "attempts"

// RunDir is the folder name of the index-th run (1-based) of a plan of n runs.
func RunDir(index, n int) string {
	if n >= 100 {
		return fmt.Sprintf("r%03d", index)
	}
	return fmt.Sprintf("r%02d", index)
}

// New describes a plan about to run as sweep id: every run with its folder, run id and matrix
// values, the playbook's hash, the rig and the target; its first attempt is running.
func New(id string, pl *playbooks.Plan, o StartOptions) (*Sweep, error) {
	p := pl.Playbook
	hash, resolved, err := PlanHash(pl)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	s := &Sweep{ID: id, Playbook: p.Name, Source: p.Source, Status: rundir.StatusRunning,
		Started: now, Rounds: max(p.Rounds, 1), WarmFrom: WarmFrom(p),
		PlaybookHash: hash, Resolved: resolved, Rig: rundir.Build(), Target: o.Target, Stack: o.Stack}
	s.Attempts = []Attempt{{N: 1, Started: now, Status: rundir.StatusRunning, Rig: s.Rig}}
	for _, ax := range p.Matrix {
		s.Axes = append(s.Axes, Axis{Key: ax.Key, Values: append([]string(nil), ax.Values...)})
	}
	for _, r := range pl.Runs {
		d := RunDir(r.Index, len(pl.Runs))
		s.Runs = append(s.Runs, Run{Dir: d, Index: r.Index, Round: r.Round, Settings: r.Settings, RunID: id + "-" + d})
	}
	return s, nil
}

// PlanHash is the hash of the plan's playbook (its matrix and rounds included, its source path
// left out) and the JSON it was taken over.
func PlanHash(pl *playbooks.Plan) (string, json.RawMessage, error) {
	p := pl.Playbook.Clone()
	p.Source = ""
	b, err := json.Marshal(p)
	if err != nil {
		return "", nil, fmt.Errorf("encode the playbook for sweep.json: %w", err)
	}
	return rundir.Hash(p), b, nil
}

// WarmFrom is the playbook's first warm snapshot, or DefaultWarmFrom.
func WarmFrom(p *playbooks.Playbook) int {
	if p.SnapshotWarmFrom > 0 {
		return p.SnapshotWarmFrom
	}
	return DefaultWarmFrom
}

// Write writes dir/sweep.json atomically and durably (synced, then renamed, then the folder
// synced): a controller killed at any instant leaves the old sweep.json or the new one, and once
// Write returns, the new one survives a crash of the machine too.
func (s *Sweep) Write(dir string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode sweep.json: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, FileName), bytes.NewReader(append(b, '\n')), atomicfile.Options{Durable: true}); err != nil {
		return fmt.Errorf("write sweep.json: %w", err)
	}
	return nil
}

// ErrNotSweepDir: the folder has no sweep.json.
var ErrNotSweepDir = errors.New("not a sweep folder (no sweep.json)")

// Read reads dir/sweep.json and checks that the folders it names stay inside dir (checkFolder).
func Read(dir string) (*Sweep, error) {
	b, err := readSweepFile(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", dir, ErrNotSweepDir)
	}
	if err != nil {
		return nil, fmt.Errorf("read sweep.json: %w", err)
	}
	var s Sweep
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, FileName), err)
	}
	for _, r := range s.Runs {
		// Names from the file become paths: only rNN folders directly inside the sweep.
		if !validRunDir(r.Dir) {
			return nil, fmt.Errorf("%s: run %d: dir %q is not of the form r01", filepath.Join(dir, FileName), r.Index, r.Dir)
		}
		for _, e := range r.Earlier {
			if e.Dir != "" && !validEarlierDir(e.Dir) {
				return nil, fmt.Errorf("%s: run %d: earlier dir %q is not of the form %s/N/r01", filepath.Join(dir, FileName), r.Index, e.Dir, AttemptsDir)
			}
		}
	}
	if err := checkFolder(dir, &s); err != nil {
		return nil, err
	}
	if s.WarmFrom <= 0 {
		s.WarmFrom = DefaultWarmFrom
	}
	return &s, nil
}

// validEarlierDir: attempts/N/rNN, with an optional .K when a crashed resume had moved one there.
func validEarlierDir(d string) bool {
	parts := strings.Split(d, "/")
	if len(parts) != 3 || parts[0] != AttemptsDir {
		return false
	}
	if _, err := strconv.Atoi(parts[1]); err != nil {
		return false
	}
	base, k, ok := strings.Cut(parts[2], ".")
	if ok {
		if _, err := strconv.Atoi(k); err != nil {
			return false
		}
	}
	return validRunDir(base)
}

func validRunDir(d string) bool {
	if len(d) < 3 || d[0] != 'r' {
		return false
	}
	for _, c := range d[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Label writes settings in axis order, "preload.orders=1M engine.sync_level=0"; "(one setting)"
// when the plan has no matrix.
func Label(axes []Axis, settings map[string]string) string {
	var parts []string
	for _, ax := range axes {
		if v, ok := settings[ax.Key]; ok {
			parts = append(parts, ax.Key+"="+v)
		}
	}
	if len(parts) == 0 {
		// Settings without axes (a single run's manifest): sorted keys.
		keys := make([]string, 0, len(settings))
		for k := range settings {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			parts = append(parts, k+"="+settings[k])
		}
	}
	if len(parts) == 0 {
		return "(one setting)"
	}
	return strings.Join(parts, " ")
}
