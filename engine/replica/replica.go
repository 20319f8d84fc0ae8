// Package replica is the raft glue of the reference engine: hashicorp/raft over the engine's own
// log and stable stores (durability by sync level), the FSM that applies commands to the book,
// snapshots at replicated markers, strict restore at launch, and the phase a node is in.
package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/book"
	"github.com/rig-dev/rig/engine/replica/store"
)

// Defaults for settings a config leaves at zero.
const (
	DefaultSnapshotBlock = 16 << 20 // 16 MiB blocks: a 1 MiB block pays a write (and a sync) per MiB of a large book
	DefaultHeartbeat     = 500 * time.Millisecond
	DefaultElection      = 500 * time.Millisecond
	DefaultMaxAppend     = 256
	// DefaultUDPNakDelay is the UDP ingress's wait from detecting a gap to the first NAK: long
	// enough for reordering on one path to settle, short against a burst's 1 ms.
	DefaultUDPNakDelay = time.Millisecond
)

// ErrNotLeader is returned by leader-only operations on a follower.
var ErrNotLeader = errors.New("not the leader")

// Node is one running engine replica.
type Node struct {
	cfg     engine.Config   // effective
	rep     engine.Reported // cfg as /status reports it (built once: cfg never changes)
	log     *slog.Logger
	raft    *raft.Raft
	fsm     *fsm
	logs    *store.Log
	stable  *store.Stable
	trans   *transport
	started time.Time

	launchLog uint64       // last log index on disk at launch: applying up to it is replay
	running   atomic.Bool  // Start finished: raft and the stores exist
	restored  atomic.Bool  // Start finished restoring the snapshot
	rank      atomic.Int32 // furthest phase reached: phases never go backwards

	// leaderCommit is the highest commit index a leader has sent this node. A follower's own
	// raft commit index is capped at its last log index, so during catch-up it says nothing
	// about how far behind the node is; this does.
	leaderCommit atomic.Uint64
	// clientOf maps a peer's node id to its client address. By id, not raft address: a follower
	// learns the leader's address from its AppendEntries (the leader's own), which differs from
	// the peer address in this node's config when its links go through proxies.
	clientOf map[raft.ServerID]string
	failed   failure // a fatal storage error stops the node (fatal.go)

	phases    *phaseLog                  // nil: phases not recorded (RecordPhases)
	syncs     *spanQueue[store.SyncSpan] // nil: syncs not recorded (RecordSyncs)
	syncMin   time.Duration              // the shortest sync recorded: SyncRecordMin, lower only in tests
	stopWatch chan struct{}              // closed by Shutdown: ends the phase watcher
	watchDone chan struct{}
}

// Open creates and starts a replica.
func Open(cfg engine.Config, log *slog.Logger) (*Node, error) {
	n, err := New(cfg, log)
	if err != nil {
		return nil, err
	}
	if err := n.Start(); err != nil {
		return nil, err
	}
	return n, nil
}

// New validates the config and prepares a replica without starting it, so its admin API can
// report the starting and restoring phases while Start runs.
func New(cfg engine.Config, log *slog.Logger) (*Node, error) {
	cfg = withDefaults(cfg)
	if err := validate(cfg); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, rep: cfg.Reported(), log: log, started: time.Now(), clientOf: map[raft.ServerID]string{}}
	for _, p := range cfg.Peers {
		n.clientOf[raft.ServerID(p.Node)] = p.ClientAddr
	}
	n.fsm = &fsm{
		book: book.New(), log: log, snapDir: filepath.Join(cfg.Dir, "snapshots"),
		syncLevel: store.SyncLevel(cfg.SyncLevel), blockSize: cfg.SnapshotBlock, encodeThreads: cfg.EncodeThreads,
		check: n.check, refused: n.refused,
	}
	return n, nil
}

