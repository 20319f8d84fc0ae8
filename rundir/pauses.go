package rundir

import (
	"os"
	"strings"
	"time"

	"github.com/rig-dev/rig/engine"
)

// PausesFile, in a node's folder, is the engine runtime's own always-on record of its pauses,
// one InsideSpan JSON line each: the reference engine writes each Go GC's stop-the-world pauses
// there (recording/gcpause), the phases of its own scheduled work (PhaseKinds: a snapshot's
// take, a relaunched node's restore, replay and catch-up) and its log store's slow syncs
// (SourceEngineSyncs); the Aeron harness its agents'
// duty-cycle stalls and its phases (examples/aeron-cluster, DutyCycles.java, PhaseLog.java).
// Unlike InsideFile it is not a recording: it costs next to nothing, is written in every run,
// and holds pauses and phases only.
const PausesFile = "pauses.ndjson"

// Sources of the always-on pause records (InsideSpan.Source).
const (
	// SourceGoRuntime: a Go engine's GC stop-the-world pauses from runtime/debug.ReadGCStats,
	// read after each cycle (PausesFile).
	SourceGoRuntime = "go_runtime"
	// SourceSafepointLog: a JVM's safepoints from its unified log (-Xlog:safepoint, in the GC
	// log the command driver places in the node folder).
	SourceSafepointLog = "safepoint_log"
	// SourceAeronCounters: an Aeron agent's duty-cycle stalls (InsideDutyCycle) from its max cycle
	// time and cycle-time-threshold-exceeded counters, sampled from the counters file (PausesFile).
	// A span is where the stall can lie, not where it was: the cycle ended between two reads, so
	// the span runs from the earlier read less the cycle's length to the later read, at Share
	// the time held over the span's length. A max that grew is a real cycle of that length; a
	// count that rose bounds its cycles' time from below (count × threshold).
	SourceAeronCounters = "aeron_counters"
	// SourceEnginePhases: the engine's own account of its scheduled work, one span per phase as
	// it ends (PhaseKinds, PausesFile).
	SourceEnginePhases = "engine_phases"
	// SourceEngineSyncs: the engine's own syncs of its log store (its log's files, its raft
	// metadata, their folders) that took long enough to record (the reference engine: 0.5 ms,
	// replica.SyncRecordMin), one span each as it returns (LogSync, PausesFile).
	SourceEngineSyncs = "engine_syncs"
)

// Phases of an engine's scheduled work (InsideSpan.Kind, source SourceEnginePhases), each with
// what it held up (InsideSpan.Blocks): the engine contract's work spans (engine.WorkKinds), as
// inside-span kinds.
const (
	PhaseSnapshotCapture InsideKind = engine.WorkSnapshotCapture
	PhaseSnapshotPersist InsideKind = engine.WorkSnapshotPersist
	PhaseLogCompaction   InsideKind = engine.WorkLogCompaction
	PhaseRestore         InsideKind = engine.WorkRestore
	PhaseJoin            InsideKind = engine.WorkJoin
	PhaseReplay          InsideKind = engine.WorkReplay
	PhaseCatchUp         InsideKind = engine.WorkCatchUp
)

// PhaseKinds lists every phase kind, in the order they happen: the engine contract's work kinds.
var PhaseKinds = func() []InsideKind {
	out := make([]InsideKind, len(engine.WorkKinds))
	for i, k := range engine.WorkKinds {
		out[i] = InsideKind(k)
	}
	return out
}()

// What a phase or a log sync held up (InsideSpan.Blocks): engine.BlocksApply, engine.BlocksReady,
// engine.BlocksCommit.
const (
	BlocksApply  = engine.BlocksApply
	BlocksReady  = engine.BlocksReady
	BlocksCommit = engine.BlocksCommit
)

// PhaseSpan is an engine's work span as a line of the pauses file.
func PhaseSpan(w engine.WorkSpan) InsideSpan {
	return InsideSpan{AtNs: w.From.UnixNano(), DurNs: max(w.To.Sub(w.From).Nanoseconds(), 0), Kind: InsideKind(w.Kind),
		Source: SourceEnginePhases, Blocks: w.Blocks, Detail: w.Detail}
}

// LogSync is one sync of an engine's log store as a line of the pauses file: a force of file
// (relative to the data folder) on the commit path, detail saying what was synced.
func LogSync(file string, from time.Time, dur time.Duration, detail string) InsideSpan {
	return InsideSpan{AtNs: from.UnixNano(), DurNs: max(dur.Nanoseconds(), 0), Kind: InsideForce, Source: SourceEngineSyncs,
		File: file, Role: RoleLog, Blocks: BlocksCommit, Detail: detail}
}

// InRaftDir says whether file, relative to the engine's data folder (or a path outside it), is in
// an engine.RaftDir folder: a sync of it is one of the log store's, which block the commit
// (LogSync), and the file one of the log's (recording.FileRole).
func InRaftDir(file string) bool {
	return strings.HasPrefix(file, engine.RaftDir+"/") || strings.Contains(file, "/"+engine.RaftDir+"/")
}

// CreatePauses creates a pauses file, or appends to one already there (an engine relaunched).
func CreatePauses(path string) (*InsideWriter, error) {
	return openLines[InsideSpan](path, os.O_APPEND, "pauses file")
}

// Pauses reads node's pauses file in the run folder. A line that does not decode is skipped.
func (f Folder) Pauses(node string) ([]InsideSpan, error) {
	return readWith(f, node+"/"+PausesFile, "pauses file", readInside)
}
