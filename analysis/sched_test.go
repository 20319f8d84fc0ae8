package analysis

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// writeSchedFile writes <node>/sched/<name>.ndjson with one 20 ms scheduler sample ending at
// every 20 ms in (fromMs, toMs], each made by mk.
func writeSchedFile(t *testing.T, dir, node, name string, fromMs, toMs int64, mk func(ms int64) rundir.SchedSample) {
	t.Helper()
	p := filepath.Join(dir, node, rundir.SchedDir, name+rundir.SchedExt)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := rundir.CreateSched(p)
	if err != nil {
		t.Fatal(err)
	}
	for ms := fromMs + 20; ms <= toMs; ms += 20 {
		smp := mk(ms)
		smp.AtNs, smp.IntervalNs = at(ms).UnixNano(), int64(20*time.Millisecond)
		w.Write(smp)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeSched: thread comm of node waited waitMs in every 20 ms interval of (fromMs, toMs].
func writeSched(t *testing.T, dir, node, comm string, fromMs, toMs, waitMs int64) {
	t.Helper()
	writeSchedFile(t, dir, node, "os", fromMs, toMs, func(int64) rundir.SchedSample {
		return rundir.SchedSample{Threads: []rundir.SchedThread{{PID: 7, TID: 9, Comm: comm, WaitNs: waitMs * int64(time.Millisecond)}}}
	})
}

// TestSchedSamplesAreSpans: the scheduler samples' run-queue waits are sched_delay rows of the
// tables of where the time went, per thread, from source schedstat, and cover time there; they
// are not an engine recording.
func TestSchedSamplesAreSpans(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(20_000, 100, 8000)) // [8.000, 8.101] s
	f.run(20_000, "load_end")
	f.run(20_500, "end")
	f.status("node-0", engine.Status{Phase: "ready"})
	writeSched(t, f.dir, "node-0", "apply", 8000, 8100, 15) // 5 intervals of 20 ms, 15 ms waited in each
	s, _ := f.excursions(1, "")
	w := s.Excursions.List[0].Where
	if w == nil || len(w.Rows) != 1 {
		t.Fatalf("where %+v, want one row", w)
	}
	r := w.Rows[0]
	if r.Node != "node-0" || r.Thread != "apply" || r.Cause != string(rundir.InsideSchedDelay) || r.Source != rundir.SourceSchedstat || r.Count != 5 || r.TotalMs != 75 {
		t.Errorf("row %+v, want node-0 apply sched_delay from schedstat, 5 spans, 75 ms", r)
	}
	if w.UnexplainedMs != 26 || !slices.Contains(w.Sources, rundir.SourceSchedstat) {
		t.Errorf("unexplained %v ms, sources %v; want 26 ms (101 − 5 × 15), schedstat among them", w.UnexplainedMs, w.Sources)
	}
	if note := sourcesNote(w.Sources, "excursions"); !strings.Contains(note, "No engine recording") {
		t.Errorf("note %q: scheduler samples are not an engine recording", note)
	}
}

// TestHostCPUOnlyAsRunQueueWait: beside a CPU hog (other processes at 168 % of a core over
// [15, 16] s), a stall at 15.5 s is named host_cpu only when the engine's threads are recorded
// waiting on a run queue over at least half of it: with the scheduler samples it names
// sched_delay and host_cpu and says how much of it they cover; the same run without them names
// nothing, however busy the other processes were.
func TestHostCPUOnlyAsRunQueueWait(t *testing.T) {
	for _, withSched := range []bool{true, false} {
		f := newFixture(t)
		f.run(0, "load_start")
		f.run(1000, "warmup_end")
		f.probes(stallProbes(20_000, 100, 15_500)) // [15.500, 15.601] s
		f.run(20_000, "load_end")
		f.run(20_500, "end")
		f.status("node-0", engine.Status{Phase: "ready"})
		writeSamples(t, f.dir, "node-0", 20_000, func(ms int64) rundir.Sample {
			s := rundir.Sample{Host: &rundir.SampleHost{BusyPct: 40}, Procs: []rundir.SampleProc{{PID: 7, CPUPct: 25}}, Agent: rundir.SampleProc{PID: 8, CPUPct: 3}}
			if ms == 16_000 {
				s.Host.BusyPct = 196
			}
			return s
		})
		if withSched {
			writeSched(t, f.dir, "node-0", "apply", 15_500, 15_600, 16) // 80 of the first 100 ms
		}
		s, ex := f.excursions(1, fmt.Sprint("sched ", withSched))
		e := ex[0]
		var kinds []CauseKind
		for _, c := range e.Causes {
			kinds = append(kinds, c.Kind)
		}
		slices.Sort(kinds)
		if !withSched {
			if len(kinds) != 0 || e.CoveredMs != 0 || s.Excursions.Unexplained != 1 {
				t.Errorf("without scheduler samples: causes %+v, covered %v ms; want none", e.Causes, e.CoveredMs)
			}
			if rep := excursionsSection(s); !strings.Contains(rep, "| 0 % (101 ms unexplained) | **unexplained** |") {
				t.Errorf("report:\n%s", rep)
			}
			continue
		}
		if want := []CauseKind{CauseHostCPU, CauseKind(rundir.InsideSchedDelay)}; !slices.Equal(kinds, want) {
			t.Fatalf("causes %+v, want %v", e.Causes, want)
		}
		for _, c := range e.Causes {
			if c.Kind == CauseHostCPU && !strings.Contains(c.Evidence, "node-0's threads waited on a run queue over 79 % of it while processes other than the engines and rig agents took 168 % of a core") {
				t.Errorf("host_cpu evidence %q", c.Evidence)
			}
		}
		if e.CoveredMs != 80 {
			t.Errorf("covered %v ms, want 80 (five waits of 16 ms)", e.CoveredMs)
		}
		if rep := excursionsSection(s); !strings.Contains(rep, "| 79 % (21.0 ms unexplained) | sched_delay node-0 at 15.500 s: schedstat: 5 sample(s) covering 80.000 ms (79 %) of it (each sample's total spread over its interval), most in one sample 16.000 ms") {
			t.Errorf("report:\n%s", rep)
		}
	}
}

// TestStallNamedOnlyWhenItFitsTheExcursion: a thread's run-queue waits covering 30 % of an
// excursion do not name it; covering 60 % they do.
func TestStallNamedOnlyWhenItFitsTheExcursion(t *testing.T) {
	for _, c := range []struct {
		waitMs int64
		named  bool
	}{{6, false}, {12, true}} {
		f := newFixture(t)
		f.run(0, "load_start")
		f.run(1000, "warmup_end")
		f.probes(stallProbes(20_000, 100, 8000)) // [8.000, 8.101] s
		f.run(20_000, "load_end")
		f.status("node-0", engine.Status{Phase: "ready"})
		writeSched(t, f.dir, "node-0", "apply", 8000, 8100, c.waitMs)
		s, err := Analyze(f.close())
		if err != nil {
			t.Fatal(err)
		}
		e := s.Excursions.List[0]
		if named := len(e.Causes) == 1 && e.Causes[0].Kind == CauseKind(rundir.InsideSchedDelay); named != c.named {
			t.Errorf("waits of %d ms in 20: causes %+v, want named %v", c.waitMs, e.Causes, c.named)
		}
	}
}

// TestLoadgenRunQueueWaitNamed: the client node's scheduler samples (the load generator's
// threads, followed through its pid file) are a node of their own in the excursion's causes and
// its table of where the time went: a send thread's run-queue wait explains late probes.
func TestLoadgenRunQueueWaitNamed(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(20_000, 100, 8000)) // [8.000, 8.101] s
	f.run(20_000, "load_end")
	f.status("node-0", engine.Status{Phase: "ready"})
	writeSched(t, f.dir, "client-0", "rig", 8000, 8100, 15)
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	e := s.Excursions.List[0]
	if len(e.Causes) != 1 || e.Causes[0].Kind != CauseKind(rundir.InsideSchedDelay) || e.Causes[0].Node != "client-0" {
		t.Fatalf("causes %+v, want sched_delay on client-0", e.Causes)
	}
	if w := e.Where; w == nil || len(w.Rows) != 1 || w.Rows[0].Node != "client-0" || w.Rows[0].TotalMs != 75 {
		t.Errorf("where %+v, want client-0's 75 ms of run-queue wait", w)
	}
}

