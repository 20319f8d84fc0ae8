package engine

import "time"

// An engine's own account of its scheduled work, one span per piece as it ends, in the node
// folder's pauses file (rundir.PausesFile, source engine_phases): what an engine writes, so the
// contract names it. The names are summary.json's and report.md's, and stable.
const (
	// WorkSnapshotCapture: the state captured for a snapshot. The reference engine encodes its
	// book straight into the snapshot file, block by block (synced per block at sync level > 0),
	// on the apply goroutine: BlocksApply.
	WorkSnapshotCapture = "snapshot_capture"
	// WorkSnapshotPersist: the captured snapshot made durable and visible (the file's sync, its
	// rename into place, the folder's sync) and older snapshots removed. BlocksApply where it ran
	// on the apply path (the reference engine's does); empty where it ran beside it.
	WorkSnapshotPersist = "snapshot_persist"
	// WorkLogCompaction: log entries before a snapshot dropped. The reference engine never
	// compacts its raft log, so it writes none; the kind is here for engines that do.
	WorkLogCompaction = "log_compaction"
	// WorkRestore: a launched node loading its newest snapshot (BlocksReady).
	WorkRestore = "restore"
	// WorkJoin: restored, opening its log and waiting for a leader to say what is committed
	// (BlocksReady; the phase PhaseJoining).
	WorkJoin = "join"
	// WorkReplay: applying the log it had on disk at launch (BlocksReady; PhaseReplaying).
	WorkReplay = "replay"
	// WorkCatchUp: applying entries it did not have, up to the leader's commit (BlocksReady;
	// PhaseCatchingUp).
	WorkCatchUp = "catch_up"
)

// WorkKinds lists every kind of work span, in the order they happen.
var WorkKinds = []string{WorkSnapshotCapture, WorkSnapshotPersist, WorkLogCompaction, WorkRestore, WorkJoin, WorkReplay, WorkCatchUp}

// What a piece of work held up (WorkSpan.Blocks).
const (
	// BlocksApply: the node applied no command for all of the span (it ran on the apply path).
	BlocksApply = "apply"
	// BlocksReady: the node was not ready (not caught up with a leader) for all of the span.
	BlocksReady = "ready"
	// BlocksCommit: the node's part in committing commands waited for all of the span (a sync of
	// its log on the goroutine that appends and acknowledges entries). On the leader every
	// command waits for it; on a follower only where too few other followers could acknowledge.
	BlocksCommit = "commit"
)

// WorkSpan is one piece of an engine's scheduled work, [From, To].
type WorkSpan struct {
	Kind     string // WorkKinds
	Blocks   string // BlocksApply, BlocksReady or empty (it ran beside the engine's work)
	From, To time.Time
	Detail   string
}

// RaftDir is the reference engine's log store folder in its data folder (engine/replica: the
// raft log's segments under raft/log, its stable store under raft/stable): its syncs are the
// commit path's, whichever source (engine records, the disk model, a Go trace) reports them.
const RaftDir = "raft"