// Start restores the newest local snapshot, opens the log and joins raft.
func (n *Node) Start() (err error) {
	defer func() {
		if err != nil {
			n.phases.close() // nothing more comes: the restore's span reaches its sink before Start returns
			n.syncs.close()
		}
	}()
	cfg, log := n.cfg, n.log
	raftDir := filepath.Join(cfg.Dir, engine.RaftDir)
	for _, d := range []string{n.fsm.snapDir, raftDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	if err := n.fsm.restore(); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	n.restored.Store(true) // from here until raft runs, the node is opening its log: joining
	joinFrom := time.Now()
	sopts := store.Options{SyncLevel: store.SyncLevel(cfg.SyncLevel), Logger: log, OnSync: n.onSync()}
	if n.logs, err = store.OpenLog(filepath.Join(raftDir, "log"), sopts); err != nil {
		return fmt.Errorf("open raft log: %w", err)
	}
	if n.stable, err = store.OpenStable(filepath.Join(raftDir, "stable"), sopts); err != nil {
		n.logs.Close()
		return fmt.Errorf("open raft stable store: %w", err)
	}
	if n.launchLog, err = n.logs.LastIndex(); err != nil {
		n.close()
		return err
	}
	if err := n.termAtLeastSnapshot(); err != nil {
		n.close()
		return err
	}
	hl := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Info, Output: os.Stderr, JSONFormat: true})
	adv, err := net.ResolveTCPAddr("tcp", cfg.RaftAddr)
	if err != nil {
		n.close()
		return fmt.Errorf("raft address %q: %w", cfg.RaftAddr, err)
	}
	nt, err := raft.NewTCPTransportWithLogger(cfg.RaftAddr, adv, 4, 5*time.Second, hl)
	if err != nil {
		n.close()
		return fmt.Errorf("raft transport on %s: %w", cfg.RaftAddr, err)
	}
	n.trans = newTransport(nt, &n.leaderCommit, log)
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.Node)
	rc.Logger = hl
	rc.HeartbeatTimeout, _ = time.ParseDuration(cfg.HeartbeatTimeout)
	rc.ElectionTimeout, _ = time.ParseDuration(cfg.ElectionTimeout)
	rc.LeaderLeaseTimeout = min(rc.HeartbeatTimeout, rc.LeaderLeaseTimeout)
	rc.MaxAppendEntries = cfg.MaxAppendEntries
	rc.BatchApplyCh = true
	// Raft's own snapshots are off: snapshots happen at replicated markers (see fsm.take).
	rc.SnapshotThreshold = math.MaxUint64
	rc.SnapshotInterval = 100 * 365 * 24 * time.Hour
	rc.NoSnapshotRestoreOnStart = true
	var servers []raft.Server
	for _, p := range cfg.Peers {
		servers = append(servers, raft.Server{ID: raft.ServerID(p.Node), Address: raft.ServerAddress(p.RaftAddr), Suffrage: raft.Voter})
	}
	snaps := &restoredSnapshot{f: n.fsm, peers: raft.Configuration{Servers: servers}}
	logs := newCachedLog(guardedLog{n.logs, n}, logCacheEntries)
	if n.raft, err = raft.NewRaft(rc, n.fsm, logs, guardedStable{n.stable, n}, snaps, n.trans); err != nil {
		n.close()
		return fmt.Errorf("start raft: %w", err)
	}
	if cfg.Bootstrap {
		if err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			n.raft.Shutdown()
			n.close()
			return fmt.Errorf("bootstrap: %w", err)
		}
	}
	n.trans.raft.Store(n.raft)
	n.running.Store(true)
	if n.phases != nil {
		n.stopWatch, n.watchDone = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(n.watchDone)
			n.watchPhases(joinFrom, n.stopWatch)
		}()
	}
	log.Info("replica started", "node", cfg.Node, "launch_log_index", n.launchLog, "restored_index", n.fsm.applied.Load())
	return nil
}

// keyCurrentTerm is hashicorp/raft's stable-store key for the current term (raft.go).
var keyCurrentTerm = []byte("CurrentTerm")

