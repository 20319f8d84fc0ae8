package rundir

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/internal/untrusted"
)

// Kind is an event's kind: which of Event's payloads it carries.
type Kind string

// Event kinds in events.jsonl.
const (
	KindRun      Kind = "run"      // Run: a stage of the run
	KindAction   Kind = "action"   // Action: a timeline action (or a scheduled relaunch)
	KindPhase    Kind = "phase"    // Phase: an engine phase transition on Node
	KindRole     Kind = "role"     // Role: an engine role transition on Node
	KindSnapshot Kind = "snapshot" // Snapshot: Node finished (or restored) a snapshot
	KindElection Kind = "election" // Election: the engine's election state changed on Node
	KindNote     Kind = "note"     // Note: a warning, or a signal the agent sent
)

// RunPhase names a stage of the run (KindRun).
type RunPhase string

// Run stages, in the order a complete run reaches them.
const (
	RunStart       RunPhase = "start"
	EnginesStarted RunPhase = "engines_started"
	PreloadStart   RunPhase = "preload_start"
	PreloadEnd     RunPhase = "preload_end"
	LoadStart      RunPhase = "load_start"
	WarmupEnd      RunPhase = "warmup_end"
	LoadEnd        RunPhase = "load_end"
	RunEnd         RunPhase = "end"
)

// ActionName names a timeline action (KindAction). The names, and the payload each carries, are
// their kinds' (actions/): this file knows only the envelope every action shares.
type ActionName string

// LeaderMove is what an action does to leadership. Its kind writes it into the event, so what
// reads the events needs no list of kinds: it hands leadership on (step_down), or takes it away
// when it acts on the node leading at the time (a kill, a power loss, a partition); "" it does
// neither.
type LeaderMove string

const (
	MovesLeader   LeaderMove = "always"
	MovesIfLeader LeaderMove = "if_leader"
)

// PhaseDown is the agent's pseudo-phase for an engine process that has exited.
const PhaseDown = "down"

// Event is one line of events.jsonl: a time, the node it concerns (if any) and exactly one
// payload. T is on the controller's clock; node-side events carry the node's own timestamp
// corrected by the measured clock offset (zero on the local target).
type Event struct {
	T    time.Time
	Node string

	Run      *Run
	Action   *Action
	Phase    *PhaseChange
	Role     *RoleChange
	Snapshot *SnapshotTaken
	Election *ElectionChange
	Note     *Note
}

// Run is a stage of the run.
type Run struct {
	Phase RunPhase
}

// Action is a timeline action, stamped when it was requested: its name, what it did to
// leadership, and its kind's payload as written (actions/ decodes it by the name).
type Action struct {
	Name ActionName
	// Moves is what the action does to leadership, as its kind wrote it.
	Moves   LeaderMove
	Payload json.RawMessage
}

// BurstSeries is one micro-burst series: Count bursts of Messages sent back-to-back, Every
// apart. It is the burst action's payload and what one load generator is asked to send (the body
// of its control API's POST /burst, and its options), so the series has one shape from the
// runner to the sockets; it lives here, not with its kind, because the load generator writes it
// too.
//
// UDP bursts (docs/wire.md): Messages datagrams of Size bytes from each of Senders senders (in
// the record: in all, spread over the client nodes; to a load generator: its own), numbered from
// FirstBurst in the datagrams, so a run's series from every load generator are told apart at the
// receiver. Start, when set, is when burst 0 is due (in the record the controller's clock, to a
// load generator its own), so that several client nodes burst together.
type BurstSeries struct {
	Messages   int           `json:"messages"`
	Every      time.Duration `json:"every_ns"`
	Count      int           `json:"count"`
	UDP        bool          `json:"udp,omitempty"`
	Size       int           `json:"size,omitempty"`
	Senders    int           `json:"senders,omitempty"`
	FirstBurst uint32        `json:"first_burst,omitempty"`
	Start      time.Time     `json:"start,omitzero"`
}

// PhaseChange is an engine phase transition as the agent saw it. To is PhaseDown when the
// process exited (Exit says how); a process launch is To "starting" with Launch and PID.
type PhaseChange struct {
	From   string      `json:"-"`
	To     string      `json:"-"`
	Launch int         `json:"launch,omitempty"`
	PID    int         `json:"pid,omitempty"`
	Exit   *ExitStatus `json:"exit,omitempty"`
}

// RoleChange is a raft role transition.
type RoleChange struct {
	From, To string
}

// ElectionChange is an engine's own election state changing (engine.Status.ElectionState), as
// the agent saw it: finer than its role (Aeron Cluster's CANVASS, NOMINATE, ..., CLOSED).
type ElectionChange struct {
	From, To string
}

