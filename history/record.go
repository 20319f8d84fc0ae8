package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/stats"
	"github.com/rig-dev/rig/sweep"
)

// Record is one run as the index keeps it.
type Record struct {
	RunID  string
	Folder string // where it was read: the run folder, or the archive it came from
	// SweepID, RunDir (r01), Round, Attempt and Combination (the matrix values, in axis order)
	// place a run of a sweep; empty for a lone run.
	SweepID, RunDir   string
	Round, Attempt    int
	Combination       string
	Playbook          string
	ConfigHash        string // rundir.Hash of the run's resolved playbook
	SweepPlaybookHash string // the sweep's playbook_hash (matrix and rounds included)
	Command           []string
	Status, Error     string
	Started, Ended    time.Time
	Target, Stack     string
	// InstanceTypes lists the nodes' EC2 instance types (node=type, sorted); Machine the
	// controller-side facts of a run off EC2: hostname, CPU model, CPUs, memory, kernel.
	InstanceTypes, Machine, Kernel string
	CPUs                           int
	MemBytes                       uint64
	Rig                            rundir.BuildInfo
	Engine                         rundir.EngineBuild
	Load1Start, Load1End           *float64
	Warnings                       int
	Settings                       []Setting
	Figures                        []Figure
}

// Setting is one resolved playbook value, by its playbook path (engine.sync_level), as the
// resolved playbook's JSON has it: in base units (16777216, durations in ns). Matrix marks a
// matrix axis of the run's sweep; a matrix key the JSON lacks keeps the playbook's text.
type Setting struct {
	Key, Value string
	Matrix     bool
}

// Figure is one summary figure of a run (sweep.Metrics: the sweep report's figures, by the same
// keys) with every value the run gave and their spread.
type Figure struct {
	Key, Label, Unit string
	Dir              stats.Direction
	Values           []float64
	Sample           stats.Sample
}

// EngineLabel names the engine build: its version label, else its commit, else its binary's
// hash, shortened.
func (r *Record) EngineLabel() string {
	return engineLabel(r.Engine.Version, r.Engine.Commit, r.Engine.SHA256)
}

func engineLabel(version, commit, sha string) string {
	switch {
	case version != "" && version != "dev":
		return version
	case commit != "":
		return short(commit)
	case sha != "":
		return "sha256:" + short(sha)
	case version != "":
		return version
	}
	return "(unknown)"
}

func short(s string) string { return s[:min(12, len(s))] }

// sweepRunID: a run id <sweep-id>-rNN[-aN] (an archived sweep run has no sweep.json beside it).
var sweepRunID = regexp.MustCompile(`^(.+)-(r\d{2,3})(?:-a\d+)?$`)

// newRecord builds the record of a run that sweep.Load read. It returns the reason the run is
// skipped instead when it is partial: still running (or abandoned), interrupted, or with a
// summary.json or manifest.json that cannot be read.
func newRecord(rd *sweep.RunData, sw *sweep.Sweep, folder string, now time.Time) (*Record, string) {
	m := rd.Manifest
	switch {
	case m == nil && rd.Missing != "":
		return nil, rd.Missing
	case m == nil:
		return nil, "no manifest.json"
	case m.Status == rundir.StatusRunning:
		if gone, heard, err := rundir.Abandoned(rd.Dir, now); err == nil && gone {
			return nil, fmt.Sprintf("abandoned: the manifest says running, its controller was last heard from at %s", heard.Format(time.RFC3339))
		}
		return nil, "still running (manifest status running)"
	case m.Status == rundir.StatusInterrupted:
		return nil, "interrupted: its figures are partial"
	case rd.Missing != "":
		return nil, rd.Missing
	case rd.Summary == nil:
		return nil, "no summary.json"
	case m.RunID == "":
		return nil, "manifest.json has no run_id"
	}
	r := &Record{RunID: m.RunID, Folder: folder, Status: m.Status, Error: m.Error, Started: m.Started, Ended: m.Ended,
		Target: m.Target, Stack: m.Stack, Round: m.Round, ConfigHash: m.ConfigHash, Rig: m.Rig, CPUs: m.CPUs,
		Command: m.Command, Playbook: rd.Summary.Playbook, Warnings: len(rd.Summary.Warnings)}
	if rd.Summary.Status != "" && rd.Summary.Status != rundir.StatusOK && m.Status == rundir.StatusOK {
		r.Status = rd.Summary.Status // the analysis failed a run the manifest called ok
	}
	if len(m.LoadAvg.Start) > 0 {
		r.Load1Start = &m.LoadAvg.Start[0]
	}
	if len(m.LoadAvg.End) > 0 {
		r.Load1End = &m.LoadAvg.End[0]
	}
	if sw != nil {
		r.SweepID, r.RunDir, r.Attempt, r.SweepPlaybookHash = sw.ID, rd.Ref.Dir, rd.Ref.Attempt, sw.PlaybookHash
		r.Combination = sweep.Label(sw.Axes, rd.Ref.Settings)
		if r.Playbook == "" {
			r.Playbook = sw.Playbook
		}
	} else if g := sweepRunID.FindStringSubmatch(m.RunID); g != nil && len(m.Settings) > 0 {
		r.SweepID, r.RunDir = g[1], g[2]
		r.Combination = sweep.Label(nil, m.Settings)
	}
	r.Engine = engineOf(m)
	r.machine(m)
	matrix := m.Settings
	if sw != nil && len(rd.Ref.Settings) > 0 {
		matrix = rd.Ref.Settings
	}
	r.Settings = flatten(m.Playbook, matrix)
	if r.Playbook == "" {
		for _, s := range r.Settings {
			if s.Key == "name" {
				r.Playbook = s.Value
			}
		}
	}
	for _, mt := range sweep.Metrics([]*sweep.RunData{rd}) {
		v := mt.Values(rd)
		if len(v) == 0 {
			continue
		}
		r.Figures = append(r.Figures, Figure{Key: mt.Key, Label: mt.Label, Unit: mt.Unit, Dir: mt.Dir, Values: v, Sample: stats.Describe(v)})
	}
	return r, ""
}

