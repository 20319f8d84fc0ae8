package results

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// Event kinds in events.jsonl.
const (
	KindRun      = "run"      // Phase: start | engines_started | preload_start | preload_end | load_start | warmup_end | load_end | end
	KindAction   = "action"   // Action: snapshot | kill | relaunch | step_down | burst | wait_for
	KindPhase    = "phase"    // an engine phase transition on Node: From -> Phase
	KindRole     = "role"     // an engine role transition on Node: From -> Role
	KindSnapshot = "snapshot" // Node finished a snapshot: Detail index, take_ms, bytes, persisted_ms
	KindNote     = "note"     // anything worth keeping: warnings, measurement-trap flags
)

// Event is one line of events.jsonl. T is on the controller's clock; node-side events carry the
// node's own timestamp corrected by the measured clock offset (zero on the local target).
type Event struct {
	T      time.Time      `json:"t"`
	Kind   string         `json:"kind"`
	Node   string         `json:"node,omitempty"`
	Action string         `json:"action,omitempty"`
	Phase  string         `json:"phase,omitempty"`
	Role   string         `json:"role,omitempty"`
	From   string         `json:"from,omitempty"`
	Detail map[string]any `json:"detail,omitempty"`
}

// EventLog appends events to events.jsonl, one fsynced line each is not needed: it is flushed on
// every write so an interrupted run keeps everything up to the interruption.
type EventLog struct {
	mu sync.Mutex
	f  *os.File
	w  *bufio.Writer
}

// CreateEventLog creates path.
func CreateEventLog(path string) (*EventLog, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create event log: %w", err)
	}
	return &EventLog{f: f, w: bufio.NewWriter(f)}, nil
}

// Add writes one event; a zero T is stamped now.
func (l *EventLog) Add(e Event) {
	if e.T.IsZero() {
		e.T = time.Now()
	}
	b, _ := json.Marshal(e)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.Write(b)
	l.w.WriteByte('\n')
	l.w.Flush()
}

// Close flushes and closes the file.
func (l *EventLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.Flush()
	return l.f.Close()
}

// ReadEvents reads an events.jsonl file.
func ReadEvents(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}
