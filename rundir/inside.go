package rundir

import (
	"io"
	"os"

	"github.com/rig-dev/rig/internal/untrusted"
)

// InsideFile, in a node's folder, is where the time went inside the engine's process, read from
// the engine's own recording (Java Flight Recorder on a JVM engine, the Go flight recorder on a
// Go engine): one InsideSpan JSON line each. The recordings themselves are kept under
// RecordingsDir; the spans are what the analysis reads, so `rig report` needs neither the JDK's
// jfr tool nor a trace parser to explain a window again.
const (
	InsideFile    = "inside.ndjson"
	RecordingsDir = "recordings" // <node>/recordings/<window>.jfr or .trace
)

// InsideKind names what a span of an engine's time was spent on. The names are summary.json's
// and report.md's, and stable.
type InsideKind string

const (
	InsideForce      InsideKind = "force"       // fsync/fdatasync/FileChannel.force
	InsideWrite      InsideKind = "write"       // a file write
	InsideGCPause    InsideKind = "gc_pause"    // a stop-the-world GC pause
	InsideSafepoint  InsideKind = "safepoint"   // a JVM safepoint other than GC's
	InsideSTW        InsideKind = "stw"         // a Go stop-the-world range (GC's and others)
	InsideGCAssist   InsideKind = "gc_assist"   // a Go goroutine made to assist the GC
	InsideSchedDelay InsideKind = "sched_delay" // runnable but not running
	InsidePark       InsideKind = "park"        // a thread parked (LockSupport.park, an idle strategy)
	InsideMonitor    InsideKind = "monitor"     // a thread waiting to enter or on a monitor
	InsideSocket     InsideKind = "socket"      // a socket read or write
	InsideCPU        InsideKind = "cpu"         // an execution sample (DurNs: the sampling period)
	// InsideDutyCycle: an agent's duty cycle (an event loop's one pass: its work and its idle)
	// longer than usual, read from its stall counters (SourceAeronCounters); Thread names the agent.
	InsideDutyCycle InsideKind = "duty_cycle"
)

// InsideKinds lists every kind, in the order tables show them.
var InsideKinds = []InsideKind{InsideForce, InsideWrite, InsideGCPause, InsideSafepoint, InsideSTW,
	InsideGCAssist, InsideSchedDelay, InsideDutyCycle, InsidePark, InsideMonitor, InsideSocket, InsideCPU}

// File roles of a force or write: which of the engine's files it was. The names are stable.
const (
	RoleArchiveSegment = "archive_segment" // an Aeron Archive recording segment (the log, a snapshot's recording)
	RoleSnapshot       = "snapshot"        // a snapshot file of the engine's own
	RoleLog            = "log"             // the engine's log (raft log, a consensus module's mark file)
	RoleOther          = "other"
)

// InsideSpan is one stretch of an engine's time on one cause.
type InsideSpan struct {
	AtNs   int64      `json:"at_ns"`  // began, ns since the Unix epoch
	DurNs  int64      `json:"dur_ns"` // 0 for an instant (a sample counted, not timed)
	Kind   InsideKind `json:"kind"`
	Source string     `json:"source"`           // "jfr" or "go_trace"
	Thread string     `json:"thread,omitempty"` // JVM thread name, or the goroutine's top function
	File   string     `json:"file,omitempty"`   // forces and writes: the path, relative to the data folder where it is inside it
	Role   string     `json:"role,omitempty"`   // forces and writes: Role*
	Bytes  int64      `json:"bytes,omitempty"`  // writes: bytes written
	Detail string     `json:"detail,omitempty"` // GC name and cause, the top frame of a sample, …
	// Share is the part of the span its cause held where only a total over the span is known (a
	// sampled interval's run-queue wait: wait/interval), spread evenly over it; 0 is all of it.
	Share float64 `json:"share,omitempty"`
	// Blocks is, for an engine's phase (PhaseKinds), what the engine could not do for all of the
	// span (BlocksApply, BlocksReady): a phase that ran beside the work a latency or a window
	// measures leaves it empty, and then covers none of that. A sync of the engine's log store
	// (LogSync, a Go trace's force at the store's call site) is BlocksCommit.
	Blocks string `json:"blocks,omitempty"`
}

// Weight is the share of each moment of the span its cause is taken to hold, in (0, 1].
func (s InsideSpan) Weight() float64 {
	if s.Share <= 0 || s.Share > 1 {
		return 1
	}
	return s.Share
}

// Held is the time its cause held: the span's length, or Share of it.
func (s InsideSpan) Held() int64 { return int64(float64(s.DurNs) * s.Weight()) }

// InsideWriter appends InsideSpan lines to a file; safe for concurrent use.
type InsideWriter = lineWriter[InsideSpan]

// CreateInside creates an inside file, or appends to one already there (a node's recordings are
// read one window at a time).
func CreateInside(path string) (*InsideWriter, error) {
	return openLines[InsideSpan](path, os.O_APPEND, "inside file")
}

// ReadInside reads an inside file. A line that does not decode is skipped (a torn last line).
// The file is a run folder's: refused unless a regular file.
func ReadInside(path string) ([]InsideSpan, error) {
	f, err := untrusted.Open(path, "inside file")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readInside(f)
}

// Inside is ReadInside of node's inside file in the run folder (Folder).
func (f Folder) Inside(node string) ([]InsideSpan, error) {
	return readWith(f, node+"/"+InsideFile, "inside file", readInside)
}

func readInside(r io.Reader) ([]InsideSpan, error) { return readLines[InsideSpan](r) }
