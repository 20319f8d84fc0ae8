package replica

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rig-dev/rig/engine/replica/store"
)

// A storage failure the engine cannot recover from by itself stops it (crash-stop, as Aeron's
// media driver and archive do on a storage error): hashicorp/raft v1.7.2 would otherwise go on
// — a leader whose StoreLogs fails logs "failed to commit logs" and steps down, a follower whose
// StoreLogs fails logs "failed to append to logs" and rejects the append, and a failed
// StableStore write panics (raft.go, dispatchLogs, appendEntries, setCurrentTerm) — so a full
// disk shows up far away as "no leader". The node instead names the cause in its own log and
// stops: from the failure on, it writes nothing more (every store write is refused) and after
// fatalGrace its OnFatal hook runs (the reference engine exits non-zero, cmd/rig/engine.go). The
// grace lets an admin request that was waiting for the failed write (POST /snapshot) answer with
// the cause.

// fatalGrace is how long a failed node keeps answering (without writing) before OnFatal runs.
const fatalGrace = 200 * time.Millisecond

// ErrStopped is what every store write returns once the node has stopped on a storage failure.
var ErrStopped = errors.New("engine stopped after a fatal storage error")

// FatalStorage reports whether err is a storage failure the engine must stop on: the device or
// filesystem is full (ENOSPC, EDQUOT), read-only (EROFS) or failing (EIO), or a store already
// broken by an earlier failed write or sync (store.ErrBroken).
func FatalStorage(err error) bool {
	for _, e := range []error{syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EIO, store.ErrBroken} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// failure is the node's fatal-storage state.
type failure struct {
	mu      sync.Mutex
	err     error // the first fatal storage error, nil while healthy
	onFatal func(error)
	exit    sync.Once
}

// OnFatal sets what happens fatalGrace after a fatal storage error (the reference engine:
// exit). Without it the node only stops writing.
func (n *Node) OnFatal(f func(error)) {
	n.failed.mu.Lock()
	defer n.failed.mu.Unlock()
	n.failed.onFatal = f
}

// Failed is the fatal storage error the node stopped on, nil while it has not.
func (n *Node) Failed() error {
	n.failed.mu.Lock()
	defer n.failed.mu.Unlock()
	return n.failed.err
}

// check passes err through; a fatal storage error stops the node first.
func (n *Node) check(err error) error {
	if err != nil && FatalStorage(err) {
		n.fail(err)
	}
	return err
}

// fail records the first fatal storage error, logs it and schedules OnFatal.
func (n *Node) fail(err error) {
	n.failed.mu.Lock()
	defer n.failed.mu.Unlock()
	if n.failed.err != nil {
		return
	}
	n.failed.err = err
	n.log.Error("fatal storage error: the engine stops (crash-stop)", "err", err.Error())
	time.AfterFunc(fatalGrace, func() { n.stopNow(err) })
}

// stopNow runs OnFatal once.
func (n *Node) stopNow(err error) {
	n.failed.mu.Lock()
	f := n.failed.onFatal
	n.failed.mu.Unlock()
	if f != nil {
		n.failed.exit.Do(func() { f(err) })
	}
}

// refused is the error a write gets on a stopped node (nil while healthy).
func (n *Node) refused() error {
	if err := n.Failed(); err != nil {
		return fmt.Errorf("%w: %w", ErrStopped, err)
	}
	return nil
}

// guardedLog is the raft log as raft sees it: writes stop the node on a fatal storage error and
// are refused once it has stopped.
type guardedLog struct {
	*store.Log
	n *Node
}

func (g guardedLog) StoreLog(e *raft.Log) error { return g.StoreLogs([]*raft.Log{e}) }

func (g guardedLog) StoreLogs(logs []*raft.Log) error {
	if err := g.n.refused(); err != nil {
		return err
	}
	return g.n.check(g.Log.StoreLogs(logs))
}

func (g guardedLog) DeleteRange(lo, hi uint64) error {
	if err := g.n.refused(); err != nil {
		return err
	}
	return g.n.check(g.Log.DeleteRange(lo, hi))
}

// guardedStable is the stable store as raft sees it. Raft panics when it cannot store its term
// (setCurrentTerm), so a fatal failure here, or any write once the node has stopped, runs
// OnFatal at once, without the grace: the cause stays the last thing in its log, not a panic's
// stack. Should OnFatal return (an embedding that does not exit, such as a test), the writing
// goroutine, raft's own, ends there (runtime.Goexit runs its defers, so raft's shutdown still
// completes) instead of taking the refusal back to raft: an election during the grace used to
// panic a test process.
type guardedStable struct {
	*store.Stable
	n *Node
}

func (g guardedStable) Set(k, v []byte) error {
	return g.write(func() error { return g.Stable.Set(k, v) })
}

func (g guardedStable) SetUint64(k []byte, v uint64) error {
	return g.write(func() error { return g.Stable.SetUint64(k, v) })
}

func (g guardedStable) write(set func() error) error {
	err := g.n.refused()
	if err == nil {
		err = g.n.check(set())
	}
	if FatalStorage(err) {
		g.n.stopNow(err)
		runtime.Goexit()
	}
	return err
}
