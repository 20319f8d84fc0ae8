package analysis

import (
	"fmt"
	"time"

	"github.com/rig-dev/rig/rundir"
)

// readGCActionSource adds, for a node with no GC of its own on record (no GC log pause, no GC
// span in its recording), the collections the gc action had it run, as the engine answered them
// (actions.EventKind.Collected): from the call to its return, so a spike they made is named gc even where
// nothing else records the engine's collections (the reference engine without its flight
// recorder). The Go runtime's pause record does not count as on record here: it holds a
// collection's stops only, not the mark a forced collection runs beside the apply path, which the
// answer's wall time covers. It reads after the GC logs, the recordings and the pause records,
// from the stream.
func readGCActionSource(d *runData, st *spanStream) {
	acts := d.actions(collects)
	if len(acts) == 0 {
		return
	}
	recorded := map[string]bool{}
	for node, ps := range st.gc {
		recorded[node] = len(ps) > 0
	}
	for node, ss := range st.byNode {
		for _, sp := range ss {
			if sp.names == CauseGC && sp.source != rundir.SourceGoRuntime {
				recorded[node] = true
				break
			}
		}
	}
	for _, e := range acts {
		a, _ := d.kinds().Collected(e)
		if recorded[e.Node] || a.WallMs <= 0 {
			continue
		}
		p := GCPause{End: e.T.Add(time.Duration(a.WallMs * float64(time.Millisecond))), Ms: a.WallMs,
			What: fmt.Sprintf("collection the gc action asked for: %d collection(s) in %.3f ms, %.3f ms of it stop-the-world, as the engine answered", a.Collections, a.WallMs, a.PauseMs)}
		st.gc[e.Node] = append(st.gc[e.Node], p)
		at := e.T.UnixNano()
		st.add(e.Node, causeSpan{at: at, dur: p.End.UnixNano() - at, cause: string(rundir.InsideGCPause), source: SourceGCAction, detail: p.What,
			w: 1, cover: 1, counted: true, names: CauseGC})
	}
}

// SourceGCAction is the gc action's answers among the sources of the tables of where the time
// went.
const SourceGCAction = "gc_action"