// TestCompilerThreadWaitNamesNothing: a JIT compiler thread that waited 16 of every 20 ms over an
// excursion is a row of its table, but covers none of it and names no cause: its wait holds no
// application thread. The same wait on the service's thread names sched_delay.
func TestCompilerThreadWaitNamesNothing(t *testing.T) {
	for _, comm := range []string{"C2 CompilerThre", "clustered-servi"} {
		f := newFixture(t)
		f.run(0, "load_start")
		f.run(1000, "warmup_end")
		f.probes(stallProbes(20_000, 100, 8000)) // [8.000, 8.101] s
		f.run(20_000, "load_end")
		f.run(20_500, "end")
		f.status("node-0", engine.Status{Phase: "ready"})
		writeSched(t, f.dir, "node-0", comm, 8000, 8100, 16)
		_, ex := f.excursions(1, comm)
		e := ex[0]
		if w := e.Where; w == nil || len(w.Rows) != 1 || w.Rows[0].Thread != comm {
			t.Fatalf("%s: where %+v, want the thread's row", comm, e.Where)
		}
		named := len(e.Causes) == 1 && e.Causes[0].Kind == CauseKind(rundir.InsideSchedDelay)
		if housekeeping := comm == "C2 CompilerThre"; housekeeping == named || housekeeping != (e.CoveredMs == 0) {
			t.Errorf("%s: causes %+v, covered %v ms; want sched_delay named only for the service's thread", comm, e.Causes, e.CoveredMs)
		}
		if comm == "C2 CompilerThre" && !strings.Contains(e.Where.Rows[0].Detail, "housekeeping") {
			t.Errorf("%s: row detail %q, want it to say why it covers nothing", comm, e.Where.Rows[0].Detail)
		}
	}
}
