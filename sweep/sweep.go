// Package sweep owns the sweep folder: the runs of one plan of more than one run, kept together
// as results/<sweep-id>/r01, r02, … in plan order, with sweep.json saying which run had which
// matrix values and round. It pools each combination's rounds into one table per experiment
// (with n and the spread), tests every combination against a baseline for a difference that
// stands out of the noise (package stats), draws each figure against each matrix axis, and
// compares two runs or two sweeps (`rig compare`).
package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
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
	Status   string            `json:"status,omitempty"` // empty until the run has ended
}

// RunDir is the folder name of the index-th run (1-based) of a plan of n runs.
func RunDir(index, n int) string {
	if n >= 100 {
		return fmt.Sprintf("r%03d", index)
	}
	return fmt.Sprintf("r%02d", index)
}

// New describes a plan about to run as sweep id.
func New(id string, pl *playbooks.Plan) *Sweep {
	p := pl.Playbook
	s := &Sweep{ID: id, Playbook: p.Name, Source: p.Source, Status: rundir.StatusRunning,
		Started: time.Now().UTC(), Rounds: max(p.Rounds, 1), WarmFrom: WarmFrom(p)}
	for _, ax := range p.Matrix {
		s.Axes = append(s.Axes, Axis{Key: ax.Key, Values: append([]string(nil), ax.Values...)})
	}
	for _, r := range pl.Runs {
		s.Runs = append(s.Runs, Run{Dir: RunDir(r.Index, len(pl.Runs)), Index: r.Index, Round: r.Round, Settings: r.Settings})
	}
	return s
}

// WarmFrom is the playbook's first warm snapshot, or DefaultWarmFrom.
func WarmFrom(p *playbooks.Playbook) int {
	if p.SnapshotWarmFrom > 0 {
		return p.SnapshotWarmFrom
	}
	return DefaultWarmFrom
}

// Write writes dir/sweep.json atomically.
func (s *Sweep) Write(dir string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode sweep.json: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, FileName), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write sweep.json: %w", err)
	}
	return nil
}

// ErrNotSweepDir: the folder has no sweep.json.
var ErrNotSweepDir = errors.New("not a sweep folder (no sweep.json)")

// Read reads dir/sweep.json.
func Read(dir string) (*Sweep, error) {
	b, err := os.ReadFile(filepath.Join(dir, FileName))
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
	}
	if s.WarmFrom <= 0 {
		s.WarmFrom = DefaultWarmFrom
	}
	return &s, nil
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
