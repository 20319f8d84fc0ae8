package analysis

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/engine"
)

// A gc action's collection, as the engine answered it, names the spike it made `gc` on a node
// with no GC of its own on record (no GC log, no GC span); where a GC log records the node's
// collections, the log does and the answer adds nothing.
func TestGCActionNamesItsSpike(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(20_000, 60, 8000, 12_000))
	f.action(8000, "gc", "node-0", map[string]any{"as": "leader", "wall_ms": 60, "collections": 1, "pause_ms": 0.2})
	f.action(12_000, "gc", "node-1", map[string]any{"as": "follower", "wall_ms": 60, "collections": 1, "pause_ms": 55})
	f.run(20_000, "load_end")
	f.run(20_500, "end")
	f.status("node-0", engine.Status{Phase: "ready"})
	f.status("node-1", engine.Status{Phase: "ready"})
	stamp := at(3000).Format("2006-01-02T15:04:05.000-0700")
	os.WriteFile(filepath.Join(f.dir, "node-1", "gc-1.log"), []byte(
		"["+stamp+"][3.0s][info][gc          ] GC(1) Pause Young (Normal) (G1 Evacuation Pause) 6M->3M(24M) 2.000ms\n"), 0o644)
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	if s.Excursions == nil || s.Excursions.Count != 2 {
		t.Fatalf("excursions %+v, want the stalls at 8 and 12 s", s.Excursions)
	}
	var got [2][]string
	for i, e := range s.Excursions.List {
		for _, c := range e.Causes {
			got[i] = append(got[i], string(c.Kind)+" "+c.Node+": "+c.Evidence)
		}
	}
	if len(got[0]) != 2 || !strings.HasPrefix(got[0][0], "action node-0: gc action") ||
		!strings.HasPrefix(got[0][1], "gc node-0: gc_action: 1 span(s) covering 60.000 ms (98 %) of it, longest 60.000 ms (collection the gc action asked for: 1 collection(s) in 60.000 ms, 0.200 ms of it stop-the-world") {
		t.Errorf("excursion at 8 s: %q, want the action and gc from the engine's answer", got[0])
	}
	if len(got[1]) != 1 || !strings.HasPrefix(got[1][0], "action node-1") {
		t.Errorf("excursion at 12 s: %q, want only the action (node-1's GC log has no pause then)", got[1])
	}
}
