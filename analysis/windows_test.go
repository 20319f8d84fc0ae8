package analysis

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// writeInside writes node's inside file through rundir.CreateInside, as the recording readers do.
func writeInside(t *testing.T, dir, node string, spans ...rundir.InsideSpan) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, node), 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := rundir.CreateInside(filepath.Join(dir, node, rundir.InsideFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range spans {
		w.Write(s)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func span37(ms, durMs int64, kind rundir.InsideKind, thread string) rundir.InsideSpan {
	return rundir.InsideSpan{AtNs: at(ms).UnixNano(), DurNs: durMs * int64(time.Millisecond), Kind: kind, Source: "jfr", Thread: thread}
}

// TestWindowsWhereTheTimeWent: a snapshot window's table sums the inside spans (clipped to it),
// the disk model's fsyncs and a restart window's host samples per node, thread and cause, and
// says how much of each window no cause covers; an excursion overlapping a GC span from the
// recording is named gc, and one overlapping only a park is not explained by it.
func TestWindowsWhereTheTimeWent(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(30_000, 100, 12_000, 14_000))
	f.action(5000, "snapshot", "node-0", map[string]any{"index": 7, "leader": "node-0"})
	f.snap(5200, "node-0", 7, 180, map[string]any{"persisted_ms": 190})
	f.snap(5250, "node-1", 7, 150, nil)
	f.action(20_000, "kill", "node-1", map[string]any{"signal": "KILL"})
	f.action(21_000, "relaunch", "node-1", nil)
	f.phase(23_000, "node-1", engine.PhaseReady)
	f.run(30_000, "load_end")
	f.run(30_500, "end")
	f.status("node-0", engine.Status{Phase: "ready"})
	f.status("node-1", engine.Status{Phase: "ready"})
	force := func(ms int64) rundir.InsideSpan {
		s := span37(ms, 40, rundir.InsideForce, "archive-conductor")
		s.Role, s.File = rundir.RoleArchiveSegment, "archive/0-1.rec"
		return s
	}
	gc := span37(5150, 20, rundir.InsideGCPause, "VM Thread")
	gc.Detail = "G1 Young"
	cpu := func(ms int64) rundir.InsideSpan {
		s := span37(ms, 10, rundir.InsideCPU, "snapshot")
		s.Detail = "Book.encode"
		return s
	}
	logForce := span37(4990, 30, rundir.InsideForce, "log") // 20 ms of it in the window
	logForce.Role = rundir.RoleLog
	late := gc
	late.AtNs, late.DurNs = at(12_000).UnixNano(), 80*int64(time.Millisecond) // the stall at 12 s
	writeInside(t, f.dir, "node-0",
		logForce, force(5060), force(5110), gc, cpu(5170), cpu(5180),
		span37(5000, 250, rundir.InsidePark, "idle"),
		force(8000), // outside every window
		late,
		span37(14_000, 100, rundir.InsidePark, "idle"), // a park names no excursion
	)
	ds, err := rundir.CreateDiskSyncs(filepath.Join(f.dir, "node-1", rundir.DiskSyncsFile))
	if err != nil {
		t.Fatal(err)
	}
	ds.Write(rundir.DiskSync{AtNs: at(5200).UnixNano(), DurNs: 30 * int64(time.Millisecond), File: "snapshots/7.snap", Bytes: 1 << 20})
	if err := ds.Close(); err != nil {
		t.Fatal(err)
	}
	writeSamples(t, f.dir, "node-0", 30_000, func(ms int64) rundir.Sample {
		s := rundir.Sample{Host: &rundir.SampleHost{BusyPct: 40}, Procs: []rundir.SampleProc{{PID: 7, CPUPct: 25}}, Agent: rundir.SampleProc{PID: 8, CPUPct: 3}}
		if ms == 22_000 || ms == 23_000 { // [21, 23] s: a CPU hog beside the run
			s.Host.BusyPct = 196
		}
		return s
	})
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Windows) != 2 {
		t.Fatalf("%d windows, want the snapshot's and the restart's: %+v", len(s.Windows), s.Windows)
	}
	snap, rs := s.Windows[0], s.Windows[1]
	if snap.Kind != WindowSnapshot || snap.Index != 1 || snap.FromS != 5 || snap.ToS != 5.25 || snap.Open {
		t.Errorf("snapshot window %+v, want snapshot #1 over [5, 5.25] s", snap)
	}
	if want := []string{"jfr", SourceDiskModel, SourceOSSamples}; strings.Join(snap.Sources, ",") != strings.Join(want, ",") {
		t.Errorf("sources %v, want %v", snap.Sources, want)
	}
	row := func(w TimeWindow, node, cause, source, role string) CauseRow {
		t.Helper()
		for _, r := range w.Rows {
			if r.Node == node && r.Cause == cause && r.Source == source && r.Role == role {
				return r
			}
		}
		t.Fatalf("%s #%d: no row %s %s %s %s in %+v", w.Kind, w.Index, node, cause, source, role, w.Rows)
		return CauseRow{}
	}
	for _, c := range []struct {
		r       CauseRow
		thread  string
		count   int
		totalMs float64
		share   float64
		detail  string
	}{
		{row(snap, "node-0", "park", "jfr", ""), "idle", 1, 250, 100, ""},
		{row(snap, "node-0", "force", "jfr", rundir.RoleArchiveSegment), "archive-conductor", 2, 80, 32, "archive/0-1.rec ×2"},
		{row(snap, "node-0", "force", "jfr", rundir.RoleLog), "log", 1, 20, 8, ""},
		{row(snap, "node-0", "gc_pause", "jfr", ""), "VM Thread", 1, 20, 8, "G1 Young ×1"},
		{row(snap, "node-0", "cpu", "jfr", ""), "snapshot", 2, 20, 8, "Book.encode ×2"},
		{row(snap, "node-1", "force", SourceDiskModel, ""), "", 1, 30, 12, "snapshots/7.snap ×1"},
		// [5, 6] s: other processes took 12 % of a core (40 − 25 − 3), under the thresholds.
		{row(snap, "node-0", string(CauseHostCPU), SourceOSSamples, ""), "other processes", 0, 30, 12, ""},
		{row(snap, "node-0", string(CauseAgentCPU), SourceOSSamples, ""), "rig agent", 0, 7.5, 3, ""},
	} {
		if c.r.Thread != c.thread || c.r.Count != c.count || c.r.TotalMs != c.totalMs || c.r.SharePct != c.share || c.r.Detail != c.detail {
			t.Errorf("row %+v, want thread %q, count %d, %v ms, %v %%, detail %q", c.r, c.thread, c.count, c.totalMs, c.share, c.detail)
		}
	}
	if snap.Rows[0].Role != rundir.RoleArchiveSegment || snap.Rows[len(snap.Rows)-1].Cause != "park" {
		t.Errorf("rows not most time first, waits last: %+v", snap.Rows)
	}
	// Covered: 5.00–5.02 (log force), 5.06–5.10, 5.11–5.19 (forces, GC, CPU), 5.20–5.23 (fsync):
	// 170 of 250 ms. The park covers nothing.
	if snap.UnexplainedMs != 80 {
		t.Errorf("snapshot window unexplained %v ms, want 80", snap.UnexplainedMs)
	}
	if rs.Kind != WindowRestart || rs.Node != "node-1" || rs.FromS != 20 || rs.ToS != 23 {
		t.Errorf("restart window %+v, want node-1 over [20, 23] s", rs)
	}
	// 12 % of [20, 21] s and 168 % of [21, 23] s; the two hog samples are over the thresholds,
	// but other processes' CPU covers none of the window: only the run-queue wait it caused the
	// engine's threads would, and none was recorded.
	if h := row(rs, "node-0", string(CauseHostCPU), SourceOSSamples, ""); h.Count != 2 || h.TotalMs != 3480 || h.SharePct != 116 {
		t.Errorf("restart host_cpu %+v, want 2 samples, 3480 ms, 116 %%", h)
	}
	// The node's second down between the kill and the relaunch is the timeline's (phases.go);
	// the two seconds after it nothing covers.
	if rs.UnexplainedMs != 2000 {
		t.Errorf("restart window unexplained %v ms, want 2000", rs.UnexplainedMs)
	}

	ex := s.Excursions
	if ex == nil || ex.Count != 2 {
		t.Fatalf("excursions %+v, want the stalls at 12 and 14 s", ex)
	}
	if c := ex.List[0].Causes; len(c) != 1 || c[0].Kind != CauseGC || c[0].Node != "node-0" || !strings.Contains(c[0].Evidence, "jfr: 1 span(s) covering 80.000 ms (79 %) of it") || !strings.Contains(c[0].Evidence, "VM Thread") {
		t.Errorf("excursion at 12 s: causes %+v, want gc from the recording", c)
	}
	if c := ex.List[1].Causes; len(c) != 0 {
		t.Errorf("excursion at 14 s: causes %+v, want unexplained (a park is no cause)", c)
	}

	md := renderReport(s)
	for _, want := range []string{"## Where the time went, by window", "**snapshot #1 (node-0)**: 5.000 s – 5.250 s (250 ms); **unexplained 80.0 ms (32 %)**",
		"| node-0 | archive-conductor | force (archive_segment) | jfr | 2 | 80.0 ms | 32.0 % | archive/0-1.rec ×2 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md[strings.Index(md, "## Where the time went, by window"):])
		}
	}
}
