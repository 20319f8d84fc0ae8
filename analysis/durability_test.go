package analysis

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// A partition of the leader under load, healed: the ledger's orders are checked against what each
// server holds. An order a majority holds is kept, one only the isolated node took (acknowledged
// by nobody else) is lost, and the fault is named with the partition's length. The new leader,
// 400 ms later, is the partition's: inside the window the engines' timers in effect give (the
// manifest's engine_config), which the report names.
func TestPartitionDurabilityAndWindow(t *testing.T) {
	f := newFixture(t)
	f.writeJSON("manifest.json", map[string]any{"status": "ok", "engine_config": map[string]any{
		"node-0": map[string]any{"heartbeat_timeout": "200ms", "election_timeout": "200ms"},
		"node-1": map[string]any{"heartbeat_timeout": "200ms", "election_timeout": "250ms"},
	}})
	f.role(-1000, "node-0", "leader")
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.action(4000, "partition", "node-0", map[string]any{"as": "leader", "for_ms": 5000, "links": 5})
	f.role(4400, "node-1", "leader")
	f.action(9000, "heal", "node-0", map[string]any{"links": 5})
	f.run(20000, "load_end")
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		f.status(n, engine.Status{Phase: "ready"})
	}
	// 1..100 acknowledged before the partition, 101..150 by the new leader; 151 is held by node-0
	// alone (as if it had answered from a minority: the ledger must catch it).
	f.writeJSON(filepath.Join("node-0", rundir.HeldOrdersFile), engine.HeldOrders{Ranges: [][2]uint64{{1, 100}, {151, 151}}})
	f.writeJSON(filepath.Join("node-1", rundir.HeldOrdersFile), engine.HeldOrders{Ranges: [][2]uint64{{1, 150}}})
	// node-2 answers from the ingress it applied: the check names both.
	f.writeJSON(filepath.Join("node-2", rundir.HeldOrdersFile), engine.HeldOrders{Ranges: [][2]uint64{{1, 150}}, Check: engine.CheckAppliedIngress})
	f.probes(nil) // the load generator's folder, as every probe run leaves it
	w, err := rundir.CreateAcked(filepath.Join(f.dir, rundir.LoadgenDir, rundir.AckedFile))
	if err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 151; id++ {
		if err := w.Write(rundir.Acked{ID: id, Index: id + 10}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// The answers the load generator counted bound the ledger it wrote.
	f.writeJSON(filepath.Join(rundir.LoadgenDir, rundir.StatsFile), rundir.ProbeStats{Answered: 151})
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	d := s.Durability
	if d == nil {
		t.Fatal("no durability")
	}
	if d.Faults != "partition of node-0 for 5s" || d.Acked != 151 || d.Lost != 1 || len(d.LostIDs) != 1 || d.LostIDs[0] != 151 {
		t.Errorf("durability %+v: want the partition named, 151 acknowledged, order 151 lost", d)
	}
	if d.Check != "applied ingress and held orders" {
		t.Errorf("check %q: want both the servers' answers named", d.Check)
	}
	if n := d.Nodes["node-0"]; n.Held != 101 || n.Lost != 50 {
		t.Errorf("node-0 %+v: want 101 held, 50 lost (what it missed while cut off)", n)
	}
	// 2 × 200ms + 3 × 2 × 250ms (the longest election timeout in effect)
	if w := s.LeaderWindow; w.S != 1.9 || len(s.UnplannedLeaderChanges) != 0 {
		t.Errorf("window %+v, unplanned %v: want 1.9 s and the change the partition's", w, s.UnplannedLeaderChanges)
	}
	if len(s.Failovers) != 1 || s.Failovers[0].Action != "partition" || s.Failovers[0].ElectMs == nil || *s.Failovers[0].ElectMs != 400 {
		t.Errorf("failovers %+v: want the partition's, elected in 400 ms", s.Failovers)
	}
	if err := WriteOutputs(f.dir, s); err != nil {
		t.Fatal(err)
	}
	rep, err := os.ReadFile(filepath.Join(f.dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rep), "Checked against: applied ingress and held orders.") {
		t.Errorf("report.md does not say what durability was checked against:\n%s", rep)
	}
	if !strings.Contains(string(rep), "attributed to actions by this rule: each step_down, kill or partition of the leader explains the first change to another leader within 1.9s") {
		t.Errorf("report.md does not name the window:\n%s", rep)
	}
}
