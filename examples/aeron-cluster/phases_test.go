package aeroncluster_test

import (
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/rundir"
)

// TestPhasesRecorded: a real Aeron Cluster under rig takes a snapshot and has a follower killed and
// relaunched; every node's pauses file holds its capture on the service thread (blocking apply,
// as long as the take the harness reports) and the consensus module's persist beside it, and the
// relaunched node its restore (as long as the restore it reports) and the phases after it until
// ready; the report's restart window lists them.
func TestPhasesRecorded(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a three-node Aeron Cluster")
	}
	build(t)
	bin := rigBinary(t)
	pb := rewritePlaybook(t, "follower-restart.yaml", map[string]string{
		"preload: {orders: 100k}": "preload: {orders: 20k}",
		"duration: 50s":           "duration: 25s",
		"  - {at: 30s, kill: {node: other-follower, signal: KILL, relaunch_after: 5s}}\n": "",
	})
	dir, s := runOne(t, bin, pb, "127.0.19.101", 5*time.Minute, "--index", "none")
	defer func() {
		if t.Failed() {
			dumpLogs(t, dir)
		}
	}()
	if len(s.Restarts) != 1 || s.Restarts[0].ReadyS == nil {
		t.Fatalf("restarts %+v, want one follower ready again", s.Restarts)
	}
	killed := s.Restarts[0].Node
	evs, _, err := rundir.ReadEvents(filepath.Join(dir, rundir.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	// The harness's own take and restore times, as /status reported them (snapshot events).
	takeMs, restoreMs := map[string]float64{}, map[string]float64{}
	for _, e := range evs {
		if e.Snapshot == nil {
			continue
		}
		if e.Snapshot.Restored {
			restoreMs[e.Node] = e.Snapshot.RestoreMs
		} else if _, ok := takeMs[e.Node]; !ok {
			takeMs[e.Node] = e.Snapshot.TakeMs
		}
	}
	nodes := 0
	for node, take := range takeMs {
		ss, err := rundir.ReadInside(filepath.Join(dir, node, rundir.PausesFile))
		if err != nil {
			t.Fatalf("%s: %v", node, err)
		}
		kinds := func(k rundir.InsideKind) []rundir.InsideSpan {
			return slices.DeleteFunc(slices.Clone(ss), func(s rundir.InsideSpan) bool { return s.Kind != k || s.Source != rundir.SourceEnginePhases })
		}
		caps, pers := kinds(rundir.PhaseSnapshotCapture), kinds(rundir.PhaseSnapshotPersist)
		if len(caps) == 0 || len(pers) == 0 {
			t.Errorf("%s: %d capture and %d persist spans, want the take's", node, len(caps), len(pers))
			continue
		}
		nodes++
		c, p := caps[0], pers[0]
		if c.Blocks != rundir.BlocksApply || c.DurNs <= 0 || math.Abs(float64(c.DurNs)/1e6-take) > 0.002 {
			t.Errorf("%s: capture %+v, want blocking apply for the take's %.3f ms", node, c, take)
		}
		if p.Blocks != "" || p.DurNs <= 0 || p.AtNs < c.AtNs+c.DurNs-1e6 {
			t.Errorf("%s: persist %+v after capture %+v: want it after the take, beside the apply path", node, p, c)
		}
		if node != killed {
			continue
		}
		rs := kinds(rundir.PhaseRestore)
		if len(rs) != 1 || rs[0].Blocks != rundir.BlocksReady || math.Abs(float64(rs[0].DurNs)/1e6-restoreMs[node]) > 0.002 {
			t.Errorf("%s: restore spans %+v, want one blocking ready for the reported %.3f ms", node, rs, restoreMs[node])
		}
		var after []rundir.InsideSpan
		for _, k := range []rundir.InsideKind{rundir.PhaseJoin, rundir.PhaseReplay, rundir.PhaseCatchUp} {
			for _, sp := range kinds(k) {
				if len(rs) == 1 && sp.AtNs >= rs[0].AtNs {
					after = append(after, sp)
				}
			}
		}
		if len(after) == 0 {
			t.Errorf("%s: no joining, replay or catch-up after the restore: %+v", node, ss)
		}
	}
	if nodes != 3 {
		t.Errorf("%d nodes with their take's spans, want 3 (snapshot events' takes %v)", nodes, takeMs)
	}
	// Its many run-queue rows may push the phases' rows out of the first 24; the totals keep every cause.
	w := slices.IndexFunc(s.Windows, func(w analysis.TimeWindow) bool { return w.Kind == analysis.WindowRestart })
	if w < 0 || !slices.ContainsFunc(s.Windows[w].Totals, func(c analysis.CauseTotal) bool {
		return c.Source == rundir.SourceEnginePhases && c.Cause == string(rundir.PhaseRestore) && c.TotalMs > 0
	}) {
		t.Errorf("restart window without the relaunched node's restore: %+v", s.Windows)
	} else {
		rw := s.Windows[w]
		t.Logf("restart window %.3f–%.3f s: unexplained %.1f ms; %+v", rw.FromS, rw.ToS, rw.UnexplainedMs, rw.Totals)
	}
}
