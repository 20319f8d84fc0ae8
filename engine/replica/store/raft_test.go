package store

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// countFSM keeps a count and a running hash of every command applied, in order, so two nodes
// agree only if they applied the same commands in the same order.
type countFSM struct {
	mu   sync.Mutex
	n    uint64
	hash uint64
}

func (f *countFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := fnv.New64a()
	binary.Write(h, binary.LittleEndian, f.hash)
	h.Write(l.Data)
	f.n, f.hash = f.n+1, h.Sum64()
	return f.n
}

func (f *countFSM) state() (n, hash uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n, f.hash
}

func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) {
	n, h := f.state()
	return fsmSnap{n, h}, nil
}

func (f *countFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var b [16]byte
	if _, err := io.ReadFull(rc, b[:]); err != nil {
		return err
	}
	f.mu.Lock()
	f.n, f.hash = binary.LittleEndian.Uint64(b[:]), binary.LittleEndian.Uint64(b[8:])
	f.mu.Unlock()
	return nil
}

type fsmSnap struct{ n, hash uint64 }

func (s fsmSnap) Persist(sink raft.SnapshotSink) error {
	b := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, s.n), s.hash)
	if _, err := sink.Write(b); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (fsmSnap) Release() {}

type raftNode struct {
	id, dir, addr string
	logs          *Log
	stable        *Stable
	trans         *raft.NetworkTransport
	fsm           *countFSM
	r             *raft.Raft
}

// listen binds the node's raft transport; addr "127.0.0.1:0" picks a port, a restart reuses it.
func listen(t *testing.T, id, dir, addr string, out io.Writer) *raftNode {
	t.Helper()
	trans, err := raft.NewTCPTransport(addr, nil, 3, 2*time.Second, out)
	if err != nil {
		t.Fatalf("%s: transport on %s: %v", id, addr, err)
	}
	return &raftNode{id: id, dir: dir, addr: string(trans.LocalAddr()), trans: trans}
}

func (n *raftNode) start(t *testing.T, servers []raft.Server, bootstrap bool, out io.Writer) {
	t.Helper()
	var err error
	o := Options{SyncLevel: SyncData, SegmentSize: 256 << 10}
	if n.logs, err = OpenLog(filepath.Join(n.dir, "log"), o); err != nil {
		t.Fatalf("%s: %v", n.id, err)
	}
	if n.stable, err = OpenStable(filepath.Join(n.dir, "stable"), o); err != nil {
		t.Fatalf("%s: %v", n.id, err)
	}
	snaps, err := raft.NewFileSnapshotStore(n.dir, 2, out)
	if err != nil {
		t.Fatal(err)
	}
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(n.id)
	c.HeartbeatTimeout, c.ElectionTimeout = 300*time.Millisecond, 300*time.Millisecond
	c.LeaderLeaseTimeout, c.CommitTimeout = 150*time.Millisecond, 5*time.Millisecond
	// Snapshot and compact often, so raft's own prefix DeleteRange runs on the store.
	c.SnapshotThreshold, c.SnapshotInterval, c.TrailingLogs = 800, 200*time.Millisecond, 300
	c.Logger = hclog.New(&hclog.LoggerOptions{Name: n.id, Level: hclog.Warn, Output: out})
	if bootstrap {
		if err := raft.BootstrapCluster(c, n.logs, n.stable, snaps, n.trans, raft.Configuration{Servers: servers}); err != nil {
			t.Fatalf("%s: bootstrap: %v", n.id, err)
		}
	}
	n.fsm = &countFSM{}
	if n.r, err = raft.NewRaft(c, n.fsm, n.logs, n.stable, snaps, n.trans); err != nil {
		t.Fatalf("%s: NewRaft: %v", n.id, err)
	}
}

func (n *raftNode) stop() {
	if n.r != nil {
		n.r.Shutdown().Error()
		n.r = nil
	}
	n.trans.Close()
	n.logs.Close()
	n.stable.Close()
}

