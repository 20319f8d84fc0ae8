package actions

import (
	"image/color"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/stats"
)

// What a kind declares of its results, so the analysis iterates over kinds rather than naming
// them: its window (the start event, its Kind, and a Spanner's end event), what its events
// disturb, how the plots mark them and the shapes of the windows they open, whose rows the
// analysis measures (EventKind, Shape), and, for a kind with rows of its own, its figures and
// the row it builds of each window (Rower).

// Window is one interval a kind's events bound: its start event and its end (nil: none was
// recorded, or the kind has no end event; the analysis closes it at the end of the load).
type Window struct {
	Start rundir.Event
	End   *rundir.Event
}

// WindowEvents are the events that open and close the named kind's windows: its own name, and
// its Spanner's end event ("" for a kind whose effect has no end of its own).
func WindowEvents(kind string) (start, end rundir.ActionName, ok bool) {
	s, ok := New(kind)
	if !ok {
		return "", "", false
	}
	start = rundir.ActionName(s.Kind())
	if sp, isSpan := s.(Spanner); isSpan {
		end = sp.EndEvent()
	}
	return start, end, true
}

// Windows are the named kind's windows in events (time order): each start event with the first
// end event after it on the same node.
func Windows(kind string, events []rundir.Event) []Window {
	start, end, ok := WindowEvents(kind)
	if !ok {
		return nil
	}
	var out []Window
	used := map[int]bool{}
	for i, e := range events {
		if !e.IsAction(start) {
			continue
		}
		w := Window{Start: e}
		if end != "" {
			for j := i + 1; j < len(events); j++ {
				if f := events[j]; !used[j] && f.IsAction(end) && f.Node == e.Node {
					used[j], w.End = true, &events[j]
					break
				}
			}
		}
		out = append(out, w)
	}
	return out
}

// Figure is one figure of a kind's rows, declared once: its key (summary.json's and the sweep's
// metric key, after the kind's name: "<kind>.<key>"), its label (report.md's column, the sweep's
// row), its unit ("ms", "s", or what a count counts), which way is better, and whether it is a
// headline.
type Figure struct {
	Key, Label, Unit string
	Dir              stats.Direction
	Headline         bool
}

// RunView is what a kind's row builder may read of the run, on the controller's clock.
type RunView interface {
	// Offset is t in seconds from load start.
	Offset(t time.Time) float64
	// LoadEnd is when the load ended.
	LoadEnd() time.Time
	// Probes are the figures of the probes sent in [from, to).
	Probes(from, to time.Time) ProbeFigures
}

// ProbeFigures are the probes of a window: how many were sent, how many were lost, and their
// latencies (nil where none was answered).
type ProbeFigures struct {
	N, Lost             int
	P50Ms, P99Ms, MaxMs *float64
}

// Rower is a kind with rows of its own: one per window of its events (Windows), each holding the
// figures it declares. The analysis writes them into summary.json (kind_rows, pooled), report.md
// (a table of the kind's) and the sweep's table (a table of the kind's).
type Rower interface {
	Figures() []Figure
	// Row is the window's values by figure key; a figure it cannot give is absent.
	Row(run RunView, w Window) map[string]float64
}

// Catalog is every registered kind's events by name: what the reader checks, and what the
// analysis asks of an event's kind (its plot marker, whether it disturbs clients).
type Catalog map[rundir.ActionName]EventKind

// Events is the Catalog of the registered kinds.
func Events() Catalog { return eventKinds() }

// Disturbs says whether the action opens a fault window for clients: it moves leadership, or may
// (as its event says), or its kind says it disturbs them otherwise (a delay slows links).
func (c Catalog) Disturbs(a *rundir.Action) bool {
	return a.Moves != "" || c[a.Name].Disturbs
}

// Marker is the colour the plots mark the named event with; ok is false for an event no kind
// declares a colour for.
func (c Catalog) Marker(name string) (color.RGBA, bool) {
	ek, ok := c[rundir.ActionName(name)]
	return ek.Marker, ok && ek.Marker != (color.RGBA{})
}

// Fault names e as a fault that may cost acknowledged writes ("" when its kind says it is none).
func (c Catalog) Fault(e rundir.Event) string {
	if e.Action == nil || c[e.Action.Name].Fault == nil {
		return ""
	}
	return c[e.Action.Name].Fault(e)
}

// NodePhase is the phase the action puts its node in ("" none).
func (c Catalog) NodePhase(a *rundir.Action) string {
	if a == nil {
		return ""
	}
	return c[a.Name].NodePhase
}

// Snapshot reads e as a request for a cluster-wide snapshot (ShapeSnapshot), as its kind
// declares (EventKind.Snapshot): the leader asked and the index it answered with; ok is false
// for an event that is none.
func (c Catalog) Snapshot(e rundir.Event) (leader string, index *uint64, ok bool) {
	if e.Action == nil || !c.Makes(e.Action.Name, ShapeSnapshot) || c[e.Action.Name].Snapshot == nil {
		return "", nil, false
	}
	return c[e.Action.Name].Snapshot(e)
}

// Down says, of an event that takes its node down until it is ready again (ShapeRestart), the
// kind that took it down and the signal it sent (EventKind.Down); ok is false for any other event.
func (c Catalog) Down(e rundir.Event) (kind, signal string, ok bool) {
	if e.Action == nil || !c.Makes(e.Action.Name, ShapeRestart) {
		return "", "", false
	}
	if d := c[e.Action.Name].Down; d != nil {
		kind, signal = d(e)
		return kind, signal, true
	}
	return string(e.Action.Name), "", true
}

// Relaunch says whether e relaunches its node: the phase it puts it in is starting.
func (c Catalog) Relaunch(e rundir.Event) bool {
	return c.NodePhase(e.Action) == engine.PhaseStarting
}

// Collected reads e as garbage collections the engine ran when asked (EventKind.Collected).
func (c Catalog) Collected(e rundir.Event) (engine.GCAnswer, bool) {
	if e.Action == nil || c[e.Action.Name].Collected == nil {
		return engine.GCAnswer{}, false
	}
	return c[e.Action.Name].Collected(e)
}

// Markers are the declared marker colours by event name.
func (c Catalog) Markers() map[string]color.RGBA {
	out := map[string]color.RGBA{}
	for name, ek := range c {
		if ek.Marker != (color.RGBA{}) {
			out[string(name)] = ek.Marker
		}
	}
	return out
}
