package rundir

import (
	"bufio"
	"encoding/json"
	"io"
	"time"

	"github.com/rig-dev/rig/engine"
)

// TransitionKind is what changed in a Transition.
type TransitionKind string

// Kinds of transition.
const (
	TransLaunch   TransitionKind = "launch"   // the agent started the engine process (start or relaunch)
	TransSignal   TransitionKind = "signal"   // the agent sent the engine a signal (To is its name, e.g. KILL)
	TransPhase    TransitionKind = "phase"    // engine phase changed (To PhaseDown when the process died)
	TransRole     TransitionKind = "role"     // raft role changed
	TransSnapshot TransitionKind = "snapshot" // last_snapshot.index changed (From/To are the indexes)
	TransElection TransitionKind = "election" // the engine's election state changed (Status.ElectionState)
	TransTrap     TransitionKind = "trap"     // a trap first happened (Status.Traps; To is Traps.Kinds)
)

// Transition is one change the agent saw on its node, stamped with the node's clock: a line of
// <node>/transitions.jsonl, and what the agent's /engine/transitions answers.
type Transition struct {
	Seq  uint64    `json:"seq"`
	T    time.Time `json:"t"`
	Node string    `json:"node"`
	// PrevT is the time of the last observation that still showed From, so the change happened
	// in (PrevT, T]. Absent for launch, signal and down transitions, which are exact.
	PrevT  *time.Time     `json:"prev_t,omitempty"`
	Launch int            `json:"launch"` // 1-based launch number of the process it concerns
	PID    int            `json:"pid"`
	Kind   TransitionKind `json:"kind"`
	From   string         `json:"from"`
	To     string         `json:"to"`
	Status *engine.Status `json:"status,omitempty"` // the status that showed the change
	Exit   *ExitStatus    `json:"exit,omitempty"`   // set on the phase->down transition
}

// ExitStatus is how an engine process ended.
type ExitStatus struct {
	T      time.Time `json:"t"`                // when the agent saw it exit (node clock)
	Code   int       `json:"code"`             // exit code; -1 when a signal ended it
	Signal string    `json:"signal,omitempty"` // e.g. "KILL" when a signal ended it
	Core   bool      `json:"core,omitempty"`
	Desc   string    `json:"desc"` // e.g. "signal: killed", "exit status 1"
	// LogTail is the end of the engine's log when it exited (its own last words: an ENOSPC, a
	// panic), so whoever sees the exit sees its cause.
	LogTail string `json:"log_tail,omitempty"`
}

// ReadTransitions reads a transitions journal. A line that does not decode (the torn last line
// of an agent killed mid-write) is skipped.
func ReadTransitions(r io.Reader) ([]Transition, error) {
	var out []Transition
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var t Transition
		if json.Unmarshal(sc.Bytes(), &t) == nil {
			out = append(out, t)
		}
	}
	return out, sc.Err()
}
