package rundir

import "os"

// PausesFile, in a node's folder, is the engine runtime's own always-on record of its pauses,
// one InsideSpan JSON line each: the reference engine writes each Go GC's stop-the-world pauses
// there (recording/gcpause) and the phases of its own scheduled work (PhaseKinds: a snapshot's
// take, a relaunched node's restore, replay and catch-up). Unlike InsideFile it is not a
// recording: it costs next to nothing, is written in every run, and holds pauses and phases only.
const PausesFile = "pauses.ndjson"

// Sources of the always-on pause records (InsideSpan.Source).
const (
	// SourceGoRuntime: a Go engine's GC stop-the-world pauses from runtime/debug.ReadGCStats,
	// read after each cycle (PausesFile).
	SourceGoRuntime = "go_runtime"
	// SourceSafepointLog: a JVM's safepoints from its unified log (-Xlog:safepoint, in the GC
	// log the command driver places in the node folder).
	SourceSafepointLog = "safepoint_log"
	// SourceEnginePhases: the engine's own account of its scheduled work, one span per phase as
	// it ends (PhaseKinds, PausesFile).
	SourceEnginePhases = "engine_phases"
)

// Phases of an engine's scheduled work (InsideSpan.Kind, source SourceEnginePhases), each with
// what it held up (InsideSpan.Blocks). The names are summary.json's and report.md's, and stable.
const (
	// PhaseSnapshotCapture: the state captured for a snapshot. The reference engine encodes its
	// book straight into the snapshot file, block by block (synced per block at sync level > 0),
	// on the apply goroutine: BlocksApply.
	PhaseSnapshotCapture InsideKind = "snapshot_capture"
	// PhaseSnapshotPersist: the captured snapshot made durable and visible (the file's sync, its
	// rename into place, the folder's sync) and older snapshots removed. BlocksApply where it ran
	// on the apply path (the reference engine's does); empty where it ran beside it.
	PhaseSnapshotPersist InsideKind = "snapshot_persist"
	// PhaseLogCompaction: log entries before a snapshot dropped. The reference engine never
	// compacts its raft log, so it writes none; the kind is here for engines that do.
	PhaseLogCompaction InsideKind = "log_compaction"
	// PhaseRestore: a launched node loading its newest snapshot (BlocksReady).
	PhaseRestore InsideKind = "restore"
	// PhaseJoin: restored, opening its log and waiting for a leader to say what is committed
	// (BlocksReady; the engine's phase joining).
	PhaseJoin InsideKind = "join"
	// PhaseReplay: applying the log it had on disk at launch (BlocksReady; phase replaying).
	PhaseReplay InsideKind = "replay"
	// PhaseCatchUp: applying entries it did not have, up to the leader's commit (BlocksReady;
	// phase catching-up).
	PhaseCatchUp InsideKind = "catch_up"
)

// PhaseKinds lists every phase kind, in the order they happen.
var PhaseKinds = []InsideKind{PhaseSnapshotCapture, PhaseSnapshotPersist, PhaseLogCompaction, PhaseRestore, PhaseJoin, PhaseReplay, PhaseCatchUp}

// What a phase held up (InsideSpan.Blocks).
const (
	// BlocksApply: the node applied no command for all of the span (it ran on the apply path).
	BlocksApply = "apply"
	// BlocksReady: the node was not ready (not caught up with a leader) for all of the span.
	BlocksReady = "ready"
)

// CreatePauses creates a pauses file, or appends to one already there (an engine relaunched).
func CreatePauses(path string) (*InsideWriter, error) {
	return openLines[InsideSpan](path, os.O_APPEND, "pauses file")
}

// Pauses reads node's pauses file in the run folder. A line that does not decode is skipped.
func (f Folder) Pauses(node string) ([]InsideSpan, error) {
	return readWith(f, node+"/"+PausesFile, "pauses file", readInside)
}
