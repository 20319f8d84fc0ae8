package analysis

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// hogRun is a 25 s run on the local target with OS samples every 500 ms beside two busy loops
// of 300 ms starting at each of hogs (ms from load start), and stalls in the probes at stalls.
func hogRun(t *testing.T, hogs, stalls []int64) *Summary {
	t.Helper()
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(25_000, 60, stalls...))
	f.run(25_000, "load_end")
	f.run(25_500, "end")
	f.status("node-0", engine.Status{Phase: "ready"})
	f.writeJSON(rundir.ManifestFile, map[string]any{"run_id": "r1", "target": "local"})
	p := filepath.Join(f.dir, "node-0", rundir.SamplesDir, "os"+rundir.SamplesExt)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for end := int64(500); end <= 25_000; end += 500 {
		var hogMs int64 // busy-loop time inside [end-500, end]
		for _, h := range hogs {
			hogMs += max(0, min(end, h+300)-max(end-500, h))
		}
		others := 2 * float64(hogMs) / 500 * 100 // two loops
		s := rundir.Sample{Time: at(end), Interval: 0.5, CPUs: 2, Host: &rundir.SampleHost{BusyPct: 30 + others},
			Procs: []rundir.SampleProc{{PID: 7, Comm: "engine", CPUPct: 25}}, Agent: rundir.SampleProc{PID: 8, CPUPct: 3}}
		j, _ := json.Marshal(s)
		b.Write(append(j, '\n'))
	}
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCausePeriodicWithIrregularExcursions: busy loops starting every 3 s (± up to 45 ms)
// beside a run whose excursions fall at irregular times are named a periodic cause, host_cpu
// every 3 s, though no excursion series is periodic.
func TestCausePeriodicWithIrregularExcursions(t *testing.T) {
	jitter := []int64{20, -35, 45, 0, -40, 30, -15, 40}
	var hogs []int64
	for k, j := range jitter {
		hogs = append(hogs, 2000+int64(k)*3000+j)
	}
	s := hogRun(t, hogs, []int64{2100, 6400, 7000, 13_900, 15_300, 21_700})
	ex := s.Excursions
	if ex == nil || ex.Count != 6 || len(ex.Periodic) != 0 {
		t.Fatalf("excursions %+v, want 6 and no periodic excursion series", ex)
	}
	if len(ex.CausePeriodic) != 1 {
		t.Fatalf("periodic causes %+v, want one", ex.CausePeriodic)
	}
	p := ex.CausePeriodic[0]
	if p.Cause != string(CauseHostCPU) || p.Node != HostNode || math.Abs(p.PeriodS-3) > 0.1 || p.Count < 7 || p.Onsets != 8 {
		t.Errorf("periodic cause %+v, want host_cpu on host every 3 s, at least 7 of its 8 onsets", p)
	}
	if rep := excursionsSection(s); !strings.Contains(rep, "**Periodic cause:** host_cpu on host (other processes' CPU over the host thresholds): ") ||
		!strings.Contains(rep, "every 3.0") {
		t.Errorf("report:\n%s", rep)
	}
}

// TestCauseNotPeriodicWhenIrregular: the same busy loops at irregular onsets are not called
// periodic.
func TestCauseNotPeriodicWhenIrregular(t *testing.T) {
	s := hogRun(t, []int64{2000, 3700, 8100, 9200, 14_900, 16_300, 21_100, 23_900}, []int64{6400})
	if ex := s.Excursions; ex == nil || len(ex.CausePeriodic) != 0 {
		t.Errorf("periodic causes %+v, want none", ex)
	}
}

// TestPhasesNotACausePeriodic: an engine's snapshot phases every 3 s are the timeline's own
// beat, not a cause found repeating: no periodic cause is named for them.
func TestPhasesNotACausePeriodic(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(25_000, 60, 6400))
	f.run(25_000, "load_end")
	f.run(25_500, "end")
	f.status("node-0", engine.Status{Phase: "ready"})
	f.writeJSON(rundir.ManifestFile, map[string]any{"run_id": "r1", "target": "local"})
	var b strings.Builder
	for k := int64(0); k < 8; k++ {
		j, _ := json.Marshal(rundir.InsideSpan{AtNs: at(2000 + 3000*k).UnixNano(), DurNs: 20e6, Kind: rundir.PhaseSnapshotCapture,
			Source: rundir.SourceEnginePhases, Blocks: rundir.BlocksApply})
		b.Write(append(j, '\n'))
	}
	if err := os.MkdirAll(filepath.Join(f.dir, "node-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "node-0", rundir.PausesFile), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	if ex := s.Excursions; ex == nil || len(ex.CausePeriodic) != 0 {
		t.Errorf("periodic causes %+v, want none (phases are the timeline's beat)", ex)
	}
}

// TestCauseSourcesOffSaid: a run whose playbook turned the always-on cause sources off says so
// in summary.json and beside its causes in report.md, so its unexplained time is not read as
// the sources' failure.
func TestCauseSourcesOffSaid(t *testing.T) {
	for _, off := range []bool{false, true} {
		f := newFixture(t)
		f.run(0, "load_start")
		f.run(1000, "warmup_end")
		f.probes(stallProbes(25_000, 60, 6400))
		f.run(25_000, "load_end")
		f.run(25_500, "end")
		f.status("node-0", engine.Status{Phase: "ready"})
		pb := map[string]any{"name": "t"}
		if off {
			pb["cause_sources"] = "off"
		}
		f.writeJSON(rundir.ManifestFile, map[string]any{"run_id": "r1", "target": "local", "playbook": pb})
		s, err := Analyze(f.close())
		if err != nil {
			t.Fatal(err)
		}
		said := strings.Contains(excursionsSection(s), "The always-on cause sources were off")
		if s.CauseSourcesOff != off || said != off {
			t.Errorf("cause sources off %v: summary says %v, report says %v", off, s.CauseSourcesOff, said)
		}
	}
}
