package rundir

import (
	"io"
	"os"
)

// SchedDir, in a node's folder, holds the agent's scheduler samples (agent/sample's Sched):
// <node>/sched/<name>.ndjson, one SchedSample JSON line per interval in which an engine thread
// waited on a run queue or the node's pressure stall figures moved. It sits beside the OS
// samples, not among them, so the two formats never share a glob.
const (
	SchedDir  = "sched"
	SchedExt  = ".ndjson"
	SchedGlob = "*/" + SchedDir + "/*" + SchedExt
)

// SourceSchedstat is the Source of the sched_delay spans read from scheduler samples
// (SchedSample.Spans).
const SourceSchedstat = "schedstat"

// SchedSample is one interval of the scheduler sampler: run-queue wait per thread, from
// /proc/<pid>/task/<tid>/schedstat, of the threads that waited, and the node's pressure stall
// information (/proc/pressure) over the interval.
type SchedSample struct {
	AtNs       int64         `json:"at_ns"`       // the interval's end, ns since the Unix epoch
	IntervalNs int64         `json:"interval_ns"` // measured, not nominal
	Threads    []SchedThread `json:"threads,omitempty"`
	// PSI is the increase of each pressure file's total stall time over the interval; nil where
	// the kernel has no /proc/pressure.
	PSI *SchedPSI `json:"psi,omitempty"`
}

// SchedThread is one thread's run-queue wait over the interval.
type SchedThread struct {
	PID    int    `json:"pid"`
	TID    int    `json:"tid"`
	Comm   string `json:"comm"`    // the thread's name (/proc/<pid>/task/<tid>/comm)
	WaitNs int64  `json:"wait_ns"` // runnable but not running (schedstat's 2nd field)
}

// SchedPSI is the increase of /proc/pressure/{cpu,io,memory} "total" (µs) over an interval:
// some = at least one task stalled, full = every non-idle task stalled.
type SchedPSI struct {
	CPUSomeUs uint64 `json:"cpu_some_us"`
	CPUFullUs uint64 `json:"cpu_full_us,omitempty"`
	IOSomeUs  uint64 `json:"io_some_us"`
	IOFullUs  uint64 `json:"io_full_us"`
	MemSomeUs uint64 `json:"mem_some_us"`
	MemFullUs uint64 `json:"mem_full_us"`
}

// Spans are the sample's run-queue waits as sched_delay inside spans, one per thread. Where in
// the interval a thread waited is not known: each span covers the whole interval with Share
// wait/interval, so an excursion overlapping part of the interval is covered by the share of
// the wait expected there, not by a wait placed at one end of it.
func (s SchedSample) Spans() []InsideSpan {
	out := make([]InsideSpan, 0, len(s.Threads))
	if s.IntervalNs <= 0 {
		return out
	}
	for _, t := range s.Threads {
		if t.WaitNs <= 0 {
			continue
		}
		share := min(float64(t.WaitNs)/float64(s.IntervalNs), 1)
		out = append(out, InsideSpan{AtNs: s.AtNs - s.IntervalNs, DurNs: s.IntervalNs, Share: share, Kind: InsideSchedDelay, Source: SourceSchedstat, Thread: t.Comm})
	}
	return out
}

// SchedWriter appends SchedSample lines to a file; safe for concurrent use.
type SchedWriter = lineWriter[SchedSample]

// CreateSched creates a scheduler samples file, or appends to one already there.
func CreateSched(path string) (*SchedWriter, error) {
	return openLines[SchedSample](path, os.O_APPEND, "sched samples file")
}

// Sched reads one scheduler samples file (name, e.g. node-0/sched/os-x.ndjson) of the run
// folder. A line that does not decode is skipped (a torn last line).
func (f Folder) Sched(name string) ([]SchedSample, error) {
	return readWith(f, name, "sched samples file", func(r io.Reader) ([]SchedSample, error) { return readLines[SchedSample](r) })
}
