package replica

import (
	"time"

	"github.com/rig-dev/rig/engine/replica/store"
)

// The node's log-store syncs (the raft log's segments, its stable store, their folders) as spans:
// raft waits on each on its own goroutine — the leader before it sends a batch on, a follower
// before it acknowledges one — so a slow fsync holds every command behind it. Each sync that
// took at least SyncRecordMin is handed over as it returns; the rest cost a comparison.

// SyncRecordMin is the shortest sync recorded. One under it covers under half a millisecond of
// any latency excursion (at least 1 ms long, and 10× the median), so it names none alone, and a
// slow stretch is its long syncs; most syncs are far shorter, so few are recorded (docs/results.md
// has the rates).
const SyncRecordMin = 500 * time.Microsecond

// syncQueue is how many recorded syncs may wait for the writer: a few a second, so a full queue
// means the sink is stuck, and a span is dropped rather than raft held.
const syncQueue = 256

// RecordSyncs makes the node hand each sync of its log store that took at least SyncRecordMin,
// as it returns, to sink (cmd/rig engine appends them to the node's pauses file). Call it before
// Start; sink runs on a goroutine of its own, one span at a time, and Shutdown waits for the last.
func (n *Node) RecordSyncs(sink func(store.SyncSpan)) {
	n.syncs, n.syncMin = newSpanQueue(syncQueue, sink), SyncRecordMin
}

// onSync is the stores' Options.OnSync where syncs are recorded.
func (n *Node) onSync() func(store.SyncSpan) {
	q, least := n.syncs, n.syncMin
	if q == nil {
		return nil
	}
	return func(s store.SyncSpan) {
		if s.Dur >= least {
			q.put(s)
		}
	}
}
