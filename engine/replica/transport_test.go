package replica

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/wire"
	"github.com/rig-dev/rig/internal/testaddr"
)

// TestHeldAppendEntries: a leader's AppendEntries to an address nobody listens on is held while
// the port stays closed, ends with the dial error (so raft rebuilds the request) once a raft
// transport listens there, and the next call goes through; stopping the transport ends a hold.
func TestHeldAppendEntries(t *testing.T) {
	_, nodes := testCluster(t, 1, 0)
	waitFor(t, "leader", func() bool { return leaderOf(nodes) != nil })
	tr := nodes[0].trans
	target := raft.ServerAddress(testaddr.Free(t))
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte(nodes[0].cfg.RaftAddr)}, Term: 1}
	send := func(to raft.ServerAddress) <-chan error {
		done := make(chan error, 1)
		go func() {
			var resp raft.AppendEntriesResponse
			done <- tr.AppendEntries("peer", to, req, &resp)
		}()
		return done
	}
	result := func(done <-chan error, what string) error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: AppendEntries still held after 10 s", what)
			return nil
		}
	}
	done := send(target)
	waitFor(t, "the call to be held", func() bool { return tr.held.Load() >= 3 })
	select {
	case err := <-done:
		t.Fatalf("AppendEntries to a closed port returned %v instead of being held", err)
	default:
	}
	peer, err := raft.NewTCPTransport(string(target), nil, 1, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	go func() {
		for rpc := range peer.Consumer() {
			rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: true}, nil)
		}
	}()
	if err := result(done, "peer listening"); !dialFailed(err) {
		t.Fatalf("held AppendEntries ended with %v, want the dial error that started the hold", err)
	}
	if err := result(send(target), "second call"); err != nil {
		t.Fatalf("AppendEntries to the listening peer: %v", err)
	}

	// A hold ends when the transport stops holding (raft's shutdown waits for it).
	base := tr.held.Load()
	done = send(raft.ServerAddress(testaddr.Free(t)))
	waitFor(t, "the third call to be held", func() bool { return tr.held.Load() > base })
	tr.stopHolding()
	if err := result(done, "stopped"); !dialFailed(err) {
		t.Fatalf("stopped hold returned %v, want the dial error", err)
	}
}

// TestRejoinNotGovernedByRaftBackoff: a follower down for 3 s while the leader keeps appending
// leaves joining soon after its relaunch. With raft's own replication back-off the leader's
// attempts fall at 10 ms·2^k (…, 1.28 s, 2.56 s, 5.12 s after the outage began), so a follower
// back at ~3 s would hear nothing until ~5.1 s: about 2 s in joining, double the bound below,
// where the held AppendEntries reaches it within peerDownPoll of its port opening.
func TestRejoinNotGovernedByRaftBackoff(t *testing.T) {
	// Timeouts long enough that a loaded machine does not change leaders mid-test.
	cfgs, nodes := testCluster(t, 3, 0, func(c *engine.Config) { c.HeartbeatTimeout, c.ElectionTimeout = "1s", "1s" })
	waitFor(t, "a leader", func() bool { return leaderOf(nodes) != nil })
	leader := leaderOf(nodes)
	waitFor(t, "all ready", func() bool {
		for _, n := range nodes {
			if n.Status(false).Phase != engine.PhaseReady {
				return false
			}
		}
		return true
	})
	fi := 0
	for i, n := range nodes {
		if n != leader {
			fi = i
		}
	}
	if err := nodes[fi].Shutdown(); err != nil {
		t.Fatal(err)
	}
	nodes[fi] = nil

	var id atomic.Uint64
	apply := func(until time.Time) {
		for time.Now().Before(until) {
			i := id.Add(1)
			if _, err := leader.Apply(order(i, i, wire.Buy, 50), time.Second); err != nil {
				t.Errorf("apply %d: %v", i, err)
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	apply(time.Now().Add(3 * time.Second))
	if leader.trans.held.Load() == 0 {
		t.Fatal("the leader's transport held nothing while the follower was down: raft saw every dial error and backs off")
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
				apply(time.Now().Add(100 * time.Millisecond))
			}
		}
	}()
	defer func() { close(stop); <-stopped }()
	re, err := Open(cfgs[fi], quietLog())
	if err != nil {
		t.Fatal(err)
	}
	nodes[fi] = re
	up := time.Now()
	waitFor(t, "the relaunched follower past joining", func() bool { return re.Status(false).Phase != engine.PhaseJoining })
	joining := time.Since(up)
	t.Logf("joining after a 3 s outage: %v (leader's transport held back %d failed connection attempts)", joining, leader.trans.held.Load())
	if joining > time.Second {
		t.Fatalf("relaunched follower spent %v in joining after a 3 s outage: raft's replication back-off governs rejoin again", joining)
	}
	waitFor(t, "relaunched follower ready", func() bool { return re.Status(false).Phase == engine.PhaseReady })
}
