package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/internal/untrusted"
	"github.com/rig-dev/rig/rundir"
)

// Set is what one side of a comparison, or one sweep report, reads: the runs of a sweep folder,
// or a single run folder.
type Set struct {
	Dir   string
	Sweep *Sweep // nil for a single run folder
	Runs  []*RunData
}

// RunData is one run's summary and manifest, as `rig run` or `rig report` left them.
type RunData struct {
	Dir      string // the run folder
	Ref      Run    // from sweep.json; for a single run, built from its manifest
	Summary  *analysis.Summary
	Manifest *rundir.Manifest
	Missing  string // why the run has no figures (never ran, no summary.json); "" when it has
	warmFrom int
}

// Load reads a sweep folder (one with sweep.json) or a run folder (one with summary.json or
// manifest.json).
func Load(dir string) (*Set, error) {
	sw, err := Read(dir)
	switch {
	case err == nil:
		set := &Set{Dir: dir, Sweep: sw}
		root, err := os.OpenRoot(dir)
		if err != nil {
			return nil, fmt.Errorf("open sweep folder: %w", err)
		}
		defer root.Close()
		for _, ref := range sw.Runs {
			rd := loadRun(root, dir, ref.Dir, sw.WarmFrom)
			rd.Ref = ref
			set.Runs = append(set.Runs, rd)
		}
		return set, nil
	case !errors.Is(err, ErrNotSweepDir):
		return nil, err
	}
	_, errS := os.Stat(filepath.Join(dir, rundir.SummaryFile))
	_, errM := os.Stat(filepath.Join(dir, rundir.ManifestFile))
	if errS != nil && errM != nil {
		return nil, fmt.Errorf("%s is neither a sweep folder (sweep.json) nor a run folder (summary.json, manifest.json)", dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open run folder: %w", err)
	}
	defer root.Close()
	rd := loadRun(root, dir, ".", 0)
	if rd.Manifest != nil {
		rd.Ref = Run{Dir: ".", Index: 1, Round: rd.Manifest.Round, Settings: rd.Manifest.Settings, RunID: rd.Manifest.RunID, Status: rd.Manifest.Status}
	}
	return &Set{Dir: dir, Runs: []*RunData{rd}}, nil
}

// loadRun reads what there is; what is missing is said in Missing, not returned as an error, so
// a sweep with one failed run still reports the others.
//
// Its files are read through root (the sweep folder, or the run folder itself) at rel: one that
// leads out of it, is not a regular file or is over rundir.MaxJSONBytes is a reason in Missing.
func loadRun(root *os.Root, base, rel string, warmFrom int) *RunData {
	dir := filepath.Join(base, rel)
	rd := &RunData{Dir: dir, warmFrom: warmFrom}
	readJSON := func(name string, v any) error {
		p := filepath.Join(rel, name)
		b, err := untrusted.ReadFileIn(root, p, filepath.Join(base, p), name, rundir.MaxJSONBytes)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, v); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(base, p), err)
		}
		return nil
	}
	var m rundir.Manifest
	if err := readJSON(rundir.ManifestFile, &m); err == nil {
		rd.Manifest = &m
	} else if !errors.Is(err, os.ErrNotExist) {
		rd.Missing = err.Error()
	}
	var s analysis.Summary
	switch err := readJSON(rundir.SummaryFile, &s); {
	case err == nil:
		rd.Summary = &s
	case errors.Is(err, os.ErrNotExist) && rd.Manifest == nil:
		rd.Missing = "never ran (no run folder)"
	case errors.Is(err, os.ErrNotExist):
		rd.Missing = "no summary.json (status " + rd.Manifest.Status + ")"
	default:
		rd.Missing = err.Error()
	}
	if rd.warmFrom == 0 {
		rd.warmFrom = DefaultWarmFrom
		if rd.Manifest != nil {
			if b, err := json.Marshal(rd.Manifest.Playbook); err == nil {
				var p struct {
					WarmFrom int `json:"snapshot_warm_from"`
				}
				if json.Unmarshal(b, &p) == nil && p.WarmFrom > 0 {
					rd.warmFrom = p.WarmFrom
				}
			}
		}
	}
	return rd
}

// Group is one combination of matrix values and every run of it (its rounds).
type Group struct {
	Settings map[string]string
	Label    string
	Runs     []*RunData // in plan order; runs without figures included (see RunData.Missing)
}

// Groups splits the set into combinations, in the order each first appears in the plan.
func (s *Set) Groups() []*Group {
	var axes []Axis
	if s.Sweep != nil {
		axes = s.Sweep.Axes
	}
	var out []*Group
	byLabel := map[string]*Group{}
	for _, r := range s.Runs {
		l := Label(axes, r.Ref.Settings)
		g := byLabel[l]
		if g == nil {
			g = &Group{Settings: r.Ref.Settings, Label: l}
			byLabel[l] = g
			out = append(out, g)
		}
		g.Runs = append(g.Runs, r)
	}
	return out
}

// Values pools a metric over the group's runs that have figures.
func (g *Group) Values(m Metric) []float64 {
	var v []float64
	for _, r := range g.Runs {
		if r.Summary != nil {
			v = append(v, m.Values(r)...)
		}
	}
	return v
}

// Ran counts the group's runs that have figures.
func (g *Group) Ran() int {
	n := 0
	for _, r := range g.Runs {
		if r.Summary != nil {
			n++
		}
	}
	return n
}
