package supervise

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/rig-dev/rig/engine"
)

// Kinds of transition.
const (
	KindLaunch   = "launch"   // the agent started the engine process (start or relaunch)
	KindSignal   = "signal"   // the agent sent the engine a signal (To is its name, e.g. KILL)
	KindPhase    = "phase"    // engine phase changed (To "down" when the process died)
	KindRole     = "role"     // raft role changed
	KindSnapshot = "snapshot" // last_snapshot.index changed (From/To are the indexes)
)

// PhaseDown is the pseudo-phase recorded when the engine process has exited.
const PhaseDown = "down"

// Transition is one change seen on the node, stamped with the node's clock.
type Transition struct {
	Seq  uint64    `json:"seq"`
	T    time.Time `json:"t"`
	Node string    `json:"node"`
	// PrevT is the time of the last poll that still showed From, so the change happened in
	// (PrevT, T]. Absent for launch, signal and down transitions, which are exact.
	PrevT  *time.Time     `json:"prev_t,omitempty"`
	Launch int            `json:"launch"` // 1-based launch number of the process it concerns
	PID    int            `json:"pid"`
	Kind   string         `json:"kind"`
	From   string         `json:"from"`
	To     string         `json:"to"`
	Status *engine.Status `json:"status,omitempty"` // the status that showed the change
	Exit   *ExitStatus    `json:"exit,omitempty"`   // set on the phase->down transition
}

// Journal is the ordered record of transitions: in memory with a sequence number, and appended
// as JSON lines to a file so that collect picks it up even if the agent dies. One journal spans
// every launch and every start on the node, so a reader's `since` cursor stays valid.
type Journal struct {
	mu      sync.Mutex
	f       *os.File
	list    []Transition
	seq     uint64
	changed chan struct{} // closed and replaced on every append: a broadcast to waiters
}

// OpenJournal opens (or creates) the journal file at path and loads what it already holds, so
// sequence numbers continue across agent restarts. A torn last line (agent killed mid-write) is
// dropped.
func OpenJournal(path string) (*Journal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open transitions journal: %w", err)
	}
	j := &Journal{f: f, changed: make(chan struct{})}
	b, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read transitions journal %s: %w", path, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var t Transition
		if json.Unmarshal(sc.Bytes(), &t) != nil {
			continue
		}
		j.list = append(j.list, t)
		j.seq = max(j.seq, t.Seq)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		// Start the next record on a line of its own.
		if _, err := f.Write([]byte{'\n'}); err != nil {
			f.Close()
			return nil, fmt.Errorf("repair transitions journal %s: %w", path, err)
		}
	}
	return j, nil
}

// Append stamps t with the next sequence number, writes it and wakes waiters.
func (j *Journal) Append(t Transition) (Transition, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seq++
	t.Seq = j.seq
	j.list = append(j.list, t)
	close(j.changed)
	j.changed = make(chan struct{})
	if j.f == nil {
		return t, nil
	}
	line, err := json.Marshal(t)
	if err != nil {
		return t, fmt.Errorf("encode transition: %w", err)
	}
	// One write per record: O_APPEND keeps records whole even if another writer shares the file.
	if _, err := j.f.Write(append(line, '\n')); err != nil {
		return t, fmt.Errorf("write transition: %w", err)
	}
	return t, nil
}

// Since returns the transitions with Seq > seq, and the latest sequence number.
func (j *Journal) Since(seq uint64) ([]Transition, uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.sinceLocked(seq), j.seq
}

func (j *Journal) sinceLocked(seq uint64) []Transition {
	// Sequence numbers are dense from the first record, but a journal loaded from a file may
	// start anywhere: search rather than index.
	i := len(j.list)
	for i > 0 && j.list[i-1].Seq > seq {
		i--
	}
	out := make([]Transition, len(j.list)-i)
	copy(out, j.list[i:])
	return out
}

// Wait returns the transitions after seq, waiting until there is at least one or ctx is done
// (then it returns an empty list and no error: a long poll that timed out is not a failure).
func (j *Journal) Wait(ctx context.Context, seq uint64) ([]Transition, uint64) {
	for {
		j.mu.Lock()
		out, last, ch := j.sinceLocked(seq), j.seq, j.changed
		j.mu.Unlock()
		if len(out) > 0 {
			return out, last
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return out, last
		}
	}
}

// Close closes the file; the in-memory record stays readable.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}
