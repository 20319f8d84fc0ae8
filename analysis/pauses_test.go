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

// TestParseSafepoints reads JDK 17's safepoint lines (testdata/gc/safepoint17.log: GcChurn.java
// run with -XX:+UseSerialGC -Xlog:gc*,safepoint:file=…:time,uptime,level,tags) as safepoint
// spans ending at each line's time, the GC lines beside them left to the GC log's parser; a
// line without the time decorator is counted, not placed.
func TestParseSafepoints(t *testing.T) {
	f, err := os.Open("testdata/gc/safepoint17.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ss, unplaced, err := ParseSafepoints(f)
	if err != nil || unplaced != 0 {
		t.Fatal(err, unplaced)
	}
	if len(ss) != 6 {
		t.Fatalf("%d spans, want the 6 safepoint lines", len(ss))
	}
	end := time.Date(2026, 12, 7, 5, 36, 29, 739e6, time.UTC).UnixNano()
	if s := ss[0]; s.AtNs != end-19958111 || s.DurNs != 19958111 || s.Kind != rundir.InsideSafepoint || s.Source != rundir.SourceSafepointLog ||
		s.Detail != "Cleanup: reaching the safepoint 2.189 ms, at it 17.700 ms" {
		t.Errorf("first span %+v", s)
	}
	if !strings.HasPrefix(ss[2].Detail, "GenCollectForAllocation: ") {
		t.Errorf("third span %+v, want the GC's safepoint", ss[2])
	}
	jdk11 := `[1.2s][info][safepoint] Safepoint "Cleanup", Time since last: 10 ns, Reaching safepoint: 2 ns, At safepoint: 3 ns, Total: 5 ns` + "\n"
	if ss, unplaced, err := ParseSafepoints(strings.NewReader(jdk11)); err != nil || len(ss) != 0 || unplaced != 1 {
		t.Errorf("a line without the time decorator: %+v, %d unplaced, %v; want it counted as unplaced", ss, unplaced, err)
	}
}

// TestAlwaysOnPausesNamed: a Go engine's GC pause from its pauses file names the excursion it
// covers gc (source go_runtime), a JVM's safepoint from its unified log names another
// safepoint (source safepoint_log); both are rows of the excursions' tables, and neither is an
// engine recording.
func TestAlwaysOnPausesNamed(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(20_000, 100, 8000, 15_000)) // [8.000, 8.101] s and [15.000, 15.101] s
	f.run(20_000, "load_end")
	f.status("node-0", engine.Status{Phase: "ready"})
	f.status("node-1", engine.Status{Phase: "ready"})
	w, err := rundir.CreatePauses(filepath.Join(f.dir, "node-0", rundir.PausesFile))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(rundir.InsideSpan{AtNs: at(8010).UnixNano(), DurNs: int64(80 * time.Millisecond), Kind: rundir.InsideGCPause, Source: rundir.SourceGoRuntime, Detail: "GC 7"})
	w.Write(rundir.InsideSpan{AtNs: at(15_010).UnixNano(), DurNs: int64(time.Millisecond), Kind: rundir.InsideGCPause, Source: rundir.SourceGoRuntime, Detail: "GC 8"})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf(`[%s][1.0s][info][safepoint   ] Safepoint "G1CollectForAllocation", Time since last: 1 ns, Reaching safepoint: 30000000 ns, Cleanup: 1 ns, At safepoint: 40000000 ns, Total: 70000000 ns`+"\n",
		at(15_090).Format("2006-01-02T15:04:05.000-0700"))
	if err := os.WriteFile(filepath.Join(f.dir, "node-1", "gc-4242.log"), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	if s.Excursions == nil || s.Excursions.Count != 2 {
		t.Fatalf("excursions %+v, want 2", s.Excursions)
	}
	for i, want := range []struct {
		kind      CauseKind
		node, src string
		covered   float64
	}{{CauseGC, "node-0", rundir.SourceGoRuntime, 80}, {CauseKind(rundir.InsideSafepoint), "node-1", rundir.SourceSafepointLog, 70}} {
		e := s.Excursions.List[i]
		if len(e.Causes) != 1 || e.Causes[0].Kind != want.kind || e.Causes[0].Node != want.node || !strings.HasPrefix(e.Causes[0].Evidence, want.src+":") {
			t.Errorf("excursion %d: causes %+v, want %s on %s from %s", i, e.Causes, want.kind, want.node, want.src)
		}
		if e.CoveredMs != want.covered {
			t.Errorf("excursion %d: covered %v ms, want %v", i, e.CoveredMs, want.covered)
		}
		if e.Where == nil || !slices.ContainsFunc(e.Where.Rows, func(r CauseRow) bool { return r.Source == want.src && r.Node == want.node }) {
			t.Errorf("excursion %d: where %+v, want a %s row", i, e.Where, want.src)
		}
		if note := sourcesNote(e.Where.Sources, "excursions"); !strings.Contains(note, "No engine recording") {
			t.Errorf("note %q: the always-on pause records are not an engine recording", note)
		}
	}
}

// A recording cut to windows is a source only where it ran: a table wholly inside one of its
// stretches lists it, one outside (or straddling a stretch's edge) lists only the always-on
// sources, so its note says no engine recording was there.
func TestRecordingWindowsSourceOnlyWhereRecorded(t *testing.T) {
	names := []string{"jfr", SourceDiskModel, SourceOSSamples}
	d := &runData{man: rundir.Manifest{Recorded: []rundir.Stretch{{FromNs: 1000, ToNs: 2000}, {FromNs: 5000, ToNs: 6000}}}}
	for _, c := range []struct {
		from, to int64
		want     []string
	}{
		{1100, 1900, names},
		{5000, 6000, names},
		{2500, 3000, []string{SourceDiskModel, SourceOSSamples}},
		{1900, 2100, []string{SourceDiskModel, SourceOSSamples}},
	} {
		if got := d.sourcesOver(names, c.from, c.to); !slices.Equal(got, c.want) {
			t.Errorf("[%d, %d]: sources %v, want %v", c.from, c.to, got, c.want)
		}
	}
	if got := (&runData{}).sourcesOver(names, 2500, 3000); !slices.Equal(got, names) {
		t.Errorf("a recording throughout: sources %v, want %v", got, names)
	}
	if !slices.Equal(names, []string{"jfr", SourceDiskModel, SourceOSSamples}) {
		t.Errorf("sourcesOver changed its argument: %v", names)
	}
	if note := sourcesNote(d.sourcesOver(names, 2500, 3000), "excursions"); !strings.Contains(note, "No engine recording") {
		t.Errorf("note outside the recorded stretches: %q", note)
	}
}
