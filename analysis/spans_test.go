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

// gcLogLine is a unified JVM log line stamped at ms (the time decorator), as -Xlog:gc*,safepoint
// writes it.
func gcLogLine(ms int64, tags, text string) string {
	return fmt.Sprintf("[%s][%.3fs][info][%-12s] %s\n", at(ms).Format("2006-01-02T15:04:05.000-0700"), float64(ms)/1e3, tags, text)
}

// g1StopLog is a G1 young pause of 80 ms ending at 8.090 s and the safepoint it ran in (82.5 ms,
// 1.5 ms of it to reach the safepoint, ending at 8.091 s), then a cleanup safepoint of its own.
func g1StopLog() string {
	return gcLogLine(8010, "gc,start", "GC(1) Pause Young (Normal) (G1 Evacuation Pause)") +
		gcLogLine(8090, "gc", "GC(1) Pause Young (Normal) (G1 Evacuation Pause) 24M->3M(256M) 80.000ms") +
		gcLogLine(8091, "safepoint", `Safepoint "G1CollectForAllocation", Time since last: 1000000000 ns, Reaching safepoint: 1500000 ns, Cleanup: 1000 ns, At safepoint: 81000000 ns, Total: 82500000 ns`) +
		gcLogLine(15_090, "safepoint", `Safepoint "Cleanup", Time since last: 1000000000 ns, Reaching safepoint: 2000000 ns, Cleanup: 1000 ns, At safepoint: 88000000 ns, Total: 90000000 ns`)
}

// TestGCStopNamedOnce: a G1 pause in the GC log and the safepoint it ran in, in the safepoint
// log, are one stop: the excursion over it names one cause, gc, with the time to reach the
// safepoint in its evidence, and its table has one gc_pause row over the safepoint's extent, no
// safepoint row; a safepoint with no GC in it stays a safepoint.
func TestGCStopNamedOnce(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(20_000, 100, 8000, 15_000)) // [8.000, 8.101] s and [15.000, 15.101] s
	f.run(20_000, "load_end")
	f.run(20_500, "end")
	f.status("node-0", engine.Status{Phase: "ready"})
	if err := os.WriteFile(filepath.Join(f.dir, "node-0", "gc-1.log"), []byte(g1StopLog()), 0o644); err != nil {
		t.Fatal(err)
	}
	s, ex := f.excursions(2, "")
	e := ex[0]
	if len(e.Causes) != 1 || e.Causes[0].Kind != CauseGC || e.Causes[0].Node != "node-0" ||
		!strings.HasPrefix(e.Causes[0].Evidence, "gc_log: 1 span(s) covering 82.500 ms (82 %) of it, longest 82.500 ms (Pause Young (Normal) (G1 Evacuation Pause) 80.000 ms in safepoint G1CollectForAllocation, reached in 1.500 ms)") {
		t.Errorf("causes %+v, want one gc from gc_log with the safepoint's time to reach it", e.Causes)
	}
	if e.CoveredMs != 82.5 {
		t.Errorf("covered %v ms, want 82.5 (the safepoint's extent)", e.CoveredMs)
	}
	if rows := e.Where.Rows; len(rows) != 1 || rows[0].Cause != string(rundir.InsideGCPause) || rows[0].Source != SourceGCLog || rows[0].Count != 1 || rows[0].TotalMs != 82.5 {
		t.Errorf("rows %+v, want one gc_pause row from gc_log", rows)
	}
	if c := s.Excursions.List[1].Causes; len(c) != 1 || c[0].Kind != CauseKind(rundir.InsideSafepoint) || !strings.HasPrefix(c[0].Evidence, rundir.SourceSafepointLog+": ") {
		t.Errorf("excursion at 15 s: causes %+v, want the cleanup safepoint", c)
	}
	if len(s.GCPauses) != 1 || s.GCPauses[0].Count != 1 || s.GCPauses[0].TotalMs != 80 {
		t.Errorf("gc_pauses %+v, want node-0's one 80 ms pause", s.GCPauses)
	}
}

