package actions

import "github.com/rig-dev/rig/rundir"

// Shape is a shape of window an event opens, which the analysis measures into rows of that shape
// whatever kind's event opened it. Its name is the rows' wherever they go: summary.json's pooled
// figures, report.md's and the sweep's tables, metric keys ("<shape>.<figure>") and the timing
// windows. What a kind declares of its events says which shapes they open (Makes): a reader of
// the snapshot asked (EventKind.Snapshot), a node put down (NodePhase), leadership moved (Moves);
// a step-down or a burst, which nothing else says, is listed (EventKind.Shapes). So a new kind of
// an existing shape gets its rows with no edit in the analysis. A kind with rows of its own
// declares them instead (Rower).
type Shape string

const (
	// ShapeSnapshot is a cluster-wide pause: from the request until the last node ready at it
	// reports the snapshot at the index asked. An event opens one when its kind reads the
	// leader asked and that index of it (EventKind.Snapshot).
	ShapeSnapshot Shape = "snapshot"
	// ShapeRestart is a node taken down until it is relaunched and ready again. An event opens
	// one when it puts its node down (EventKind.NodePhase; Down reads what took it down and the
	// signal).
	ShapeRestart Shape = "restart"
	// ShapeStepDown is leadership handed on when asked (its event always moves the leader)
	// until the next leader reports itself.
	ShapeStepDown Shape = "step_down"
	// ShapeFailover is leadership moved by the event: detection, election, client gap and back
	// to normal. An event that may move leadership opens one (EventKind.Moves; for one that moves
	// it only if it hits the leader, when it did).
	ShapeFailover Shape = "failover"
	// ShapeBurst is the bursts the event has the load generators send (Burster): from each
	// burst's due time until it is absorbed, measured from the load generators' own records.
	ShapeBurst Shape = "burst"
)

// AllShapes are the shapes, in the order report.md's and the sweep's tables list them.
var AllShapes = []Shape{ShapeSnapshot, ShapeRestart, ShapeStepDown, ShapeFailover, ShapeBurst}

// Makes says whether the named event opens a window of the shape sh, from what its kind
// declares of it: each fact once, so no list can disagree with the reader its rows need.
func (c Catalog) Makes(name rundir.ActionName, sh Shape) bool {
	ek := c[name]
	switch sh {
	case ShapeSnapshot:
		return ek.Snapshot != nil
	case ShapeRestart:
		return ek.NodePhase == rundir.PhaseDown
	case ShapeFailover:
		return ek.Moves != ""
	}
	for _, s := range ek.Shapes {
		if s == sh {
			return true
		}
	}
	return false
}