// SnapshotTaken is a node finishing a snapshot (or restoring one at launch: Restored), as its
// engine reported it. From is the previous snapshot index, as text.
type SnapshotTaken struct {
	From string
	engine.Snapshot
}

// Note is a warning the runner recorded, or a signal the agent sent the engine. Action and
// Detail are a note about an action, as older rigs wrote one (an action's detail that came
// after it): kept as written for the actions' reader of older folders (actions.Reader).
type Note struct {
	From    string          `json:"-"`
	Warning string          `json:"warning,omitempty"`
	Signal  string          `json:"signal,omitempty"`
	Text    string          `json:"text,omitempty"` // anything else, e.g. a transition kind this version does not know
	Action  ActionName      `json:"-"`
	Detail  json.RawMessage `json:"-"`
}

// Kind is the kind of the payload e carries ("" when it carries none).
func (e Event) Kind() Kind {
	switch {
	case e.Run != nil:
		return KindRun
	case e.Action != nil:
		return KindAction
	case e.Phase != nil:
		return KindPhase
	case e.Role != nil:
		return KindRole
	case e.Snapshot != nil:
		return KindSnapshot
	case e.Election != nil:
		return KindElection
	case e.Note != nil:
		return KindNote
	}
	return ""
}

// IsAction reports whether e is the action name.
func (e Event) IsAction(name ActionName) bool { return e.Action != nil && e.Action.Name == name }

// IsRun reports whether e marks the run stage p.
func (e Event) IsRun(p RunPhase) bool { return e.Run != nil && e.Run.Phase == p }

// eventLine is the JSON line: the envelope every kind shares, and the payload's own fields under
// "detail".
type eventLine struct {
	T      time.Time       `json:"t"`
	Kind   Kind            `json:"kind"`
	Node   string          `json:"node,omitempty"`
	Action ActionName      `json:"action,omitempty"`
	Phase  string          `json:"phase,omitempty"`
	Role   string          `json:"role,omitempty"`
	State  string          `json:"election_state,omitempty"`
	From   string          `json:"from,omitempty"`
	Detail json.RawMessage `json:"detail,omitempty"`
	Moves  LeaderMove      `json:"moves_leader,omitempty"`
}

// MarshalJSON writes the events.jsonl line.
func (e Event) MarshalJSON() ([]byte, error) {
	l := eventLine{T: e.T, Kind: e.Kind(), Node: e.Node}
	var detail any
	switch l.Kind {
	case KindRun:
		l.Phase = string(e.Run.Phase)
	case KindAction:
		a := e.Action
		l.Action, l.Moves = a.Name, a.Moves
		if a.Payload != nil {
			detail = a.Payload
		}
	case KindPhase:
		p := e.Phase
		l.Phase, l.From = p.To, p.From
		if p.Launch != 0 || p.PID != 0 || p.Exit != nil {
			detail = p
		}
	case KindRole:
		l.Role, l.From = e.Role.To, e.Role.From
	case KindSnapshot:
		l.From, detail = e.Snapshot.From, e.Snapshot.Snapshot
	case KindElection:
		l.State, l.From = e.Election.To, e.Election.From
	case KindNote:
		l.From, l.Action, detail = e.Note.From, e.Note.Action, e.Note
		if e.Note.Detail != nil {
			detail = e.Note.Detail
		}
	default:
		return nil, errors.New("event has no payload")
	}
	if detail != nil {
		b, err := json.Marshal(detail)
		if err != nil {
			return nil, err
		}
		l.Detail = b
	}
	return json.Marshal(l)
}

// UnmarshalJSON reads an events.jsonl line.
func (e *Event) UnmarshalJSON(b []byte) error {
	var l eventLine
	if err := json.Unmarshal(b, &l); err != nil {
		return err
	}
	*e = Event{T: l.T, Node: l.Node}
	detail := func(v any) error {
		if len(l.Detail) == 0 || string(l.Detail) == "null" {
			return nil
		}
		if err := json.Unmarshal(l.Detail, v); err != nil {
			return fmt.Errorf("%s event detail: %w", l.Kind, err)
		}
		return nil
	}
	switch l.Kind {
	case KindRun:
		e.Run = &Run{Phase: RunPhase(l.Phase)}
	case KindAction:
		a := &Action{Name: l.Action, Moves: l.Moves}
		if len(l.Detail) > 0 && string(l.Detail) != "null" {
			a.Payload = append(json.RawMessage(nil), l.Detail...)
		}
		e.Action = a
	case KindPhase:
		e.Phase = &PhaseChange{}
		if err := detail(e.Phase); err != nil {
			return err
		}
		e.Phase.From, e.Phase.To = l.From, l.Phase
	case KindRole:
		e.Role = &RoleChange{From: l.From, To: l.Role}
	case KindElection:
		e.Election = &ElectionChange{From: l.From, To: l.State}
	case KindSnapshot:
		e.Snapshot = &SnapshotTaken{From: l.From}
		if err := detail(&e.Snapshot.Snapshot); err != nil {
			return err
		}
	case KindNote:
		e.Note = &Note{From: l.From, Action: l.Action}
		if l.Action != "" {
			// An older rig's note about an action: its detail is the action's, not a note's.
			if len(l.Detail) > 0 && string(l.Detail) != "null" {
				e.Note.Detail = append(json.RawMessage(nil), l.Detail...)
			}
			return nil
		}
		if err := detail(e.Note); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown event kind %q (want run, action, phase, role, snapshot, election or note)", l.Kind)
	}
	return nil
}

