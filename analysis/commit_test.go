package analysis

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

func logSync(fromMs, toMs int64) rundir.InsideSpan {
	return rundir.LogSync("raft/log/log-1.seg", at(fromMs), time.Duration(toMs-fromMs)*time.Millisecond, "fsync of raft/log/log-1.seg")
}

// TestLogSyncsCoverOnTheCommitPath: an engine's log syncs (pauses file, engine_syncs) cover client
// latency only where they held the commit. The leader's sync names its excursion; a follower's
// alone does not (the other follower acknowledged meanwhile), both followers' at once do, and so
// does the one follower left while the other is down; a sync in a snapshot window covers none of
// it (the take waits for no command).
func TestLogSyncsCoverOnTheCommitPath(t *testing.T) {
	f := newFixture(t)
	f.roles(-500, "node-0", "node-1", "node-2")
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(30_000, 100, 5000, 8000, 11_000, 21_000)) // 100 ms stalls
	f.action(14_000, "snapshot", "node-0", map[string]any{"index": 7, "leader": "node-0"})
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		f.snap(14_200, n, 7, 150, nil)
	}
	f.action(19_000, "kill", "node-2", map[string]any{"signal": "KILL"})
	f.action(25_000, "relaunch", "node-2", nil)
	f.phase(26_000, "node-2", engine.PhaseReady)
	f.run(30_000, "load_end")
	f.run(30_500, "end")
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		f.status(n, engine.Status{Phase: "ready"})
	}
	writePauses(t, f.dir, "node-0", logSync(5000, 5100), logSync(14_000, 14_190))
	writePauses(t, f.dir, "node-1", logSync(8000, 8100), logSync(11_000, 11_100), logSync(21_000, 21_100))
	writePauses(t, f.dir, "node-2", logSync(11_020, 11_100))
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	ex := s.Excursions
	if ex == nil || ex.Count != 4 {
		t.Fatalf("excursions %+v, want the stalls at 5, 8, 11 and 21 s", ex)
	}
	forces := func(e Excursion) []string {
		var out []string
		for _, c := range e.Causes {
			if c.Kind == CauseKind(rundir.InsideForce) {
				out = append(out, c.Node)
			}
		}
		return out
	}
	for i, c := range []struct {
		when    string
		nodes   []string
		covered float64 // ms, at least
	}{
		{"5 s (the leader's sync)", []string{"node-0"}, 100},
		{"8 s (one follower's, the other acknowledging)", nil, 0},
		{"11 s (both followers')", []string{"node-1", "node-2"}, 80},
		{"21 s (the one follower up)", []string{"node-1"}, 100},
	} {
		e := ex.List[i]
		got := forces(e)
		if !slices.Equal(got, c.nodes) || e.CoveredMs < c.covered || (c.nodes == nil && e.CoveredMs != 0) {
			t.Errorf("excursion at %s: force on %v covering %v ms (causes %+v); want %v, at least %v ms", c.when, got, e.CoveredMs, e.Causes, c.nodes, c.covered)
		}
		if len(c.nodes) > 0 {
			i := slices.IndexFunc(e.Causes, func(x Cause) bool { return x.Kind == CauseKind(rundir.InsideForce) })
			if ev := e.Causes[i].Evidence; !strings.HasPrefix(ev, "engine_syncs: 1 span(s) covering") || !strings.Contains(ev, "fsync of raft/log/log-1.seg") || !strings.Contains(ev, "on commit path") {
				t.Errorf("excursion at %s: evidence %q", c.when, ev)
			}
		}
	}
	// At 11 s node-2 synced from 11.02 s: before it only node-1 was syncing, and node-2
	// acknowledged; from then on both held the commit.
	if e := ex.List[2]; e.CoveredMs > 81 {
		t.Errorf("excursion at 11 s covered %v ms, want at most 81 (not the 20 ms node-2 was free)", e.CoveredMs)
	}
	if e := ex.List[1]; e.Where == nil || !slices.ContainsFunc(e.Where.Rows, func(r CauseRow) bool {
		return r.Node == "node-1" && r.Cause == string(rundir.InsideForce) && r.Thread == "commit path" && strings.Contains(r.Detail, commitBeside)
	}) {
		t.Errorf("excursion at 8 s: rows %+v, want node-1's sync listed as not covering", e.Where)
	}
	if len(s.Windows) == 0 || s.Windows[0].Kind != WindowSnapshot {
		t.Fatalf("windows %+v, want the snapshot's first", s.Windows)
	}
	if w := s.Windows[0]; w.UnexplainedMs != w.LengthMs() || len(w.Causes) != 0 {
		t.Errorf("snapshot window: %v of %v ms unexplained, causes %+v; want the leader's sync not covering it", w.UnexplainedMs, w.LengthMs(), w.Causes)
	}
}

