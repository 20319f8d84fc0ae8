package rundir

import "os"

// PausesFile, in a node's folder, is the engine runtime's own always-on record of its pauses,
// one InsideSpan JSON line each: the reference engine writes each Go GC's stop-the-world pauses
// there (recording/gcpause), the Aeron harness its agents' duty-cycle stalls (examples/aeron-cluster,
// DutyCycles.java). Unlike InsideFile it is not a recording: it costs next to nothing, is written
// in every run, and holds pauses only.
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
)

// CreatePauses creates a pauses file, or appends to one already there (an engine relaunched).
func CreatePauses(path string) (*InsideWriter, error) {
	return openLines[InsideSpan](path, os.O_APPEND, "pauses file")
}

// Pauses reads node's pauses file in the run folder. A line that does not decode is skipped.
func (f Folder) Pauses(node string) ([]InsideSpan, error) {
	return readWith(f, node+"/"+PausesFile, "pauses file", readInside)
}