func waitFor(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func applyN(t *testing.T, r *raft.Raft, from, n int) {
	t.Helper()
	futs := make([]raft.ApplyFuture, 0, n)
	for i := from; i < from+n; i++ {
		futs = append(futs, r.Apply([]byte(fmt.Sprintf("cmd-%06d", i)), 10*time.Second))
	}
	for i, f := range futs {
		if err := f.Error(); err != nil {
			t.Fatalf("apply command %d: %v", from+i, err)
		}
	}
}

// A real 3-node raft cluster on loopback TCP runs on these stores; a follower stopped and
// restarted on the same folder still has its log, and catches up to the same FSM state.
func TestRaftClusterOnStores(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node raft cluster")
	}
	var out logBuf
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("raft output:\n" + out.String())
		}
	})
	root := t.TempDir()
	nodes := make([]*raftNode, 3)
	var servers []raft.Server
	for i := range nodes {
		id := fmt.Sprintf("node-%d", i)
		nodes[i] = listen(t, id, filepath.Join(root, id), "127.0.0.1:0", &out)
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(nodes[i].addr)})
	}
	for _, n := range nodes {
		n.start(t, servers, true, &out)
	}
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	leader := func() *raftNode {
		for _, n := range nodes {
			if n.r != nil && n.r.State() == raft.Leader {
				return n
			}
		}
		return nil
	}
	waitFor(t, "a leader", 10*time.Second, func() bool { return leader() != nil })

	const first, second = 3000, 1500
	applyN(t, leader().r, 0, first)

	// Stop a follower once it has applied everything, and note its log.
	var f *raftNode
	for _, n := range nodes {
		if n != leader() {
			f = n
			break
		}
	}
	waitFor(t, f.id+" applying all commands", 10*time.Second, func() bool { c, _ := f.fsm.state(); return c == first })
	// raft snapshots on a timer (SnapshotInterval, randomised), so on a loaded machine the
	// follower may apply everything before its first snapshot: wait for the compaction that
	// snapshot brings (the prefix DeleteRange), which failing to come fails the test.
	waitFor(t, f.id+" compacting its log", 10*time.Second, func() bool { lo, _ := f.logs.FirstIndex(); return lo > 1 })
	f.r.Shutdown().Error()
	f.r = nil
	lo, _ := f.logs.FirstIndex()
	hi, _ := f.logs.LastIndex()
	f.stop()
	if lo == 0 || hi < first {
		t.Fatalf("%s log before restart holds %d..%d; want at least up to %d", f.id, lo, hi, first)
	}
	if lo == 1 {
		t.Errorf("%s log was never compacted (first index 1); raft's prefix DeleteRange did not run", f.id)
	}

	// The rest of the cluster moves on without it, until the leader has compacted past the
	// follower's last entry: catching up then takes InstallSnapshot, after which raft empties
	// the follower's (monotonic) log and appends from the snapshot index on.
	applyN(t, leader().r, first, second)
	waitFor(t, "the leader compacting past "+f.id+"'s log", 10*time.Second, func() bool {
		lf, _ := leader().logs.FirstIndex()
		return lf > hi+1
	})

	// Same folder, same address: the reopened log has every entry it had.
	logs, err := OpenLog(filepath.Join(f.dir, "log"), Options{SyncLevel: SyncData})
	if err != nil {
		t.Fatal(err)
	}
	gotLo, _ := logs.FirstIndex()
	gotHi, _ := logs.LastIndex()
	if gotLo != lo || gotHi != hi {
		t.Fatalf("reopened log holds %d..%d, had %d..%d", gotLo, gotHi, lo, hi)
	}
	commands := 0
	for i := lo; i <= hi; i++ {
		var e raft.Log
		if err := logs.GetLog(i, &e); err != nil {
			t.Fatalf("reopened log: GetLog(%d): %v", i, err)
		}
		if e.Type == raft.LogCommand {
			if !strings.HasPrefix(string(e.Data), "cmd-") {
				t.Fatalf("entry %d holds %q", i, e.Data)
			}
			commands++
		}
	}
	logs.Close()
	if commands == 0 {
		t.Fatalf("reopened log %d..%d holds no commands", lo, hi)
	}

	restarted := listen(t, f.id, f.dir, f.addr, &out)
	*f = *restarted
	f.start(t, servers, false, &out)
	waitFor(t, f.id+" catching up after restart", 15*time.Second, func() bool {
		c, _ := f.fsm.state()
		return c == first+second
	})
	ln, lh := leader().fsm.state()
	fn, fh := f.fsm.state()
	if ln != fn || lh != fh {
		t.Fatalf("FSM differs after catch-up: leader %d/%x, %s %d/%x", ln, lh, f.id, fn, fh)
	}
	// Raft empties a monotonic log when it installs a snapshot; when that snapshot already held
	// every entry, the log stays empty (0..0) until the next append, which is also correct. It
	// does so after the FSM's restore, which the state above may already show: so it is waited for.
	var newLo, newHi uint64
	compacted := func() bool {
		newLo, _ = f.logs.FirstIndex()
		newHi, _ = f.logs.LastIndex()
		return newHi == 0 || (newLo > hi && newHi >= hi+second)
	}
	for deadline := time.Now().Add(5 * time.Second); !compacted() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if !compacted() {
		t.Fatalf("%s log is %d..%d after catch-up by snapshot; want it to start past %d and reach %d", f.id, newLo, newHi, hi, hi+second)
	}
}