// forceNodes are the nodes an excursion names force on.
func forceNodes(e Excursion) []string {
	var out []string
	for _, c := range e.Causes {
		if c.Kind == CauseKind(rundir.InsideForce) {
			out = append(out, c.Node)
		}
	}
	return out
}

// TestDiskModelLogSyncsOnTheCommitPath: the disk model sees the raft log's syncs too (a file under
// the data folder's raft/), and they are judged as engine_syncs' are. The leader's names its
// excursion; a follower's alone, the other follower acknowledging, does not; a follower's
// snapshot fsync still covers as any force does.
func TestDiskModelLogSyncsOnTheCommitPath(t *testing.T) {
	f := newFixture(t)
	f.roles(-500, "node-0", "node-1", "node-2")
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(15_000, 100, 5000, 8000, 11_000))
	f.run(15_000, "load_end")
	f.run(15_500, "end")
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		f.status(n, engine.Status{Phase: "ready"})
	}
	// The model names a file from its mountpoint, which holds rig/<run id>/ (runner dataDir).
	f.writeJSON("manifest.json", map[string]any{"status": "ok", "run_id": "r1"})
	data := "rig/r1/"
	write := func(node string, ss ...rundir.DiskSync) { writeDiskSyncs(t, f.dir, node, ss...) }
	ds := func(fromMs int64, file string) rundir.DiskSync {
		return rundir.DiskSync{AtNs: at(fromMs).UnixNano(), DurNs: 100 * int64(time.Millisecond), File: data + file, Bytes: 4096}
	}
	write("node-0", ds(5000, "raft/log/log-00000000000000000001.seg"))
	write("node-1", ds(8000, "raft/log/log-00000000000000000001.seg"), ds(11_000, "snapshots/7.snap"))
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	ex := s.Excursions
	if ex == nil || ex.Count != 3 {
		t.Fatalf("excursions %+v, want the stalls at 5, 8 and 11 s", ex)
	}
	for i, c := range []struct {
		when  string
		nodes []string
	}{
		{"5 s (the leader's log sync)", []string{"node-0"}},
		{"8 s (one follower's log sync, the other acknowledging)", nil},
		{"11 s (a follower's snapshot fsync)", []string{"node-1"}},
	} {
		e := ex.List[i]
		if got := forceNodes(e); !slices.Equal(got, c.nodes) || (c.nodes == nil && e.CoveredMs != 0) {
			t.Errorf("excursion at %s: force on %v covering %v ms (causes %+v); want %v", c.when, got, e.CoveredMs, e.Causes, c.nodes)
		}
	}
	if e := ex.List[1]; e.Where == nil || !slices.ContainsFunc(e.Where.Rows, func(r CauseRow) bool {
		return r.Node == "node-1" && r.Source == SourceDiskModel && r.Thread == "commit path" && strings.Contains(r.Detail, commitBeside)
	}) {
		t.Errorf("excursion at 8 s: rows %+v, want node-1's disk-model sync listed as not covering", e.Where)
	}
}

// TestLeaderSyncWithNoQuorumCoversNothing: with both followers down nothing commits, so the
// leader's log sync holds no command and names no excursion.
func TestLeaderSyncWithNoQuorumCoversNothing(t *testing.T) {
	f := newFixture(t)
	f.roles(-500, "node-0", "node-1", "node-2")
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(15_000, 100, 3000, 8000))
	f.action(6000, "kill", "node-1", map[string]any{"signal": "KILL"})
	f.action(6000, "kill", "node-2", map[string]any{"signal": "KILL"})
	f.run(15_000, "load_end")
	f.run(15_500, "end")
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		f.status(n, engine.Status{Phase: "ready"})
	}
	writePauses(t, f.dir, "node-0", logSync(3000, 3100), logSync(8000, 8100))
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	ex := s.Excursions
	if ex == nil || ex.Count != 2 {
		t.Fatalf("excursions %+v, want the stalls at 3 and 8 s", ex)
	}
	if got := forceNodes(ex.List[0]); !slices.Equal(got, []string{"node-0"}) {
		t.Errorf("excursion at 3 s (both followers up): force on %v, want node-0's", got)
	}
	if e := ex.List[1]; len(forceNodes(e)) != 0 || e.CoveredMs != 0 {
		t.Errorf("excursion at 8 s (no follower up): force on %v covering %v ms (causes %+v); want none", forceNodes(e), e.CoveredMs, e.Causes)
	}
}
