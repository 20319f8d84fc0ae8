package aeroncluster_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/rundir"
)

// TestGCPauseNamed ("a GC pause provoked on purpose is named"): the gc action has the
// JVMs run System.gc() through POST /gc (GcHandler) during the load; every latency excursion
// that overlaps one of those collections is attributed to `gc`, from the GC log the playbook
// asks for, and at least one does.
func TestGCPauseNamed(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a three-node Aeron Cluster")
	}
	build(t)
	bin := rigBinary(t)
	pb := rewritePlaybook(t, "engine.yaml", map[string]string{
		// A book of 1M resting orders: a full collection of its heap stops the leader well beyond
		// ten times the probes' p50. With 200k a quiet CI host's collections took 26–38 ms
		// against a threshold of 46.5 ms (p50 4.65 ms), and nothing was slow enough to name.
		"duration: 10s": "preload: {orders: 1M}\nduration: 12s\ntimeline:\n  - {at: 4s, gc: {node: leader}}\n  - {at: 6s, gc: {node: leader}}\n" +
			"  - {at: 8s, gc: {node: leader}}\n  - {at: 10s, gc: {node: follower}}\n",
	})
	dir, s := runOne(t, bin, pb, "127.0.19.81", 4*time.Minute)
	evs, _, err := rundir.ReadEvents(filepath.Join(dir, rundir.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	type gcSpan struct{ from, to float64 }
	var gcs []gcSpan
	origin := time.Time{}
	for _, e := range evs {
		if e.IsRun(rundir.LoadStart) {
			origin = e.T
		}
	}
	for _, e := range evs {
		if !e.IsAction(actions.ActGC) {
			continue
		}
		var a actions.GCAction
		if err := json.Unmarshal(e.Action.Payload, &a); err != nil || a.Collections < 1 {
			t.Errorf("gc on %s answered %s (%v): want at least one collection", e.Node, e.Action.Payload, err)
			continue
		}
		at := e.T.Sub(origin).Seconds()
		gcs = append(gcs, gcSpan{at, at + a.WallMs/1e3})
	}
	if len(gcs) != 4 {
		t.Fatalf("%d gc actions recorded, want 4", len(gcs))
	}
	if s.Excursions == nil {
		t.Fatalf("no excursions in summary.json")
	}
	named := 0
	for _, e := range s.Excursions.List {
		for _, g := range gcs {
			if e.StartS > g.to || e.EndS < g.from {
				continue
			}
			has := false
			for _, c := range e.Causes {
				has = has || c.Kind == analysis.CauseGC
			}
			if !has {
				t.Errorf("excursion %.3f–%.3f s (peak %.1f ms) overlaps the collection at %.3f–%.3f s but is not named gc: %+v", e.StartS, e.EndS, e.PeakMs, g.from, g.to, e.Causes)
			} else {
				named++
				t.Logf("excursion %.3f–%.3f s (peak %.1f ms) over the collection at %.3f–%.3f s: named gc", e.StartS, e.EndS, e.PeakMs, g.from, g.to)
			}
		}
	}
	if named == 0 {
		t.Errorf("no excursion overlaps a provoked collection %v (threshold %.1f ms): %+v", gcs, s.Excursions.ThresholdMs, s.Excursions.List)
	}
	if t.Failed() {
		rep, _ := os.ReadFile(filepath.Join(dir, rundir.ReportFile))
		t.Logf("report.md:\n%s", rep)
	}
}
