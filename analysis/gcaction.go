package analysis

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/rig-dev/rig/actions"
)

// gcActionPauses adds, for a node with no GC of its own on record (no GC log, no GC span in its
// recording), the collections the gc action had it run, as the engine answered them
// (actions.GCAction): from the call to its return, so a spike they made is named gc even where
// nothing else records the engine's collections (the reference engine without its flight
// recorder).
func (d *runData) gcActionPauses(gc map[string][]GCPause) map[string][]GCPause {
	acts := d.actions(actions.ActGC)
	if len(acts) == 0 {
		return gc
	}
	inside := d.insideSpans()
	recorded := map[string]bool{}
	for node, ps := range gc {
		recorded[node] = len(ps) > 0
	}
	for node, ss := range inside {
		for _, sp := range ss {
			if insideStall[sp.Kind] == CauseGC {
				recorded[node] = true
				break
			}
		}
	}
	for _, e := range acts {
		if recorded[e.Node] || e.Action.Payload == nil {
			continue
		}
		var a actions.GCAction
		if json.Unmarshal(e.Action.Payload, &a) != nil || a.WallMs <= 0 {
			continue
		}
		if gc == nil {
			gc = map[string][]GCPause{}
		}
		gc[e.Node] = append(gc[e.Node], GCPause{End: e.T.Add(time.Duration(a.WallMs * float64(time.Millisecond))), Ms: a.WallMs,
			What: fmt.Sprintf("collection the gc action asked for: %d collection(s) in %.3f ms, %.3f ms of it stop-the-world, as the engine answered", a.Collections, a.WallMs, a.PauseMs)})
	}
	return gc
}
