package supervise

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/rig-dev/rig/rundir"
)

// Journal is the ordered record of transitions: in memory with a sequence number, and appended
// as JSON lines to a file so that collect picks it up even if the agent dies. One journal spans
// every launch and every start on the node, so a reader's `since` cursor stays valid.
type Journal struct {
	mu      sync.Mutex
	f       *os.File
	list    []rundir.Transition
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
	if j.list, err = rundir.ReadTransitions(bytes.NewReader(b)); err != nil {
		f.Close()
		return nil, fmt.Errorf("read transitions journal %s: %w", path, err)
	}
	for _, t := range j.list {
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
func (j *Journal) Append(t rundir.Transition) (rundir.Transition, error) {
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
func (j *Journal) Since(seq uint64) ([]rundir.Transition, uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.sinceLocked(seq), j.seq
}

func (j *Journal) sinceLocked(seq uint64) []rundir.Transition {
	// Sequence numbers are dense from the first record, but a journal loaded from a file may
	// start anywhere: search rather than index.
	i := len(j.list)
	for i > 0 && j.list[i-1].Seq > seq {
		i--
	}
	out := make([]rundir.Transition, len(j.list)-i)
	copy(out, j.list[i:])
	return out
}

// Wait returns the transitions after seq, waiting until there is at least one or ctx is done
// (then it returns an empty list and no error: a long poll that timed out is not a failure).
func (j *Journal) Wait(ctx context.Context, seq uint64) ([]rundir.Transition, uint64) {
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
