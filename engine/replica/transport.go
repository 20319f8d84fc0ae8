package replica

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// peerDownPoll is how often an AppendEntries to a peer that refuses connections is retried.
const peerDownPoll = 10 * time.Millisecond

// transport is raft's TCP transport with two additions.
//
// It notes the leader's commit index from every AppendEntries on its way to raft, so a
// catching-up follower knows its real target.
//
// And it holds a leader's AppendEntries to a peer that cannot be connected to (process down,
// port closed) until the peer accepts connections again, instead of returning the dial error.
// hashicorp/raft v1.7.2 (replication.go, replicateTo) counts every failed AppendEntries and
// sleeps backoff(10ms, failures, 12) before the next one: after a 5 s outage the next attempt is
// up to 5 s away (10 s after a longer one), and a relaunched follower sits in joining for all of
// it. Raft sees one failure per outage instead, so within peerDownPoll of the peer's port
// opening raft is trying it again. The hold ends with the dial error when this node stops leading
// (the caller's replication is being stopped) or the transport closes (raft is shutting down
// and waits for its replication goroutines).
type transport struct {
	*raft.NetworkTransport
	ch   chan raft.RPC
	raft atomic.Pointer[raft.Raft] // set once raft runs; holding needs it to lead
	log  *slog.Logger

	quit      chan struct{}
	closeOnce sync.Once

	mu        sync.Mutex
	downSince map[raft.ServerAddress]time.Time
	held      atomic.Uint64 // failed connection attempts raft was not shown
}

func newTransport(t *raft.NetworkTransport, leaderCommit *atomic.Uint64, log *slog.Logger) *transport {
	w := &transport{NetworkTransport: t, ch: make(chan raft.RPC), log: log, quit: make(chan struct{}),
		downSince: map[raft.ServerAddress]time.Time{}}
	go func() {
		in := t.Consumer()
		for {
			var rpc raft.RPC
			select {
			case rpc = <-in:
			case <-w.quit:
				return
			}
			if ae, ok := rpc.Command.(*raft.AppendEntriesRequest); ok {
				for c := leaderCommit.Load(); ae.LeaderCommitIndex > c && !leaderCommit.CompareAndSwap(c, ae.LeaderCommitIndex); c = leaderCommit.Load() {
				}
			}
			select {
			case w.ch <- rpc:
			case <-w.quit:
				return
			}
		}
	}()
	return w
}

// Consumer is the channel raft reads RPCs from.
func (w *transport) Consumer() <-chan raft.RPC { return w.ch }

// AppendEntries sends like raft's transport, holding the call while the peer refuses connections.
// Once the peer accepts a connection again, the call returns the original dial error rather
// than sending: the request raft built before the outage carries the commit index of that
// moment, which would tell the relaunched follower it is caught up long before it is. Raft
// rebuilds the request after backoff(failures) with failures still at one or two: 10 ms.
func (w *transport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	err := w.NetworkTransport.AppendEntries(id, target, args, resp)
	if err == nil {
		w.peerUp(target)
		return nil
	}
	if !dialFailed(err) || !w.leading() {
		return err
	}
	w.peerDown(target, err)
	for {
		select {
		case <-w.quit:
			return err
		case <-time.After(peerDownPoll):
		}
		if !w.leading() {
			return err
		}
		c, derr := net.DialTimeout("tcp", string(target), time.Second)
		if derr == nil {
			c.Close() // raft's transport on the other side reads EOF and drops it quietly
			return err
		}
		w.held.Add(1)
	}
}

// leading: only a leader sends AppendEntries; once it is not, its replication is being stopped.
func (w *transport) leading() bool {
	r := w.raft.Load()
	return r != nil && r.State() == raft.Leader
}

func (w *transport) peerDown(target raft.ServerAddress, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.downSince[target]; !ok {
		w.downSince[target] = time.Now()
		w.log.Info("raft peer refuses connections; holding replication to it until it is back", "peer", target, "error", err)
	}
}

func (w *transport) peerUp(target raft.ServerAddress) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if since, ok := w.downSince[target]; ok {
		delete(w.downSince, target)
		w.log.Info("raft peer accepts connections again", "peer", target, "down_ms", time.Since(since).Milliseconds())
	}
}

// stopHolding ends every held AppendEntries; raft's shutdown waits for the goroutines making them.
func (w *transport) stopHolding() { w.closeOnce.Do(func() { close(w.quit) }) }

// Close stops holding and closes raft's transport.
func (w *transport) Close() error {
	w.stopHolding()
	return w.NetworkTransport.Close()
}

// dialFailed tells a connection that could not be made (nothing was sent) from a failure on an
// established one.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
