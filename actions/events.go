package actions

import (
	"encoding/json"
	"fmt"
	"image/color"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// EventKind is one event a kind records in events.jsonl: its name, its payload's type, and what
// it did to leadership in folders written before events said so. rundir knows only the envelope
// (rundir.Action); the names and payloads are their kinds'.
type EventKind struct {
	Name rundir.ActionName
	// Payload is a pointer to a new payload of the event; nil: it carries none (or one that the
	// reader does not check, kept as written).
	Payload func() any
	// Moves is what the event does to leadership: new events say it themselves
	// (rundir.Action.Moves), and Reader fills it in for folders written before they did.
	Moves rundir.LeaderMove
	// Disturbs: the event opens a fault window for clients even when it moves no leader (a
	// delay slows links).
	Disturbs bool
	// Marker is the colour the plots mark the event with (zero: the grey of other events).
	Marker color.RGBA
	// NodePhase is the phase the event puts its node in, as the analysis counts the node's
	// states (a kill: down, before the agent reports the exit; a relaunch: starting); "": none.
	// An event with one names a server node.
	NodePhase string
	// Fault names the event as a fault that may cost acknowledged writes, for the durability
	// check's line ("kill -KILL of node-1"); nil: the event is no such fault.
	Fault func(e rundir.Event) string
	// Shapes are the shapes of the windows the event opens that nothing else it declares says:
	// a step-down, a burst (Catalog.Makes: a snapshot follows from Snapshot, a restart from
	// NodePhase down, a failover from Moves).
	Shapes []Shape
	// Snapshot reads the event as a snapshot's request, which makes it open a ShapeSnapshot
	// window: the leader asked and the log index it answered with (nil: it never answered); ok
	// is false for one that is no such request after all.
	Snapshot func(e rundir.Event) (leader string, index *uint64, ok bool)
	// Down reads a ShapeRestart event (one whose NodePhase is down): which kind took its node
	// down (a power loss records kill events) and the signal it sent, a restart row's signal and
	// the name of its fault window. Nil: the event's own name, no signal.
	Down func(e rundir.Event) (kind, signal string)
	// Collected reads the event as garbage collections the engine ran when asked: its answer
	// (a cause span of kind gc); ok is false for an event that is none.
	Collected func(e rundir.Event) (answer engine.GCAnswer, ok bool)
}

// Recorder is a kind that declares the events it records (its own start event first).
type Recorder interface {
	Events() []EventKind
}

// eventKinds are the events every registered kind declares, by name.
func eventKinds() map[rundir.ActionName]EventKind {
	out := map[rundir.ActionName]EventKind{}
	for _, name := range Names() {
		s, _ := New(name)
		if r, ok := s.(Recorder); ok {
			for _, ek := range r.Events() {
				out[ek.Name] = ek
			}
		}
	}
	return out
}

// Reader is the filter that reads an events.jsonl of any rig's (rundir.ReadEventsWith): each
// action's payload checked against its kind's type (a line whose payload is not is listed as
// bad), and the one legacy path for older folders: what an action did to leadership filled in
// from its kind where the event does not say, and a note that carried an action's detail after
// it (the snapshot's index, before the action held it) folded into that action.
func Reader() rundir.EventFilter {
	kinds := eventKinds()
	return func(e *rundir.Event, kept []rundir.Event) (bool, error) {
		if n := e.Note; n != nil && n.Action != "" {
			foldLateDetail(kinds, n, kept)
			return false, nil
		}
		a := e.Action
		if a == nil {
			return true, nil
		}
		ek, known := kinds[a.Name]
		if !known {
			return true, nil
		}
		if a.Moves == "" {
			a.Moves = ek.Moves
		}
		if ek.Payload != nil && a.Payload != nil {
			if err := json.Unmarshal(a.Payload, ek.Payload()); err != nil {
				return false, fmt.Errorf("%s event detail: %w", a.Name, err)
			}
		}
		return true, nil
	}
}

// foldLateDetail merges an older rig's note about an action into the latest action of its name
// before it: the fields the action does not have yet are taken from the note (a snapshot's
// index and leader's take, which the action came to carry itself). A note with no such action,
// or one that cannot be read, is dropped, as those rigs' readers did.
func foldLateDetail(kinds map[rundir.ActionName]EventKind, n *rundir.Note, kept []rundir.Event) {
	if _, known := kinds[n.Action]; !known || len(n.Detail) == 0 {
		return
	}
	for i := len(kept) - 1; i >= 0; i-- {
		a := kept[i].Action
		if a == nil || a.Name != n.Action {
			continue
		}
		have, late := map[string]json.RawMessage{}, map[string]json.RawMessage{}
		if len(a.Payload) > 0 && json.Unmarshal(a.Payload, &have) != nil {
			return
		}
		if json.Unmarshal(n.Detail, &late) != nil {
			return
		}
		for k, v := range late {
			if _, has := have[k]; !has {
				have[k] = v
			}
		}
		if b, err := json.Marshal(have); err == nil {
			a.Payload = b
		}
		return
	}
}

// ReadEvents reads an events.jsonl file of any rig's through Reader.
func ReadEvents(path string) (events []rundir.Event, bad []error, err error) {
	return rundir.ReadEventsWith(path, Reader())
}

// NewEvent is an action event named name, stamped at (zero: when recorded), on node, carrying
// payload (nil: none) and moves.
func NewEvent(at time.Time, node string, name rundir.ActionName, moves rundir.LeaderMove, payload any) (rundir.Event, error) {
	a := &rundir.Action{Name: name, Moves: moves}
	if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			return rundir.Event{}, fmt.Errorf("%s event: %w", name, err)
		}
		a.Payload = b
	}
	return rundir.Event{T: at, Node: node, Action: a}, nil
}

// record records NewEvent's event.
func record(env Env, at time.Time, node string, name rundir.ActionName, moves rundir.LeaderMove, payload any) error {
	ev, err := NewEvent(at, node, name, moves, payload)
	if err != nil {
		return err
	}
	return env.Record(ev)
}

// payloadOf is e's payload as T when e is an action of one of names: a new T when it carries
// none, nil when e is none of them or its payload is not a T (Reader lists such a line as bad).
func payloadOf[T any](e rundir.Event, names ...rundir.ActionName) *T {
	if e.Action == nil {
		return nil
	}
	for _, n := range names {
		if e.Action.Name != n {
			continue
		}
		v := new(T)
		if len(e.Action.Payload) > 0 && json.Unmarshal(e.Action.Payload, v) != nil {
			return nil
		}
		return v
	}
	return nil
}
