package replica

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rig-dev/rig/engine"
)

// The node's own account of its scheduled work, one span per phase as it ends (engine.WorkKinds):
// a snapshot's capture and persist, and after a launch the restore, joining, replay and catch-up
// until ready. A handful of spans a run, so always on. The apply path only hands a span over; a
// goroutine of its own encodes and writes it, so a take waits on no file of this.

// phaseQueue is how many spans may wait for the writer: a run has a few, so a full queue means
// the sink is stuck, and a span is dropped rather than held on the apply path.
const phaseQueue = 64

// spanQueue hands spans to a sink on its own goroutine, so whoever hands one over (the apply
// path, raft's goroutine) never waits on the sink's file. The zero of *spanQueue (nil) records
// nothing.
type spanQueue[T any] struct {
	ch      chan T
	done    chan struct{}
	once    sync.Once
	dropped atomic.Int64 // spans the queue had no room for
}

func newSpanQueue[T any](size int, sink func(T)) *spanQueue[T] {
	q := &spanQueue[T]{ch: make(chan T, size), done: make(chan struct{})}
	go func() {
		defer close(q.done)
		for s := range q.ch {
			sink(s)
		}
	}()
	return q
}

// put hands s over, or drops it where the queue is full.
func (q *spanQueue[T]) put(s T) {
	if q == nil {
		return
	}
	select {
	case q.ch <- s:
	default:
		q.dropped.Add(1)
	}
}

// close waits until every span handed over reached the sink.
func (q *spanQueue[T]) close() {
	if q == nil {
		return
	}
	q.once.Do(func() {
		close(q.ch)
		<-q.done
	})
}

// phaseLog is the node's phases on their way to the sink.
type phaseLog struct{ *spanQueue[engine.WorkSpan] }

func newPhaseLog(sink func(engine.WorkSpan)) *phaseLog {
	return &phaseLog{newSpanQueue(phaseQueue, sink)}
}

// add records one phase of [from, to].
func (p *phaseLog) add(kind, blocks string, from, to time.Time, detail string) {
	if p == nil {
		return
	}
	p.put(engine.WorkSpan{Kind: kind, Blocks: blocks, From: from, To: to, Detail: detail})
}

// close waits until every span handed over reached the sink.
func (p *phaseLog) close() {
	if p != nil {
		p.spanQueue.close()
	}
}

// RecordPhases makes the node hand each of its phases, as it ends, to sink (cmd/rig engine
// appends them to the node's pauses file). Call it before Start; sink runs on a goroutine
// of its own, one span at a time, and Shutdown waits for the last.
func (n *Node) RecordPhases(sink func(engine.WorkSpan)) {
	n.phases = newPhaseLog(sink)
	n.fsm.phases = n.phases
}

// phaseKind is the span of each engine phase between restore and ready.
var phaseKind = map[string]string{
	engine.PhaseJoining:    engine.WorkJoin,
	engine.PhaseReplaying:  engine.WorkReplay,
	engine.PhaseCatchingUp: engine.WorkCatchUp,
}

// phaseWatchEvery is how often the watcher reads the phase while the node recovers: the spans'
// ends are as exact as this. It stops at ready.
const phaseWatchEvery = time.Millisecond

// watchPhases writes a span for each phase the node goes through from joining (from, when the
// restore ended) to ready, reading the phase as /status does, until ready or stop (which ends
// the phase under way).
func (n *Node) watchPhases(from time.Time, stop <-chan struct{}) {
	prev, since := engine.PhaseJoining, from
	t := time.NewTicker(phaseWatchEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			// Shut down before ready: the phase under way ends here.
			if k, ok := phaseKind[prev]; ok {
				n.phases.add(k, engine.BlocksReady, since, time.Now(), n.phaseDetail(prev)+" (the node stopped before it ended)")
			}
			return
		case <-t.C:
		}
		p := n.phase()
		if p == prev {
			continue
		}
		now := time.Now()
		if k, ok := phaseKind[prev]; ok {
			n.phases.add(k, engine.BlocksReady, since, now, n.phaseDetail(prev))
		}
		prev, since = p, now
		if p == engine.PhaseReady {
			return
		}
	}
}

// phaseDetail says where the node stood as a phase ended.
func (n *Node) phaseDetail(p string) string {
	switch p {
	case engine.PhaseJoining:
		return fmt.Sprintf("joining: log opened to index %d, waiting for a leader's commit index", n.launchLog)
	case engine.PhaseReplaying:
		return fmt.Sprintf("replaying the log on disk at launch, to index %d", n.launchLog)
	default:
		return fmt.Sprintf("catching up to the leader's commit, applied index %d", n.fsm.applied.Load())
	}
}