// engineOf is the manifest's engine build; a manifest from before it was recorded ran the
// reference engine inside the rig binary, so it has the rig's version.
func engineOf(m *rundir.Manifest) rundir.EngineBuild {
	if m.Engine != nil {
		return *m.Engine
	}
	var p struct {
		Engine struct {
			Driver string `json:"driver"`
		} `json:"engine"`
	}
	json.Unmarshal(m.Playbook, &p)
	e := rundir.EngineBuild{Driver: p.Engine.Driver}
	if e.Driver == "" || e.Driver == "reference" {
		e.Driver, e.Version, e.Commit = "reference", m.Rig.Version, m.Rig.Commit
	}
	return e
}

// machine fills the instance types, or for nodes off EC2 the facts of the first server.
func (r *Record) machine(m *rundir.Manifest) {
	var types []string
	names := make([]string, 0, len(m.Facts))
	for n := range m.Facts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f := m.Facts[n]
		if f.Instance != nil && f.Instance.Type != "" {
			types = append(types, n+"="+f.Instance.Type)
		}
	}
	r.InstanceTypes = strings.Join(types, ",")
	// The first server's facts (node-0 before client-0), else the first node's.
	sort.SliceStable(names, func(i, j int) bool {
		return strings.HasPrefix(names[i], "node-") && !strings.HasPrefix(names[j], "node-")
	})
	for _, n := range names {
		f := m.Facts[n]
		r.Kernel, r.MemBytes = f.Kernel, f.MemTotalBytes
		if r.CPUs == 0 {
			r.CPUs = f.CPUs
		}
		r.Machine = fmt.Sprintf("%s: %s, %d CPUs, %.1f GiB, %s", f.Hostname, f.CPUModel, f.CPUs, float64(f.MemTotalBytes)/(1<<30), f.Kernel)
		break
	}
}

// flatten turns the resolved playbook (JSON) into its scalar settings by path, the matrix's
// keys marked. The timeline and the matrix itself are left out;
// tuning is tuning.KEY.
func flatten(pb json.RawMessage, matrix map[string]string) []Setting {
	out := map[string]Setting{}
	var v any
	d := json.NewDecoder(bytes.NewReader(pb))
	d.UseNumber()
	if len(pb) > 0 && d.Decode(&v) == nil {
		var walk func(prefix string, v any)
		walk = func(prefix string, v any) {
			switch t := v.(type) {
			case map[string]any:
				for k, c := range t {
					if prefix == "" && (k == "timeline" || k == "matrix" || k == "source") {
						continue
					}
					p := k
					switch {
					case prefix == "engine" && k == "values":
						p = "engine" // the engine's settings are engine.NAME in a playbook
					case prefix != "":
						p = prefix + "." + k
					}
					walk(p, c)
				}
			case []any:
				if prefix == "tuning" {
					for _, e := range t {
						if kv, ok := e.(map[string]any); ok {
							out["tuning."+fmt.Sprint(kv["key"])] = Setting{Key: "tuning." + fmt.Sprint(kv["key"]), Value: fmt.Sprint(kv["value"])}
						}
					}
					return
				}
				b, _ := json.Marshal(t)
				out[prefix] = Setting{Key: prefix, Value: string(b)}
			case nil:
			default:
				out[prefix] = Setting{Key: prefix, Value: fmt.Sprint(t)}
			}
		}
		walk("", v)
	}
	for k, v := range matrix {
		if r, ok := out[k]; ok { // the resolved value, in base units, as every other run has it
			r.Matrix = true
			out[k] = r
			continue
		}
		out[k] = Setting{Key: k, Value: v, Matrix: true}
	}
	keys := make([]string, 0, len(out))
	for k := range out {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := make([]Setting, len(keys))
	for i, k := range keys {
		s[i] = out[k]
	}
	return s
}
