package analysis

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/rundir"
)

// TestSendLagNamed: the load generator's own lateness (loadgen/late-sends.ndjson) names an
// excursion of the probes it held up, on the client node that ran them, covering from the first
// late probe's due time to their hand-over; a late send inside a snapshot window is a row of it
// that covers nothing (the window measures the engines' take), and an excursion with no late
// send in it is not named so, nor one whose probes came due while the sender sat in a write the
// server did not read (the span starts at that write's return).
func TestSendLagNamed(t *testing.T) {
	f := newFixture(t)
	f.role(-500, "node-0", engine.RoleLeader)
	f.role(-500, "node-1", engine.RoleFollower)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(30_000, 100, 5000, 8000)) // 100 ms stalls
	f.action(14_000, "snapshot", "node-0", map[string]any{"index": 7, "leader": "node-0"})
	f.snap(14_200, "node-0", 7, 150, nil)
	f.snap(14_200, "node-1", 7, 150, nil)
	f.run(30_000, "load_end")
	f.run(30_500, "end")
	f.status("node-0", engine.Status{Phase: "ready"})
	f.status("node-1", engine.Status{Phase: "ready"})
	f.writeJSON(rundir.ManifestFile, rundir.Manifest{Inventory: &inventory.Inventory{Nodes: []inventory.Node{
		{Name: "node-0", Role: inventory.RoleServer}, {Name: "node-1", Role: inventory.RoleServer}, {Name: "loader", Role: inventory.RoleClient}}}})
	w, err := rundir.CreateLateSends(filepath.Join(f.dir, rundir.LoadgenDir, rundir.LateSendsFile))
	if err != nil {
		t.Fatal(err)
	}
	ns := func(ms int64) int64 { return at(ms).UnixNano() }
	w.Write(rundir.LateSend{DueNs: ns(5000), WokeNs: ns(5090), SentNs: ns(5091), Probes: 9})
	w.Write(rundir.LateSend{DueNs: ns(8000), FromNs: ns(8098), WokeNs: ns(8100), SentNs: ns(8100), Probes: 90})
	w.Write(rundir.LateSend{DueNs: ns(14_000), WokeNs: ns(14_150), SentNs: ns(14_150), Probes: 15})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	ex := s.Excursions
	if ex == nil || ex.Count < 2 {
		t.Fatalf("excursions %+v, want the stalls at 5 and 8 s", ex)
	}
	e := ex.List[0]
	i := slices.IndexFunc(e.Causes, func(c Cause) bool { return c.Kind == CauseSendLag })
	if i < 0 || e.Causes[i].Node != "loader" || !strings.HasPrefix(e.Causes[i].Evidence, "loadgen: 1 span(s) covering 90.000 ms") ||
		!strings.Contains(e.Causes[i].Evidence, "on probe sender") {
		t.Fatalf("excursion at 5 s: causes %+v, want send_lag on loader covering 90 ms", e.Causes)
	}
	if e.CoveredMs < 90 || !slices.Contains(e.Where.Sources, SourceLoadgen) {
		t.Errorf("excursion at 5 s: covered %v ms, sources %v; want 90 ms from loadgen", e.CoveredMs, e.Where.Sources)
	}
	if slices.ContainsFunc(ex.List[1].Causes, func(c Cause) bool { return c.Kind == CauseSendLag }) {
		t.Errorf("excursion at 8 s: causes %+v, want no send_lag (the sender sat in a write the server did not read)", ex.List[1].Causes)
	}
	w0 := s.Windows[0]
	if w0.Kind != WindowSnapshot || w0.UnexplainedMs != w0.LengthMs() ||
		!slices.ContainsFunc(w0.Rows, func(r CauseRow) bool { return r.Cause == string(CauseSendLag) && r.Detail == phaseBeside+" ×1" }) {
		t.Errorf("snapshot window %+v: want the late send as a row covering nothing", w0)
	}
}
