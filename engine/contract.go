// Package engine holds the engine contract (DESIGN 4.4): what the rig needs from any engine so a
// user's own engine can be plugged in. The reference engine (engine/replica, engine/server) speaks
// it; the agent's driver polls it.
package engine

import "time"

// Phases an engine node goes through after launch, in order.
const (
	PhaseStarting   = "starting"    // process up, nothing loaded yet
	PhaseRestoring  = "restoring"   // loading its local snapshot
	PhaseJoining    = "joining"     // restored; no leader heard from yet, so nothing known committed
	PhaseReplaying  = "replaying"   // applying the log it already had on disk at launch
	PhaseCatchingUp = "catching-up" // applying entries it did not have at launch, up to the leader's commit
	PhaseReady      = "ready"       // caught up with a known leader (or is the leader)
)

// Roles as raft names them, lower-cased.
const (
	RoleLeader    = "leader"
	RoleFollower  = "follower"
	RoleCandidate = "candidate"
	RoleShutdown  = "shutdown"
)

// Status is GET /status on the engine's admin address.
type Status struct {
	Node         string    `json:"node"`
	Role         string    `json:"role"`
	Phase        string    `json:"phase"`
	Leader       string    `json:"leader,omitempty"` // leader's node id, when known
	Term         uint64    `json:"term"`
	CommitIndex  uint64    `json:"commit_index"`  // highest index known committed
	AppliedIndex uint64    `json:"applied_index"` // the FSM's own: last entry applied to the book
	LastLogIndex uint64    `json:"last_log_index"`
	LaunchLog    uint64    `json:"launch_log_index"` // last index on disk at launch (replay target)
	LastSnapshot *Snapshot `json:"last_snapshot,omitempty"`
	Orders       int       `json:"orders"`
	StateHash    string    `json:"state_hash"`
	PID          int       `json:"pid"`
	Started      time.Time `json:"started"`
	Now          time.Time `json:"now"`
	Config       Config    `json:"config"` // the EFFECTIVE config, so the rig can verify every setting arrived
}

// Snapshot describes the last snapshot a node took or restored.
type Snapshot struct {
	Index       uint64  `json:"index"`
	Term        uint64  `json:"term"`
	TakeMs      float64 `json:"take_ms"`      // time the book stood still for it: everything below
	EncodeMs    float64 `json:"encode_ms"`    // encoding and writing blocks, with a sync per block at level > 0
	PersistedMs float64 `json:"persisted_ms"` // until durable: encode + final file sync, rename, directory sync
	Bytes       int64   `json:"bytes"`
	Orders      int64   `json:"orders"`
	Syncs       int     `json:"syncs"`
	Restored    bool    `json:"restored,omitempty"` // loaded at launch rather than taken
	RestoreMs   float64 `json:"restore_ms,omitempty"`
}

// Config is an engine node's configuration file (JSON), and what /status reports back.
type Config struct {
	Node       string `json:"node"`        // e.g. node-0
	Dir        string `json:"dir"`         // data folder: raft log, snapshots
	RaftAddr   string `json:"raft_addr"`   // host:port for raft transport
	ClientAddr string `json:"client_addr"` // host:port for the client protocol
	AdminAddr  string `json:"admin_addr"`  // 127.0.0.1:port for the admin API
	Peers      []Peer `json:"peers"`       // every voter, this node included
	Bootstrap  bool   `json:"bootstrap"`   // form the cluster on first start (set on every node; idempotent)

	SyncLevel        int    `json:"sync_level"`         // 0 none, 1 fdatasync, 2 fsync (log, snapshots, metadata)
	SnapshotBlock    int    `json:"snapshot_block"`     // bytes per snapshot block; a sync after each at level > 0
	EncodeThreads    int    `json:"encode_threads"`     // snapshot encode goroutines
	HeartbeatTimeout string `json:"heartbeat_timeout"`  // Go duration
	ElectionTimeout  string `json:"election_timeout"`   // Go duration
	MaxAppendEntries int    `json:"max_append_entries"` // raft batching
}

// Peer is one voter.
type Peer struct {
	Node       string `json:"node"`
	RaftAddr   string `json:"raft_addr"`
	ClientAddr string `json:"client_addr"`
}
