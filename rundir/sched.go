package rundir

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
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
// (SchedSample.Spans): a thread's wait over an interval, where in it unknown. SourceSchedSwitch
// is the Source of those the kernel placed (SchedSample.Waits), each where it was.
const (
	SourceSchedstat   = "schedstat"
	SourceSchedSwitch = "sched_switch"
)

// IsSchedSource says whether src is one of the two: a thread's run-queue wait is one figure
// whichever of them holds a part of it.
func IsSchedSource(src string) bool { return src == SourceSchedstat || src == SourceSchedSwitch }

// SchedSample is one interval of the scheduler sampler: run-queue wait per thread, from
// /proc/<pid>/task/<tid>/schedstat, of the threads that waited, and the node's pressure stall
// information (/proc/pressure) over the interval.
type SchedSample struct {
	AtNs       int64         `json:"at_ns"`       // the interval's end, ns since the Unix epoch
	IntervalNs int64         `json:"interval_ns"` // measured, not nominal
	Threads    []SchedThread `json:"threads,omitempty"`
	// Waits are the followed threads' run-queue waits the kernel reported since the previous
	// sample, each placed (agent/runq: a BPF program on sched_switch), those of
	// at least its threshold only; each is also in its thread's WaitNs as ExactNs, at its next
	// reading (or, ending between the drain and the read, the one after).
	Waits []SchedWait `json:"waits,omitempty"`
	// PSI is the increase of each pressure file's total stall time over the interval; nil where
	// the kernel has no /proc/pressure.
	PSI *SchedPSI `json:"psi,omitempty"`
}

// SchedThread is one thread's run-queue wait over the interval, or over its own where it has one.
type SchedThread struct {
	PID    int    `json:"pid"`
	TID    int    `json:"tid"`
	Comm   string `json:"comm"`    // the thread's name (/proc/<pid>/task/<tid>/comm)
	WaitNs int64  `json:"wait_ns"` // runnable but not running (schedstat's 2nd field)
	// IntervalNs, where set, is the time since the thread's last reading, ending at the sample's
	// AtNs: a thread that had not run for a while is read less often than every interval.
	IntervalNs int64 `json:"interval_ns,omitempty"`
	// ExactNs is the part of WaitNs placed exactly in some sample's Waits; the rest is spread
	// over the interval.
	ExactNs int64 `json:"exact_ns,omitempty"`
}

// SchedWait is one run-queue wait of a thread, placed: runnable from FromNs (ns since the Unix
// epoch) for DurNs until it ran. In the file it is the array [tid, from_ns, dur_ns]: a busy node
// places thousands a second, and its thread's name is in the thread's readings, so Folder.Sched
// fills Comm from them (files before 2026-12-07 hold objects with the name, read as they are).
type SchedWait struct {
	TID    int
	Comm   string
	FromNs int64
	DurNs  int64
}

// MarshalJSON writes [tid, from_ns, dur_ns].
func (w SchedWait) MarshalJSON() ([]byte, error) { return w.appendJSON(nil), nil }

func (w *SchedWait) appendJSON(b []byte) []byte {
	b = append(b, '[')
	b = strconv.AppendInt(b, int64(w.TID), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, w.FromNs, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, w.DurNs, 10)
	return append(b, ']')
}

// UnmarshalJSON reads [tid, from_ns, dur_ns], or the object {tid, comm, from_ns, dur_ns} of
// older files.
func (w *SchedWait) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '{' {
		var o struct {
			TID    int    `json:"tid"`
			Comm   string `json:"comm"`
			FromNs int64  `json:"from_ns"`
			DurNs  int64  `json:"dur_ns"`
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return err
		}
		*w = SchedWait{TID: o.TID, Comm: o.Comm, FromNs: o.FromNs, DurNs: o.DurNs}
		return nil
	}
	var a []int64
	if err := json.Unmarshal(b, &a); err != nil || len(a) != 3 {
		return fmt.Errorf("a placed wait %s: want [tid, from_ns, dur_ns] (%v)", b, err)
	}
	*w = SchedWait{TID: int(a[0]), FromNs: a[1], DurNs: a[2]}
	return nil
}

