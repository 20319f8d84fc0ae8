package analysis

import (
	"path/filepath"
	"testing"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// A partition of the leader under load, healed: the ledger's orders are checked against what each
// server holds. An order a majority holds is kept, one only the isolated node took (acknowledged
// by nobody else) is lost, and the fault is named with the partition's length.
func TestDurabilityAfterPartition(t *testing.T) {
	f := newFixture(t)
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
	f.writeJSON(filepath.Join("node-2", rundir.HeldOrdersFile), engine.HeldOrders{Ranges: [][2]uint64{{1, 150}}})
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
	if n := d.Nodes["node-0"]; n.Held != 101 || n.Lost != 50 {
		t.Errorf("node-0 %+v: want 101 held, 50 lost (what it missed while cut off)", n)
	}
}