// EventLog appends events to events.jsonl. Each line is flushed as it is added, so an
// interrupted run keeps everything up to the interruption (an fsync per line is not needed).
// The first error it meets is kept (Err): a run whose event log lost a line is missing part of
// its record, whether or not the caller of that Add could act on it.
type EventLog struct {
	mu     sync.Mutex
	f      *os.File
	w      *bufio.Writer
	err    error // the first failure of Add or Close
	closed bool
}

// CreateEventLog creates (or truncates) path. Lines are appended (O_APPEND), so a line another
// writer appends lands between two events rather than under one.
func CreateEventLog(path string) (*EventLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create event log: %w", err)
	}
	return &EventLog{f: f, w: bufio.NewWriter(f)}, nil
}

// Add writes one event; a zero T is stamped now.
func (l *EventLog) Add(e Event) error {
	if e.T.IsZero() {
		e.T = time.Now()
	}
	b, err := json.Marshal(e)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		err = fmt.Errorf("encode event: %w", err)
	case l.closed:
		err = fmt.Errorf("write %s: %w", filepath.Base(l.f.Name()), os.ErrClosed)
	default:
		// bufio.Writer keeps its first error: a failed Write is what Flush returns.
		l.w.Write(b)
		l.w.WriteByte('\n')
		if err = l.w.Flush(); err != nil {
			err = fmt.Errorf("write %s: %w", filepath.Base(l.f.Name()), err)
		}
	}
	if err != nil && l.err == nil {
		l.err = err
	}
	return err
}

// Err is the first error of any Add or Close so far, nil while every event was written.
func (l *EventLog) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Close flushes and closes the file, returning the first error either met. A second Close
// returns nil.
func (l *EventLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	err := l.w.Flush()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		err = fmt.Errorf("close %s: %w", filepath.Base(l.f.Name()), err)
		if l.err == nil {
			l.err = err
		}
	}
	return err
}

// EventFilter sees each event ReadEventsWith decoded, in file order, with the events kept
// before it (which it may change: an older folder's late detail folded into its action). It
// returns whether to keep the event; an error lists the line as bad and drops it.
type EventFilter func(e *Event, kept []Event) (keep bool, err error)

// ReadEvents reads an events.jsonl file in file order. Lines it cannot decode (the torn tail of
// an interrupted run, a kind from a newer rig) are skipped and listed in bad as path:line:
// errors; everything else is still returned. err is only for a file that cannot be read.
// Actions' payloads are kept as written: actions.ReadEvents also checks them by their kinds.
func ReadEvents(path string) (events []Event, bad []error, err error) {
	return ReadEventsWith(path, nil)
}

// ReadEventsWith is ReadEvents with filter (nil: keep every event as decoded).
func ReadEventsWith(path string, filter EventFilter) (events []Event, bad []error, err error) {
	f, err := untrusted.Open(path, EventsFile) // a regular file: never a FIFO or a device
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	return readEvents(f, path, filter)
}

// Events is ReadEventsWith of the run folder's events.jsonl, reached inside the folder (Folder).
func (f Folder) Events(filter EventFilter) (events []Event, bad []error, err error) {
	fh, err := f.Open(EventsFile, EventsFile)
	if err != nil {
		return nil, nil, err
	}
	defer fh.Close()
	return readEvents(fh, EventsFile, filter)
}

func readEvents(f io.Reader, path string, filter EventFilter) (events []Event, bad []error, err error) {
	r := bufio.NewReaderSize(f, 64<<10)
	for line := 1; ; line++ {
		b, rerr := r.ReadBytes('\n')
		if len(strings.TrimSpace(string(b))) > 0 {
			var e Event
			keep, jerr := true, json.Unmarshal(b, &e)
			if jerr == nil && filter != nil {
				keep, jerr = filter(&e, events)
			}
			switch {
			case jerr != nil:
				bad = append(bad, fmt.Errorf("%s:%d: %w", path, line, jerr))
			case keep:
				events = append(events, e)
			}
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				return events, bad, fmt.Errorf("read %s: %w", path, rerr)
			}
			return events, bad, nil
		}
	}
}