// nameWaits fills each placed wait's Comm from its thread's readings: the first at or after the
// wait (a wait is in its thread's next reading), else the last before it. A thread that ended
// before that reading could lend its wait the name of a later thread given the same TID, which
// takes pid_max threads started in between.
func nameWaits(samples []SchedSample) {
	comm := map[int]string{}
	var unnamed []*SchedWait
	for i := len(samples) - 1; i >= 0; i-- {
		for _, t := range samples[i].Threads {
			comm[t.TID] = t.Comm
		}
		for j := range samples[i].Waits {
			w := &samples[i].Waits[j]
			if w.Comm != "" {
				continue
			}
			if c, ok := comm[w.TID]; ok {
				w.Comm = c
			} else {
				unnamed = append(unnamed, w)
			}
		}
	}
	if len(unnamed) == 0 {
		return
	}
	clear(comm)
	for _, s := range samples {
		for _, t := range s.Threads {
			comm[t.TID] = t.Comm
		}
	}
	for _, w := range unnamed {
		w.Comm = comm[w.TID]
	}
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

// Spans are the sample's run-queue waits as sched_delay inside spans: each placed wait where it
// was (SourceSchedSwitch), and per thread the rest of its wait (SourceSchedstat). Where in the
// interval that rest fell is not known: its span covers the whole interval (the thread's own
// where it has one) with Share rest/interval, so an excursion overlapping part of the interval
// is covered by the share of the wait expected there, not by a wait placed at one end of it.
func (s SchedSample) Spans() []InsideSpan {
	out := make([]InsideSpan, 0, len(s.Threads)+len(s.Waits))
	for _, w := range s.Waits {
		if w.DurNs > 0 {
			out = append(out, InsideSpan{AtNs: w.FromNs, DurNs: w.DurNs, Kind: InsideSchedDelay, Source: SourceSchedSwitch, Thread: w.Comm})
		}
	}
	for _, t := range s.Threads {
		iv := s.IntervalNs
		if t.IntervalNs > 0 {
			iv = t.IntervalNs
		}
		rest := t.WaitNs - max(t.ExactNs, 0)
		if rest <= 0 || iv <= 0 {
			continue
		}
		share := min(float64(rest)/float64(iv), 1)
		out = append(out, InsideSpan{AtNs: s.AtNs - iv, DurNs: iv, Share: share, Kind: InsideSchedDelay, Source: SourceSchedstat, Thread: t.Comm})
	}
	return out
}

// AppendJSON appends the sample as encoding/json writes it (the same bytes, no newline), without
// reflection or allocation: the agent writes a line every 20 ms, and encoding/json was a large
// part of its CPU (docs/results.md).
func (s *SchedSample) AppendJSON(b []byte) []byte {
	b = append(b, `{"at_ns":`...)
	b = strconv.AppendInt(b, s.AtNs, 10)
	b = append(b, `,"interval_ns":`...)
	b = strconv.AppendInt(b, s.IntervalNs, 10)
	if len(s.Threads) > 0 {
		b = append(b, `,"threads":[`...)
		for i := range s.Threads {
			t := &s.Threads[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"pid":`...)
			b = strconv.AppendInt(b, int64(t.PID), 10)
			b = append(b, `,"tid":`...)
			b = strconv.AppendInt(b, int64(t.TID), 10)
			b = append(b, `,"comm":`...)
			b = appendJSONString(b, t.Comm)
			b = append(b, `,"wait_ns":`...)
			b = strconv.AppendInt(b, t.WaitNs, 10)
			if t.IntervalNs != 0 {
				b = append(b, `,"interval_ns":`...)
				b = strconv.AppendInt(b, t.IntervalNs, 10)
			}
			if t.ExactNs != 0 {
				b = append(b, `,"exact_ns":`...)
				b = strconv.AppendInt(b, t.ExactNs, 10)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(s.Waits) > 0 {
		b = append(b, `,"waits":[`...)
		for i := range s.Waits {
			if i > 0 {
				b = append(b, ',')
			}
			b = s.Waits[i].appendJSON(b)
		}
		b = append(b, ']')
	}
	if p := s.PSI; p != nil {
		b = append(b, `,"psi":{"cpu_some_us":`...)
		b = strconv.AppendUint(b, p.CPUSomeUs, 10)
		if p.CPUFullUs != 0 {
			b = append(b, `,"cpu_full_us":`...)
			b = strconv.AppendUint(b, p.CPUFullUs, 10)
		}
		b = append(b, `,"io_some_us":`...)
		b = strconv.AppendUint(b, p.IOSomeUs, 10)
		b = append(b, `,"io_full_us":`...)
		b = strconv.AppendUint(b, p.IOFullUs, 10)
		b = append(b, `,"mem_some_us":`...)
		b = strconv.AppendUint(b, p.MemSomeUs, 10)
		b = append(b, `,"mem_full_us":`...)
		b = strconv.AppendUint(b, p.MemFullUs, 10)
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendJSONString quotes a thread name: printable ASCII that encoding/json leaves as it is
// directly, anything else (escapes, HTML characters, other encodings) through encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
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
	return readWith(f, name, "sched samples file", func(r io.Reader) ([]SchedSample, error) {
		out, err := readLines[SchedSample](r)
		nameWaits(out)
		return out, err
	})
}
