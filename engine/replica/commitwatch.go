package replica

import (
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// commitWatch is raft's network transport with one addition: it notes the leader's commit index
// from every AppendEntries on its way to raft, so a catching-up follower knows its real target.
type commitWatch struct {
	*raft.NetworkTransport
	ch chan raft.RPC
}

func watchCommit(t *raft.NetworkTransport, leaderCommit *atomic.Uint64, done <-chan struct{}) *commitWatch {
	w := &commitWatch{NetworkTransport: t, ch: make(chan raft.RPC)}
	go func() {
		in := t.Consumer()
		for {
			var rpc raft.RPC
			select {
			case rpc = <-in:
			case <-done:
				return
			}
			if ae, ok := rpc.Command.(*raft.AppendEntriesRequest); ok {
				for c := leaderCommit.Load(); ae.LeaderCommitIndex > c && !leaderCommit.CompareAndSwap(c, ae.LeaderCommitIndex); c = leaderCommit.Load() {
				}
			}
			select {
			case w.ch <- rpc:
			case <-done:
				return
			}
		}
	}()
	return w
}

// Consumer is the channel raft reads RPCs from.
func (w *commitWatch) Consumer() <-chan raft.RPC { return w.ch }
