package replica

import (
	"context"
	"errors"
	"fmt"
	"github.com/rig-dev/rig/internal/testaddr"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/wire"
)

func testCluster(t *testing.T, n, syncLevel int, tweaks ...func(*engine.Config)) ([]engine.Config, []*Node) {
	t.Helper()
	cfgs := testClusterConfigs(t, n, syncLevel, tweaks...)
	nodes := make([]*Node, n)
	for i, c := range cfgs {
		nd, err := Open(c, quietLog())
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = nd
	}
	t.Cleanup(func() {
		for _, nd := range nodes {
			if nd != nil {
				nd.Shutdown()
			}
		}
	})
	return cfgs, nodes
}

// testClusterConfigs are the configs of an n-node cluster on loopback, in a test folder.
func testClusterConfigs(t *testing.T, n, syncLevel int, tweaks ...func(*engine.Config)) []engine.Config {
	t.Helper()
	var cfgs []engine.Config
	var peers []engine.Peer
	for i := 0; i < n; i++ {
		peers = append(peers, engine.Peer{Node: fmt.Sprintf("node-%d", i), RaftAddr: testaddr.Free(t), ClientAddr: testaddr.Free(t)})
	}
	base := t.TempDir()
	for i := 0; i < n; i++ {
		cfgs = append(cfgs, engine.Config{
			Node: peers[i].Node, Dir: filepath.Join(base, peers[i].Node), RaftAddr: peers[i].RaftAddr,
			ClientAddr: peers[i].ClientAddr, AdminAddr: testaddr.Free(t), Peers: peers, Bootstrap: true,
			SyncLevel: syncLevel, SnapshotBlock: 64 << 10, HeartbeatTimeout: "200ms", ElectionTimeout: "200ms",
		})
	}
	for i := range cfgs {
		for _, f := range tweaks {
			f(&cfgs[i])
		}
	}
	return cfgs
}

func quietLog() *slog.Logger {
	if os.Getenv("RIG_TEST_VERBOSE") != "" {
		return slog.Default()
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func leaderOf(nodes []*Node) *Node {
	for _, n := range nodes {
		if n != nil && n.IsLeader() {
			return n
		}
	}
	return nil
}

func order(corr, id uint64, side uint8, price int64) []byte {
	b := wire.AppendRequest(nil, &wire.Request{Type: wire.TypeOrder, Corr: corr, Order: wire.Order{ID: id, Instrument: uint32(id % 4), Side: side, Price: price, Qty: 10}})
	return b[4:]
}

// TestSnapshotRestartCatchUp runs a real 3-node raft cluster on loopback: commands, a replicated
// snapshot marker (every node snapshots at the same index), a follower restart from its own
// snapshot + log, and catch-up to ready with the same state hash as the others.
func TestSnapshotRestartCatchUp(t *testing.T) {
	cfgs, nodes := testCluster(t, 3, 1)
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
	for i := uint64(1); i <= 500; i++ {
		side, price := wire.Buy, int64(100-i%10)
		if i%2 == 0 {
			side, price = wire.Sell, int64(200+i%10)
		}
		r, err := leader.Apply(order(i, i, side, price), time.Second)
		if err != nil || r.Resp.Status != wire.StatusOK {
			t.Fatalf("apply %d: %v %+v", i, err, r)
		}
	}
	snap, err := leader.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if snap.Orders == nil || *snap.Orders != 500 || snap.Index == 0 {
		t.Fatalf("leader snapshot %+v, want 500 orders", snap)
	}
	waitFor(t, "every node snapshotted at the marker", func() bool {
		for _, n := range nodes {
			s := n.Status(false).LastSnapshot
			if s == nil || s.Index != snap.Index {
				return false
			}
		}
		return true
	})
	// Restart a follower: it must restore the snapshot, replay its log past it, catch up.
	var fi int
	for i, n := range nodes {
		if n != leader {
			fi = i
		}
	}
	if err := nodes[fi].Shutdown(); err != nil {
		t.Fatal(err)
	}
	nodes[fi] = nil
	// Far more than one AppendEntries batch while it is down, so catch-up takes several round
	// trips: ready must not be declared between two of them.
	var futures []raft.ApplyFuture
	for i := uint64(501); i <= 3500; i++ {
		futures = append(futures, leader.raft.Apply(order(i, i, wire.Buy, 50), time.Second))
	}
	var lastIdx uint64
	for _, f := range futures {
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
		lastIdx = f.Index()
	}
	re, err := Open(cfgs[fi], quietLog())
	if err != nil {
		t.Fatal(err)
	}
	nodes[fi] = re
	st := re.Status(false)
	if st.LastSnapshot == nil || !st.LastSnapshot.Restored || st.LastSnapshot.Index != snap.Index {
		t.Fatalf("restarted node did not restore the snapshot: %+v", st.LastSnapshot)
	}
	if st.Phase == engine.PhaseReady {
		t.Fatalf("restarted node claims ready before catching up: %+v", st)
	}
	waitFor(t, "restarted follower ready", func() bool {
		st := re.Status(false)
		if st.Phase == engine.PhaseReady && st.AppliedIndex < lastIdx {
			t.Fatalf("ready at applied index %d, but the leader had committed %d before the relaunch", st.AppliedIndex, lastIdx)
		}
		return st.Phase == engine.PhaseReady
	})
	waitFor(t, "same applied index everywhere", func() bool {
		a := leader.Status(false).AppliedIndex
		for _, n := range nodes {
			if n.Status(false).AppliedIndex != a {
				return false
			}
		}
		return true
	})
	want := leader.Status(true)
	if want.Orders != 3500 {
		t.Fatalf("leader has %d orders, want 3500", want.Orders)
	}
	for _, n := range nodes {
		if got := n.Status(true); got.StateHash != want.StateHash || got.Orders != want.Orders {
			t.Errorf("%s: hash %s orders %d, leader %s %d", got.Node, got.StateHash, got.Orders, want.StateHash, want.Orders)
		}
	}
}

// TestCorruptSnapshotRefusesStart: restore is strict; a damaged newest snapshot stops the node.
func TestCorruptSnapshotRefusesStart(t *testing.T) {
	cfgs, nodes := testCluster(t, 1, 0)
	waitFor(t, "leader", func() bool { return leaderOf(nodes) != nil })
	for i := uint64(1); i <= 50; i++ {
		if _, err := nodes[0].Apply(order(i, i, wire.Buy, 10), time.Second); err != nil {
			t.Fatal(err)
		}
	}
	s, err := nodes[0].Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	nodes[0].Shutdown()
	nodes[0] = nil
	path := filepath.Join(cfgs[0].Dir, "snapshots", fmt.Sprintf("snap-%020d.bin", s.Index))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	os.WriteFile(path, b, 0o644)
	if n, err := Open(cfgs[0], quietLog()); err == nil {
		n.Shutdown()
		t.Fatal("node started from a corrupt snapshot")
	} else if !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("error %v does not classify as ErrCorruptSnapshot", err)
	}
}