// TestGCLogReadOncePerNode: every GC log is opened once by an analysis, for its GC rows, its
// pauses and its safepoints alike.
func TestGCLogReadOncePerNode(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(20_000, 100, 8000))
	f.run(20_000, "load_end")
	f.run(20_500, "end")
	for _, n := range []string{"node-0", "node-1"} {
		f.status(n, engine.Status{Phase: "ready"})
		if err := os.WriteFile(filepath.Join(f.dir, n, "gc-1.log"), []byte(g1StopLog()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := loadRun(f.close())
	if err != nil {
		t.Fatal(err)
	}
	opens := map[string]int{}
	d.onOpen = func(name string) { opens[name]++ }
	s := d.summarize()
	if len(s.GCPauses) != 2 {
		t.Fatalf("gc_pauses %+v, want both nodes'", s.GCPauses)
	}
	want := map[string]int{"node-0/gc-1.log": 1, "node-1/gc-1.log": 1}
	for name, n := range opens {
		if strings.HasSuffix(name, ".log") && n != want[name] {
			t.Errorf("%s opened %d times, want once", name, n)
		}
	}
	for name := range want {
		if opens[name] == 0 {
			t.Errorf("%s never opened through runData.open", name)
		}
	}
}

// TestExcursionAndWindowJudgedAlike: a snapshot window and an excursion over the same stretch,
// with a GC log's pause and a writeback sample in it, get the same causes, the same covered time
// and the same table from one judge: the GC log's pause is a row of the window's table as of the
// excursion's, and writeback covers time in both.
func TestExcursionAndWindowJudgedAlike(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(20_000, 100, 8000)) // [8.000, 8.101] s
	f.action(8000, "snapshot", "node-0", map[string]any{"index": 1, "leader": "node-0"})
	f.snap(8050, "node-0", 1, 40, nil)
	f.snap(8101, "node-1", 1, 60, nil)
	f.run(20_000, "load_end")
	f.run(20_500, "end")
	f.status("node-0", engine.Status{Phase: "ready"})
	f.status("node-1", engine.Status{Phase: "ready"})
	os.WriteFile(filepath.Join(f.dir, "node-0", "gc-1.log"), []byte(
		gcLogLine(8070, "gc", "GC(1) Pause Young (Normal) (G1 Evacuation Pause) 24M->3M(256M) 60.000ms")), 0o644)
	writeSamples(t, f.dir, "node-1", 20_000, func(ms int64) rundir.Sample {
		s := rundir.Sample{Agent: rundir.SampleProc{PID: 8, CPUPct: 3}}
		if ms == 9000 {
			s.VM.NrWriteback, s.VM.NrDirty = 4000, 90_000
		}
		return s
	})
	s, ex := f.excursions(1, "")
	e := ex[0]
	wi := slices.IndexFunc(s.Windows, func(w TimeWindow) bool { return w.Kind == WindowSnapshot })
	if wi < 0 {
		t.Fatalf("windows %+v, want the snapshot's", s.Windows)
	}
	w := s.Windows[wi]
	if w.FromS != e.StartS || w.ToS != e.EndS {
		t.Fatalf("window %v–%v s, excursion %v–%v s: want the same stretch", w.FromS, w.ToS, e.StartS, e.EndS)
	}
	// The excursion's own causes, less the timeline's (the snapshot action).
	judged := slices.DeleteFunc(slices.Clone(e.Causes), func(c Cause) bool { return c.Kind == CauseAction || c.Kind == CauseRestart })
	var kinds []string
	for _, c := range judged {
		kinds = append(kinds, string(c.Kind)+" "+c.Node)
	}
	if want := []string{"gc node-0", "writeback node-1"}; !slices.Equal(kinds, want) {
		t.Errorf("excursion's causes %q, want %q", kinds, want)
	}
	if !slices.Equal(judged, w.Causes) {
		t.Errorf("window's causes %+v, excursion's %+v: want the same", w.Causes, judged)
	}
	if e.CoveredMs != 101 || w.CoveredMs != e.CoveredMs || w.UnexplainedMs != e.Where.UnexplainedMs || w.UnexplainedMs != 0 {
		t.Errorf("covered: excursion %v ms, window %v ms; unexplained: window %v ms, excursion's table %v ms; want 101, 101, 0, 0",
			e.CoveredMs, w.CoveredMs, w.UnexplainedMs, e.Where.UnexplainedMs)
	}
	if !slices.Equal(w.Rows, e.Where.Rows) || !slices.ContainsFunc(w.Rows, func(r CauseRow) bool { return r.Source == SourceGCLog }) {
		t.Errorf("window rows %+v, excursion rows %+v: want the same, the GC log's pause among them", w.Rows, e.Where.Rows)
	}
}

// TestJVMLogPairsGCWithItsSafepoint reads real JDK 17 output (testdata/gc/safepoint17.log,
// SerialGC): each GC pause logged before a GenCollectForAllocation safepoint is one gc_pause
// span from gc_log over both, the pause whose safepoint line the log does not have (it ends
// first) stays a gc_pause of its own, and the cleanup safepoints stay safepoints.
func TestJVMLogPairsGCWithItsSafepoint(t *testing.T) {
	f, err := os.Open("testdata/gc/safepoint17.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lg, err := parseJVMLog(f)
	if err != nil || lg.unplaced != 0 {
		t.Fatal(err, lg.unplaced)
	}
	if len(lg.pauses) != 3 || len(lg.safepoints) != 6 || !slices.Equal(lg.inSafepoint, []int{2, 4, -1}) {
		t.Fatalf("%d pauses in safepoints %v, %d safepoints; want 3 pauses, the first two in safepoints 2 and 4 of 6", len(lg.pauses), lg.inSafepoint, len(lg.safepoints))
	}
	var gcs, sps []causeSpan
	for _, c := range lg.spans() {
		if c.names == CauseGC {
			gcs = append(gcs, c)
		} else {
			sps = append(sps, c)
		}
	}
	if len(gcs) != 3 || len(sps) != 4 || slices.ContainsFunc(sps, func(c causeSpan) bool { return !strings.HasPrefix(c.detail, "Cleanup: ") }) {
		t.Fatalf("gc spans %+v, safepoint spans %+v; want 3 gc and the 4 cleanups", gcs, sps)
	}
	// GC(0): the pause of 17.402 ms ends at .181, its safepoint of 18.154005 ms at .182.
	end := time.Date(2026, 12, 7, 5, 36, 32, 182e6, time.UTC).UnixNano()
	first := time.Date(2026, 12, 7, 5, 36, 32, 181e6, time.UTC).UnixNano() - 17_402_000
	if g := gcs[0]; g.at != first || g.at+g.dur != end || g.source != SourceGCLog || g.cause != string(rundir.InsideGCPause) ||
		g.x == nil || g.x.evidence != "Pause Young (Allocation Failure) 17.402 ms in safepoint GenCollectForAllocation, reached in 0.349 ms" {
		t.Errorf("first gc span %+v (%+v)", g, g.x)
	}
	if g := gcs[2]; g.x != nil || g.dur != 162_509_000 || g.detail != "Pause Young (Allocation Failure)" {
		t.Errorf("last gc span %+v, want the pause alone", g)
	}
}

// TestSpanSourceAddsEverywhere: a source added to spanSources (as the engines' phases were) is a
// row of every window's and excursion's table and names the excursion it covers, with no other
// change.
func TestSpanSourceAddsEverywhere(t *testing.T) {
	const phase = "toy_phase"
	saved := slices.Clone(spanSources)
	t.Cleanup(func() { spanSources = saved })
	spanSources = append(spanSources, spanSource{"toy phases", func(d *runData, st *spanStream) {
		at := d.origin + 8_010*int64(time.Millisecond)
		st.add("node-0", causeSpan{at: at, dur: 70 * int64(time.Millisecond), cause: phase, source: "toy", detail: "replay",
			w: 1, cover: 1, counted: true, names: CauseKind(phase)})
	}})
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(20_000, 100, 8000)) // [8.000, 8.101] s
	f.action(8000, "snapshot", "node-0", map[string]any{"index": 1, "leader": "node-0"})
	f.snap(8101, "node-0", 1, 40, nil)
	f.run(20_000, "load_end")
	f.run(20_500, "end")
	f.status("node-0", engine.Status{Phase: "ready"})
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	e := s.Excursions.List[0]
	if !slices.ContainsFunc(e.Causes, func(c Cause) bool {
		return c.Kind == phase && strings.HasPrefix(c.Evidence, "toy: 1 span(s) covering 70.000 ms (69 %) of it, longest 70.000 ms (replay)")
	}) {
		t.Errorf("excursion causes %+v, want the toy phase", e.Causes)
	}
	if len(s.Windows) != 1 || len(s.Windows[0].Rows) != 1 || s.Windows[0].Rows[0].Cause != phase || !slices.Contains(s.Windows[0].Sources, "toy") {
		t.Errorf("windows %+v, want the toy phase's row", s.Windows)
	}
}
