package replica

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/replica/store"
	"github.com/rig-dev/rig/engine/wire"
	"github.com/rig-dev/rig/internal/testfs"
)

// fatalRecorder records each node's OnFatal call.
type fatalRecorder struct {
	mu  sync.Mutex
	got map[string]error
}

func (r *fatalRecorder) hook(nodes []*Node) {
	r.got = map[string]error{}
	for _, n := range nodes {
		name := n.Config().Node
		n.OnFatal(func(err error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.got[name] = err
		})
	}
}

func (r *fatalRecorder) of(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[name]
}

// clusterOnTmpfs is a ready 3-node cluster whose data is on one 8 MiB tmpfs, with every
// node's OnFatal recorded.
func clusterOnTmpfs(t *testing.T) (string, []*Node, *fatalRecorder) {
	dir := testfs.Tmpfs(t, 8<<20)
	_, nodes := testCluster(t, 3, 1, func(c *engine.Config) { c.Dir = filepath.Join(dir, c.Node) })
	rec := &fatalRecorder{}
	rec.hook(nodes)
	waitFor(t, "all ready", func() bool {
		for _, n := range nodes {
			if n.Status(false).Phase != engine.PhaseReady {
				return false
			}
		}
		return leaderOf(nodes) != nil
	})
	return dir, nodes, rec
}

// A full disk under the raft log stops the node that could not append: the client's apply fails
// naming ENOSPC, OnFatal gets the store's error, and the node writes nothing more.
func TestFullLogStopsTheNode(t *testing.T) {
	dir, nodes, rec := clusterOnTmpfs(t)
	leader := leaderOf(nodes)
	if _, err := leader.Apply(order(1, 1, wire.Buy, 10), time.Second); err != nil {
		t.Fatal(err)
	}
	testfs.Fill(t, filepath.Join(dir, "filler"), 0)
	// The segment's last page may still take a few entries; a few thousand bytes more cannot fit.
	var err error
	for i := uint64(2); err == nil && i < 1000; i++ {
		_, err = leader.Apply(order(i, i, wire.Buy, 10), time.Second)
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("apply on a full disk: %v; want ENOSPC", err)
	}
	name := leader.Config().Node
	waitFor(t, "OnFatal on "+name, func() bool { return rec.of(name) != nil })
	if got := rec.of(name); !errors.Is(got, syscall.ENOSPC) || !strings.Contains(got.Error(), "append log entries") {
		t.Fatalf("OnFatal got %v; want the raft log's ENOSPC", got)
	}
	if err := leader.Failed(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Failed() = %v", err)
	}
	// Stopped means stopped: a later write is refused without touching the disk.
	if err := (guardedLog{leader.logs, leader}).StoreLogs(nil); !errors.Is(err, ErrStopped) {
		t.Fatalf("a write after the failure: %v; want ErrStopped", err)
	}
}

// The disk fills between the snapshot marker's log append and the snapshot files: every node's
// take fails, the leader answers the snapshot request with the cause, and each node stops.
func TestFullDiskAtSnapshotStopsTheNodes(t *testing.T) {
	dir, nodes, rec := clusterOnTmpfs(t)
	leader := leaderOf(nodes)
	// A book whose snapshot (~64 KiB) does not fit in what is left; the marker's log entry does.
	for i := uint64(1); i <= 2000; i++ {
		if _, err := leader.Apply(order(i, i, wire.Buy, int64(10+i%50)), time.Second); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "followers applied", func() bool {
		for _, n := range nodes {
			if n.Status(false).Orders != 2000 {
				return false
			}
		}
		return true
	})
	testfs.Fill(t, filepath.Join(dir, "filler"), 16<<10)
	_, err := leader.Snapshot(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("snapshot on a full disk: %v; want the cause, no space left on device", err)
	}
	for _, n := range nodes {
		name := n.Config().Node
		waitFor(t, "OnFatal on "+name, func() bool { return rec.of(name) != nil })
		if got := rec.of(name); !errors.Is(got, syscall.ENOSPC) || !strings.Contains(got.Error(), "write snapshot") {
			t.Errorf("%s: OnFatal got %v; want the snapshot's ENOSPC", name, got)
		}
	}
}

// Raft panics when it cannot store its term, so a full disk under the stable store stops the
// node at once, before raft sees the error (no grace): the cause stays the log's last word.
func TestFullStableStoreStopsAtOnce(t *testing.T) {
	dir := testfs.Tmpfs(t, 1<<20)
	n, err := New(engine.Config{Node: "node-0", Dir: dir, Peers: []engine.Peer{{Node: "node-0"}}}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	var rec fatalRecorder
	rec.hook([]*Node{n})
	st, err := store.OpenStable(filepath.Join(dir, "stable"), store.Options{SyncLevel: store.SyncData})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	testfs.Fill(t, filepath.Join(dir, "filler"), 0)
	// The write never returns to its caller (raft, which would panic on the error): OnFatal
	// runs, and since this one returns, the writing goroutine ends.
	returned, ended := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(ended)
		returned <- guardedStable{st, n}.SetUint64(keyCurrentTerm, 7)
	}()
	<-ended
	select {
	case err := <-returned:
		t.Fatalf("set the term on a full disk returned %v; want OnFatal and no return", err)
	default:
	}
	if got := rec.of("node-0"); !errors.Is(got, syscall.ENOSPC) {
		t.Fatalf("OnFatal got %v at the failed write; want ENOSPC at once", got)
	}
	// Once stopped, any stable write does the same, without touching the disk.
	ended = make(chan struct{})
	go func() {
		defer close(ended)
		returned <- guardedStable{st, n}.Set([]byte("k"), []byte("v"))
	}()
	<-ended
	if len(returned) != 0 {
		t.Fatalf("a stable write after the stop returned %v", <-returned)
	}
}