// termAtLeastSnapshot raises the stored term to the restored snapshot's when it is behind, as
// it is on a node whose snapshot was installed rather than taken: raft would otherwise append
// entries of a lower term after the snapshot's, and terms must never go back along the log.
func (n *Node) termAtLeastSnapshot() error {
	snap := n.fsm.lastSnap.Load()
	if snap == nil || !snap.Restored {
		return nil
	}
	cur, err := n.stable.GetUint64(keyCurrentTerm)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("read current term: %w", err)
	}
	if cur >= snap.Term {
		return nil
	}
	if err := n.stable.SetUint64(keyCurrentTerm, snap.Term); err != nil {
		return fmt.Errorf("raise current term to the snapshot's %d: %w", snap.Term, err)
	}
	return nil
}

func withDefaults(c engine.Config) engine.Config {
	if c.SnapshotBlock <= 0 {
		c.SnapshotBlock = DefaultSnapshotBlock
	}
	if c.EncodeThreads <= 0 {
		c.EncodeThreads = 1
	}
	if c.HeartbeatTimeout == "" {
		c.HeartbeatTimeout = DefaultHeartbeat.String()
	}
	if c.ElectionTimeout == "" {
		c.ElectionTimeout = DefaultElection.String()
	}
	if c.MaxAppendEntries <= 0 {
		c.MaxAppendEntries = DefaultMaxAppend
	}
	if c.UDPNakDelay == "" {
		c.UDPNakDelay = DefaultUDPNakDelay.String()
	}
	return c
}

func validate(c engine.Config) error {
	var errs []error
	if c.Node == "" {
		errs = append(errs, errors.New("node is empty"))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("dir is empty"))
	}
	if c.SyncLevel < 0 || c.SyncLevel > 2 {
		errs = append(errs, fmt.Errorf("sync_level %d: want 0 (none), 1 (fdatasync) or 2 (fsync)", c.SyncLevel))
	}
	for _, f := range []struct{ name, v string }{{"heartbeat_timeout", c.HeartbeatTimeout}, {"election_timeout", c.ElectionTimeout}} {
		if d, err := time.ParseDuration(f.v); err != nil || d < 5*time.Millisecond {
			errs = append(errs, fmt.Errorf("%s %q: want a Go duration of at least 5ms", f.name, f.v))
		}
	}
	if c.UDPRcvbuf < 0 {
		errs = append(errs, fmt.Errorf("udp_rcvbuf %d: want bytes >= 0 (0 keeps the kernel default)", c.UDPRcvbuf))
	}
	if c.UDPRecvNice < -20 || c.UDPRecvNice > 19 {
		errs = append(errs, fmt.Errorf("udp_recv_nice %d: want -20..19 (0 leaves the thread as it is)", c.UDPRecvNice))
	}
	if c.UDPNakDelay != "" {
		if d, err := time.ParseDuration(c.UDPNakDelay); err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("udp_nak_delay %q: want a Go duration >= 0, e.g. 1ms", c.UDPNakDelay))
		}
	}
	self := false
	for _, p := range c.Peers {
		self = self || p.Node == c.Node
	}
	if !self {
		errs = append(errs, fmt.Errorf("peers do not include this node %q", c.Node))
	}
	if len(errs) > 0 {
		return fmt.Errorf("engine config: %w", errors.Join(errs...))
	}
	return nil
}

// Config returns the effective configuration.
func (n *Node) Config() engine.Config { return n.cfg }

// IsLeader reports whether this node currently leads.
func (n *Node) IsLeader() bool { return n.running.Load() && n.raft.State() == raft.Leader }

// LeaderClientAddr is the client address of the current leader, "" when unknown.
func (n *Node) LeaderClientAddr() string {
	if !n.running.Load() {
		return ""
	}
	_, id := n.raft.LeaderWithID()
	return n.clientOf[id]
}

// Apply appends a client command and waits until this node applied it.
func (n *Node) Apply(data []byte, timeout time.Duration) (*Result, error) {
	return Wait(n.ApplyAsync(data, timeout))
}

// ApplyAsync appends a client command without waiting; the future's Error says when it was
// applied (or why not). UDP ingress uses it so raft batches a burst into few appends; commands
// appended one after another from one goroutine enter the log in that order.
func (n *Node) ApplyAsync(data []byte, timeout time.Duration) raft.ApplyFuture {
	return n.raft.Apply(data, timeout)
}

