package analysis

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

func phaseSpan(fromMs, toMs int64, kind rundir.InsideKind, blocks string) rundir.InsideSpan {
	return rundir.InsideSpan{AtNs: at(fromMs).UnixNano(), DurNs: (toMs - fromMs) * int64(time.Millisecond), Kind: kind,
		Source: rundir.SourceEnginePhases, Blocks: blocks, Detail: string(kind) + " detail"}
}

func writePauses(t *testing.T, dir, node string, spans ...rundir.InsideSpan) {
	t.Helper()
	w, err := rundir.CreatePauses(filepath.Join(dir, node, rundir.PausesFile))
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

// TestEnginePhasesCover: the engines' own phases from their pauses files cover a snapshot window
// (every node's take) and a restart window (the relaunched node's time down, restore, joining,
// replay and catch-up); the leader's capture, which blocked its apply path, names the excursion
// it covers. A follower's capture, a persist beside the leader's apply path and a relaunched
// node's catch-up are listed where they ran but name no excursion and cover none of it.
func TestEnginePhasesCover(t *testing.T) {
	f := newFixture(t)
	f.role(-500, "node-0", engine.RoleLeader)
	f.role(-500, "node-1", engine.RoleFollower)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(30_000, 100, 5000, 12_000, 14_000, 22_100)) // 100 ms stalls
	f.action(5000, "snapshot", "node-0", map[string]any{"index": 7, "leader": "node-0"})
	f.snap(5200, "node-0", 7, 190, nil)
	f.snap(5250, "node-1", 7, 230, nil)
	f.action(20_000, "kill", "node-1", map[string]any{"signal": "KILL"})
	f.action(21_000, "relaunch", "node-1", nil)
	f.phase(23_000, "node-1", engine.PhaseReady)
	f.run(30_000, "load_end")
	f.run(30_500, "end")
	f.status("node-0", engine.Status{Phase: "ready"})
	f.status("node-1", engine.Status{Phase: "ready"})
	writePauses(t, f.dir, "node-0",
		phaseSpan(5010, 5110, rundir.PhaseSnapshotCapture, rundir.BlocksApply),
		phaseSpan(5110, 5200, rundir.PhaseSnapshotPersist, rundir.BlocksApply),
		phaseSpan(14_000, 14_100, rundir.PhaseSnapshotPersist, ""), // beside the apply path
		rundir.InsideSpan{AtNs: at(5150).UnixNano(), DurNs: int64(time.Millisecond), Kind: rundir.InsideGCPause, Source: rundir.SourceGoRuntime},
	)
	writePauses(t, f.dir, "node-1",
		phaseSpan(5020, 5180, rundir.PhaseSnapshotCapture, rundir.BlocksApply),
		phaseSpan(5180, 5250, rundir.PhaseSnapshotPersist, rundir.BlocksApply),
		phaseSpan(12_000, 12_100, rundir.PhaseSnapshotCapture, rundir.BlocksApply), // a follower's
		phaseSpan(21_100, 21_300, rundir.PhaseRestore, rundir.BlocksReady),
		phaseSpan(21_300, 21_500, rundir.PhaseJoin, rundir.BlocksReady),
		phaseSpan(21_500, 22_000, rundir.PhaseReplay, rundir.BlocksReady),
		phaseSpan(22_000, 22_990, rundir.PhaseCatchUp, rundir.BlocksReady),
	)
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Windows) != 2 {
		t.Fatalf("%d windows, want the snapshot's and the restart's", len(s.Windows))
	}
	snap, rs := s.Windows[0], s.Windows[1]
	for _, src := range []string{rundir.SourceEnginePhases, rundir.SourceGoRuntime} {
		if !slices.Contains(snap.Sources, src) {
			t.Errorf("sources %v lack %s", snap.Sources, src)
		}
	}
	if !slices.Contains(rs.Sources, SourceTimeline) || slices.Contains(snap.Sources, SourceTimeline) {
		t.Errorf("sources %v and %v: want the timeline in the restart window's alone", snap.Sources, rs.Sources)
	}
	row := func(w TimeWindow, node, cause, source string) CauseRow {
		t.Helper()
		i := slices.IndexFunc(w.Rows, func(r CauseRow) bool { return r.Node == node && r.Cause == cause && r.Source == source })
		if i < 0 {
			t.Fatalf("%s #%d: no row %s %s %s in %+v", w.Kind, w.Index, node, cause, source, w.Rows)
		}
		return w.Rows[i]
	}
	// [5.000, 5.250] s: the two nodes' takes cover all of it but its first 10 ms.
	if snap.UnexplainedMs != 10 {
		t.Errorf("snapshot window unexplained %v ms, want 10 (before the first capture)", snap.UnexplainedMs)
	}
	if r := row(snap, "node-0", string(rundir.PhaseSnapshotCapture), rundir.SourceEnginePhases); r.TotalMs != 100 || r.Thread != "apply path" || r.Count != 1 {
		t.Errorf("leader's capture row %+v, want 100 ms on the apply path", r)
	}
	if r := row(snap, "node-1", string(rundir.PhaseSnapshotPersist), rundir.SourceEnginePhases); r.TotalMs != 70 {
		t.Errorf("follower's persist row %+v, want 70 ms", r)
	}
	// [20, 23] s: down 1 s (the timeline's kill and relaunch), starting until the restore at
	// 21.1 s, then the phases to 22.99 s: 10 ms left, between the engine's ready and the event.
	if rs.UnexplainedMs != 10 {
		t.Errorf("restart window unexplained %v ms, want 10", rs.UnexplainedMs)
	}
	if r := row(rs, "node-1", causeDown, SourceTimeline); r.TotalMs != 1000 {
		t.Errorf("down row %+v, want 1000 ms", r)
	}
	if r := row(rs, "node-1", causeStart, SourceTimeline); r.TotalMs != 100 || r.Detail != "relaunched, starting until its restore began ×1" {
		t.Errorf("start row %+v, want 100 ms to the restore", r)
	}
	if r := row(rs, "node-1", string(rundir.PhaseCatchUp), rundir.SourceEnginePhases); r.TotalMs != 990 {
		t.Errorf("catch-up row %+v, want 990 ms", r)
	}

	ex := s.Excursions
	if ex == nil || ex.Count != 4 {
		t.Fatalf("excursions %+v, want the stalls at 5, 12, 14 and 22.1 s", ex)
	}
	phaseCause := func(e Excursion) []Cause {
		return slices.DeleteFunc(slices.Clone(e.Causes), func(c Cause) bool { return !slices.Contains(rundir.PhaseKinds, rundir.InsideKind(c.Kind)) })
	}
	e := ex.List[0]
	if c := phaseCause(e); len(c) != 1 || c[0].Kind != CauseKind(rundir.PhaseSnapshotCapture) || c[0].Node != "node-0" ||
		!strings.Contains(c[0].Evidence, "engine_phases: 1 span(s) covering") || !strings.Contains(c[0].Evidence, "on apply path") {
		t.Errorf("excursion at 5 s: phase causes %+v, want the leader's snapshot_capture", c)
	}
	// [5.000, 5.101] s: the leader's capture from 5.010 s and persist from 5.110 s; only the
	// capture covers half of it, but both blocked the apply path.
	if want := 91.0; e.CoveredMs < want {
		t.Errorf("excursion at 5 s covered %v ms, want at least %v (the leader's capture)", e.CoveredMs, want)
	}
	for i, when := range []string{"12 s (a follower's capture)", "14 s (a persist beside the apply path)", "22.1 s (a relaunched follower's catch-up)"} {
		e := ex.List[i+1]
		if c := phaseCause(e); len(c) != 0 || e.CoveredMs != 0 {
			t.Errorf("excursion at %s: phase causes %+v, covered %v ms; want none", when, c, e.CoveredMs)
		}
		if e.Where == nil || e.Where.UnexplainedMs != e.LengthMs() {
			t.Errorf("excursion at %s: table %+v, want all of it unexplained", when, e.Where)
		}
	}
	md := renderReport(s)
	if !strings.Contains(md, "| node-0 | apply path | snapshot_capture | engine_phases | 1 | 100 ms |") {
		t.Errorf("report lacks the leader's capture row:\n%s", md[strings.Index(md, "## Where the time went, by window"):])
	}
}
