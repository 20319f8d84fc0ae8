package replica

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine/replica/store"
	"github.com/rig-dev/rig/engine/wire"
)

// TestSyncsRecorded runs a real 3-node raft cluster at sync level 2 with every node recording its
// log store's syncs (all of them here, the threshold lowered to 0): each node hears of its own
// log segment's fsyncs, in its data folder, as raft appends the commands: the leader each,
// the followers each one a commit waited for. Shutdown hands over the last.
func TestSyncsRecorded(t *testing.T) {
	cfgs := testClusterConfigs(t, 3, 2)
	nodes := make([]*Node, 3)
	var mu sync.Mutex
	heard := map[string][]store.SyncSpan{}
	for i, c := range cfgs {
		n, err := New(c, quietLog())
		if err != nil {
			t.Fatal(err)
		}
		n.RecordSyncs(func(s store.SyncSpan) {
			mu.Lock()
			heard[c.Node] = append(heard[c.Node], s)
			mu.Unlock()
		})
		if n.syncMin != SyncRecordMin {
			t.Fatalf("threshold %v, want SyncRecordMin", n.syncMin)
		}
		n.syncMin = 0
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
		nodes[i] = n
	}
	waitFor(t, "a leader", func() bool { return leaderOf(nodes) != nil })
	leader := leaderOf(nodes)
	before := time.Now()
	for i := uint64(1); i <= 50; i++ {
		if err := leader.ApplyAsync(order(i, i, wire.Buy, 100), 5*time.Second).Error(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every node applied the commands", func() bool {
		for _, n := range nodes {
			if n.Status(false).AppliedIndex < leader.Status(false).AppliedIndex {
				return false
			}
		}
		return true
	})
	for _, n := range nodes {
		n.Shutdown()
	}
	mu.Lock()
	defer mu.Unlock()
	followerSegs := 0
	for i, c := range cfgs {
		segs := 0
		for _, s := range heard[c.Node] {
			if !strings.HasPrefix(s.Path, c.Dir+string(filepath.Separator)) {
				t.Errorf("%s: sync of %s, outside its data folder %s", c.Node, s.Path, c.Dir)
			}
			if strings.HasSuffix(s.Path, ".seg") && !s.Start.Before(before) {
				segs++
				if s.Level != store.SyncFull || s.Dur <= 0 {
					t.Errorf("%s: segment sync %+v, want an fsync that took time", c.Node, s)
				}
			}
		}
		// 50 commands applied one after another: the leader synced each as a batch of its own.
		// A follower may take several in one batch, but each commit waited for a follower's
		// sync of a batch ending at that command (the next did not exist yet).
		switch {
		case nodes[i] == leader && segs < 50:
			t.Errorf("leader %s: %d segment syncs heard after the commands began, want at least 50", c.Node, segs)
		case nodes[i] != leader:
			if segs == 0 {
				t.Errorf("follower %s: no segment sync heard", c.Node)
			}
			followerSegs += segs
		}
	}
	if followerSegs < 50 {
		t.Errorf("the followers' segment syncs: %d, want at least 50 (one a commit)", followerSegs)
	}
}

// The threshold: a sync shorter than SyncRecordMin is not handed over, one that long is.
func TestSyncsUnderThresholdNotRecorded(t *testing.T) {
	var got []time.Duration
	n := &Node{}
	n.RecordSyncs(func(s store.SyncSpan) { got = append(got, s.Dur) })
	hear := n.onSync()
	for _, d := range []time.Duration{0, SyncRecordMin - time.Microsecond, SyncRecordMin, 40 * time.Millisecond} {
		hear(store.SyncSpan{Path: "x", Level: store.SyncFull, Start: time.Now(), Dur: d})
	}
	n.syncs.close()
	if len(got) != 2 || got[0] != SyncRecordMin || got[1] != 40*time.Millisecond {
		t.Fatalf("recorded %v, want the two syncs of at least %v", got, SyncRecordMin)
	}
	if (&Node{}).onSync() != nil {
		t.Fatal("a node not recording syncs hands the stores a hook")
	}
}

// BenchmarkSyncHeard is what raft's goroutine pays per sync of its log store for the recording:
// a sync under the threshold (most of them) is compared and dropped; one over it is handed to the
// writer's queue (a queue with room, as a few a second always find it).
func BenchmarkSyncHeard(b *testing.B) {
	for _, c := range []struct {
		name string
		dur  time.Duration
	}{{"short", 200 * time.Microsecond}, {"recorded", 2 * time.Millisecond}} {
		b.Run(c.name, func(b *testing.B) {
			n := &Node{}
			n.RecordSyncs(func(store.SyncSpan) {})
			hear := n.onSync()
			s := store.SyncSpan{Path: "raft/log/log-1.seg", Level: store.SyncFull, Start: time.Now(), Dur: c.dur}
			for b.Loop() {
				hear(s)
			}
			n.syncs.close()
		})
	}
}