// Wait waits until this node applied the command of f and returns the FSM's result.
func Wait(f raft.ApplyFuture) (*Result, error) {
	if err := f.Error(); err != nil {
		return nil, err
	}
	r, _ := f.Response().(*Result)
	if r == nil {
		return nil, errors.New("command was not applied by the FSM")
	}
	return r, nil
}

// Snapshot appends the replicated snapshot marker; every node takes its snapshot when it applies
// the marker, so all snapshots are of the same index. It returns the leader's own take.
func (n *Node) Snapshot(ctx context.Context) (*engine.Snapshot, error) {
	if !n.IsLeader() {
		return nil, ErrNotLeader
	}
	timeout := 10 * time.Minute
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	r, err := n.Apply([]byte{typeSnapshotMarker}, timeout)
	if err != nil {
		return nil, fmt.Errorf("snapshot marker: %w", err)
	}
	if r.Snapshot == nil {
		return nil, fmt.Errorf("snapshot at index %d failed: %s", r.Resp.Index, r.Resp.Text)
	}
	return r.Snapshot, nil
}

// StepDown hands leadership to another voter (graceful, no election timeout).
func (n *Node) StepDown() error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	return n.raft.LeadershipTransfer().Error()
}

// Status reports the engine contract's status. The state hash walks the book under the apply
// lock, so it is computed only when asked for (withHash), never on the 5 ms change check
// (engine/server/changes.go) or a status poll.
func (n *Node) Status(withHash bool) engine.Status {
	if !n.running.Load() {
		phase := engine.PhaseStarting
		switch {
		case n.restored.Load():
			phase = engine.PhaseJoining
		case n.fsm.restoring.Load():
			phase = engine.PhaseRestoring
		}
		return engine.Status{Node: n.cfg.Node, Phase: phase, PID: os.Getpid(), Started: n.started, Now: time.Now(),
			LastSnapshot: n.fsm.lastSnap.Load(), Config: n.rep}
	}
	st := engine.Status{
		Node:         n.cfg.Node,
		Role:         roleName(n.raft.State()),
		Term:         n.raft.CurrentTerm(),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.fsm.applied.Load(),
		LastLogIndex: n.raft.LastIndex(),
		LaunchLog:    n.launchLog,
		LastSnapshot: n.fsm.lastSnap.Load(),
		Orders:       int(n.fsm.orders.Load()),
		PID:          os.Getpid(),
		Started:      n.started,
		Now:          time.Now(),
		Config:       n.rep,
	}
	_, st.Leader = leaderID(n.raft)
	st.Phase = n.phase()
	if withHash {
		h, idx, orders := n.fsm.stateHash()
		st.StateHash = fmt.Sprintf("%016x", h)
		st.AppliedIndex, st.Orders = idx, orders
	}
	return st
}

func leaderID(r *raft.Raft) (raft.ServerAddress, string) {
	a, id := r.LeaderWithID()
	return a, string(id)
}

// phase derives where the node is in its recovery. Phases only move forward (a leader lost
// mid-recovery does not send a replaying node back to joining), and ready is sticky: once caught
// up, a node stays ready while the process lives, so ordinary apply lag never reads as recovery.
func (n *Node) phase() string {
	if n.rank.Load() == int32(phaseRank[engine.PhaseReady]) {
		return engine.PhaseReady
	}
	p := n.computePhase()
	for {
		cur := n.rank.Load()
		r := int32(phaseRank[p])
		if r <= cur {
			return phaseOrder[cur]
		}
		if n.rank.CompareAndSwap(cur, r) {
			return p
		}
	}
}

var phaseOrder = []string{engine.PhaseStarting, engine.PhaseRestoring, engine.PhaseJoining, engine.PhaseReplaying, engine.PhaseCatchingUp, engine.PhaseReady}

var phaseRank = func() map[string]int {
	m := map[string]int{}
	for i, p := range phaseOrder {
		m[p] = i
	}
	return m
}()

