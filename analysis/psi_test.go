package analysis

import (
	"slices"
	"strings"
	"testing"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// writePSI writes node's scheduler samples with pressure figures only: every 20 ms over
// [fromMs, toMs], from mk.
func writePSI(t *testing.T, dir, node string, fromMs, toMs int64, mk func(ms int64) rundir.SchedPSI) {
	t.Helper()
	writeSchedFile(t, dir, node, "psi", fromMs, toMs, func(ms int64) rundir.SchedSample {
		psi := mk(ms)
		return rundir.SchedSample{PSI: &psi}
	})
}

// TestPressureStallNamesExcursion: a node whose CPUs were stalled (PSI cpu some) over 80 % of an
// excursion names it psi_cpu and covers that time; an I/O stall of 20 % of it names nothing; the
// run's stall shares are a run-level fact in summary.json and report.md. The same stall in
// another excursion's time does not name this one.
func TestPressureStallNamesExcursion(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(21_000, 100, 8000, 15_000)) // [8.000, 8.101] s and [15.000, 15.101] s
	f.run(21_000, "load_end")
	f.run(21_500, "end")
	f.status("node-0", engine.Status{Phase: "ready"})
	writePSI(t, f.dir, "node-0", 1000, 21_000, func(ms int64) rundir.SchedPSI {
		p := rundir.SchedPSI{CPUSomeUs: 2000} // 10 % of every 20 ms
		if ms > 8000 && ms <= 8100 {
			p.CPUSomeUs, p.IOSomeUs, p.IOFullUs = 16_000, 4000, 1000
		}
		return p
	})
	s, ex := f.excursions(2, "")
	e := ex[0]
	if len(e.Causes) != 1 || e.Causes[0].Kind != CausePSICPU || e.Causes[0].Node != "node-0" {
		t.Fatalf("causes %+v, want psi_cpu on node-0 alone", e.Causes)
	}
	// 80 ms in the five samples inside it less the run's usual 10 %, and nothing of the 1 ms it
	// overlaps the next (at the usual level): a sample's stall is spread over its interval.
	if ev := e.Causes[0].Evidence; !strings.Contains(ev, "some task stalled on cpu above its usual level over 70.000 ms (69 %) of it") {
		t.Errorf("evidence %q", ev)
	}
	if e.CoveredMs != 70 {
		t.Errorf("covered %v ms, want 70", e.CoveredMs)
	}
	if c := s.Excursions.List[1].Causes; len(c) != 0 {
		t.Errorf("second excursion causes %+v, want none (10 %% stalled)", c)
	}
	if len(s.HostPressure) != 1 {
		t.Fatalf("host pressure %+v, want one node", s.HostPressure)
	}
	h := s.HostPressure[0]
	// 1000 samples of 20 ms over 20 s: 995 at 2 ms, 5 at 16 ms → 2.07 s stalled of 20 s.
	if h.Node != "node-0" || h.MeasuredS != 20 || h.CPUSome != 10.4 || h.IOSome != 0.1 {
		t.Errorf("host pressure %+v, want node-0 over 20 s, cpu some 10.4 %%, io some 0.1 %%", h)
	}
	rep := renderReport(s)
	if !strings.Contains(rep, "node-0's CPUs were saturated 10.4 % of the run") {
		t.Errorf("report has no host pressure line:\n%s", rep)
	}
}

// TestPressureOnceOnLocalTarget: on the local target every node's sampler reads the same
// /proc/pressure: the machine is one series (host), and an excursion names psi_cpu once.
func TestPressureOnceOnLocalTarget(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(21_000, 100, 8000))
	f.run(21_000, "load_end")
	f.writeJSON(rundir.ManifestFile, rundir.Manifest{Target: "local"})
	for _, n := range []string{"node-0", "node-1"} {
		f.status(n, engine.Status{Phase: "ready"})
		writePSI(t, f.dir, n, 1000, 21_000, func(ms int64) rundir.SchedPSI {
			if ms > 8000 && ms <= 8100 {
				return rundir.SchedPSI{CPUSomeUs: 20_000}
			}
			return rundir.SchedPSI{}
		})
	}
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	var who []string
	for _, c := range s.Excursions.List[0].Causes {
		who = append(who, string(c.Kind)+" "+c.Node)
	}
	if !slices.Equal(who, []string{"psi_cpu host"}) {
		t.Errorf("causes %v, want psi_cpu once, on host", who)
	}
	if len(s.HostPressure) != 1 || s.HostPressure[0].Node != HostNode {
		t.Errorf("host pressure %+v, want one row for the host", s.HostPressure)
	}
	if rep := renderReport(s); !strings.Contains(rep, "The host's CPUs were saturated 0.5 % of the run") {
		t.Errorf("report:\n%s", rep)
	}
}

// TestSaturatedHostNamesNoStall: a host whose CPUs were stalled over 85 % of every sample all run
// long, and 95 % over an excursion, does not name the excursion psi_cpu: a stall at about its
// usual level is in every interval and explains none of them. The run-level share stays a fact.
func TestSaturatedHostNamesNoStall(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(21_000, 100, 8000, 15_000))
	f.run(21_000, "load_end")
	f.run(21_500, "end")
	f.status("node-0", engine.Status{Phase: "ready"})
	writePSI(t, f.dir, "node-0", 1000, 21_000, func(ms int64) rundir.SchedPSI {
		p := rundir.SchedPSI{CPUSomeUs: 17_000} // 85 % of every 20 ms
		if ms > 8000 && ms <= 8100 {
			p.CPUSomeUs = 19_000
		}
		return p
	})
	s, _ := f.excursions(2, "")
	for _, e := range s.Excursions.List {
		for _, c := range e.Causes {
			if c.Kind == CausePSICPU {
				t.Errorf("excursion at %.3f s named %+v on a host stalled at its usual level", e.StartS, c)
			}
		}
	}
	if len(s.HostPressure) != 1 || s.HostPressure[0].CPUSome < 85 {
		t.Errorf("host pressure %+v, want the run's cpu stall share (about 85 %%) kept", s.HostPressure)
	}
}
