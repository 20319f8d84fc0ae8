package actions

import "github.com/rig-dev/rig/rundir"

// Shape is a shape of window an event opens, which the analysis measures into rows of that shape
// whatever kind's event opened it. Its name is the rows' wherever they go: summary.json's pooled
// figures, report.md's and the sweep's tables, metric keys ("<shape>.<figure>") and the timing
// windows. A kind declares the shapes its events open (EventKind.Shapes) beside what their rows
// read of an event (EventKind.Snapshot, Down), so a new kind of an existing shape gets its rows
// with no edit in the analysis. A kind with rows of its own declares them instead (Rower).
type Shape string

const (
	// ShapeSnapshot is a cluster-wide pause: from the request until the last node ready at it
	// reports the snapshot at the index asked (EventKind.Snapshot reads the leader asked and
	// that index).
	ShapeSnapshot Shape = "snapshot"
	// ShapeRestart is a node taken down (its event's NodePhase is down) until it is relaunched
	// and ready again (EventKind.Down reads what took it down and the signal).
	ShapeRestart Shape = "restart"
	// ShapeStepDown is leadership handed on when asked (its event always moves the leader)
	// until the next leader reports itself.
	ShapeStepDown Shape = "step_down"
	// ShapeFailover is leadership moved by the event. It is not listed but follows from the
	// event's Moves (Makes): an event that may move leadership opens one (for one that moves it only if
	// it hits the leader, when it did): detection, election, client gap and back to normal.
	ShapeFailover Shape = "failover"
	// ShapeBurst is the bursts the event has the load generators send (Burster): from each
	// burst's due time until it is absorbed, measured from the load generators' own records.
	ShapeBurst Shape = "burst"
)

// AllShapes are the shapes, in the order report.md's and the sweep's tables list them.
var AllShapes = []Shape{ShapeSnapshot, ShapeRestart, ShapeStepDown, ShapeFailover, ShapeBurst}

// Makes says whether the named event opens a window of the shape sh, as its kind declares: in
// Shapes, or for ShapeFailover by what it does to leadership (Moves).
func (c Catalog) Makes(name rundir.ActionName, sh Shape) bool {
	if sh == ShapeFailover {
		return c[name].Moves != ""
	}
	for _, s := range c[name].Shapes {
		if s == sh {
			return true
		}
	}
	return false
}