func (n *Node) computePhase() string {
	if n.fsm.restoring.Load() {
		return engine.PhaseRestoring
	}
	dispatched := n.raft.AppliedIndex() // entries raft has handed to the FSM
	_, leader := leaderID(n.raft)
	target := n.leaderCommit.Load() // what a leader said is committed
	if n.IsLeader() {
		target = n.raft.CommitIndex()
	}
	if leader == "" || target == 0 {
		// Nothing can be applied before a leader's AppendEntries says what is committed
		// (heartbeats carry no commit index). After an outage this lasts until the leader's
		// replication backoff lets it try this node again.
		return engine.PhaseJoining
	}
	if dispatched < min(n.launchLog, target) {
		return engine.PhaseReplaying
	}
	// Raft's applied index moves when entries are queued for the FSM, not when the FSM applied
	// them; and only commands reach the FSM (no-ops and configuration entries do not). So ready
	// also needs the FSM itself past the last command at or below the target.
	if dispatched >= target && n.fsm.applied.Load() >= n.lastCommandAtOrBelow(target) {
		return engine.PhaseReady
	}
	return engine.PhaseCatchingUp
}

// lastCommandAtOrBelow is the index of the newest command entry at or below idx (0 if none in
// the log): the FSM has caught up to idx once its own applied index reaches it.
func (n *Node) lastCommandAtOrBelow(idx uint64) uint64 {
	var l raft.Log
	for i := idx; i > 0; i-- {
		if err := n.logs.GetLog(i, &l); err != nil {
			return 0 // compacted or never written here: nothing newer to wait for
		}
		if l.Type == raft.LogCommand {
			return i
		}
	}
	return 0
}

func roleName(s raft.RaftState) string {
	switch s {
	case raft.Leader:
		return engine.RoleLeader
	case raft.Follower:
		return engine.RoleFollower
	case raft.Candidate:
		return engine.RoleCandidate
	default:
		return engine.RoleShutdown
	}
}

// Metrics returns counters for /metrics.
func (n *Node) Metrics() map[string]float64 {
	if !n.running.Load() {
		return map[string]float64{"rig_engine_running": 0}
	}
	m := map[string]float64{
		"rig_engine_applied_index":    float64(n.fsm.applied.Load()),
		"rig_engine_commit_index":     float64(n.raft.CommitIndex()),
		"rig_engine_orders":           float64(n.fsm.orders.Load()),
		"rig_engine_term":             float64(n.raft.CurrentTerm()),
		"rig_engine_is_leader":        0,
		"rig_engine_log_syncs_total":  0,
		"rig_engine_log_sync_seconds": 0,
	}
	if n.IsLeader() {
		m["rig_engine_is_leader"] = 1
	}
	st := n.logs.Stats()
	m["rig_engine_log_syncs_total"] = float64(st.Syncs)
	m["rig_engine_log_sync_seconds"] = float64(st.SyncNanos) / 1e9
	if s := n.fsm.lastSnap.Load(); s != nil {
		m["rig_engine_snapshot_index"] = float64(s.Index)
		m["rig_engine_snapshot_take_seconds"] = s.TakeMs / 1000
		m["rig_engine_snapshot_bytes"] = float64(s.Bytes)
	}
	if v, err := strconv.ParseFloat(n.raft.Stats()["fsm_pending"], 64); err == nil {
		m["rig_engine_fsm_pending"] = v
	}
	return m
}

// Shutdown stops raft and closes the stores.
func (n *Node) Shutdown() error {
	var err error
	if n.trans != nil {
		n.trans.stopHolding() // raft's shutdown waits for replication goroutines a hold would keep
	}
	if n.stopWatch != nil {
		close(n.stopWatch)
		<-n.watchDone
		n.stopWatch = nil
	}
	if n.running.Load() {
		err = n.raft.Shutdown().Error()
	}
	n.close()
	n.phases.close() // after raft: a take under way hands its spans over first
	n.syncs.close()  // after the stores closed: no sync comes later
	return err
}

func (n *Node) close() {
	if n.trans != nil {
		n.trans.Close()
	}
	if n.logs != nil {
		n.logs.Close()
	}
	if n.stable != nil {
		n.stable.Close()
	}
}
