package rundir

import "os"

// PausesFile, in a node's folder, is the engine runtime's own always-on record of its pauses,
// one InsideSpan JSON line each: the reference engine writes each Go GC's stop-the-world pauses
// there (recording/gcpause). Unlike InsideFile it is not a recording: it costs next to nothing, is
// written in every run, and holds pauses only.
const PausesFile = "pauses.ndjson"

// Sources of the always-on pause records (InsideSpan.Source).
const (
	// SourceGoRuntime: a Go engine's GC stop-the-world pauses from runtime/debug.ReadGCStats,
	// read after each cycle (PausesFile).
	SourceGoRuntime = "go_runtime"
	// SourceSafepointLog: a JVM's safepoints from its unified log (-Xlog:safepoint, in the GC
	// log the command driver places in the node folder).
	SourceSafepointLog = "safepoint_log"
)

// CreatePauses creates a pauses file, or appends to one already there (an engine relaunched).
func CreatePauses(path string) (*InsideWriter, error) {
	return openLines[InsideSpan](path, os.O_APPEND, "pauses file")
}

// Pauses reads node's pauses file in the run folder. A line that does not decode is skipped.
func (f Folder) Pauses(node string) ([]InsideSpan, error) {
	return readWith(f, node+"/"+PausesFile, "pauses file", readInside)
}
