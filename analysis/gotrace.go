package analysis

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/exp/trace"
)

// A Go engine's execution trace (issue 37): a runtime/trace FlightRecorder dump, read with
// golang.org/x/exp/trace, summed into where a window's time went inside the process.

// GoTraceFigures is what one trace says about syscall and stop-the-world time.
type GoTraceFigures struct {
	Fsyncs  int     `json:"fsyncs"` // fsync and fdatasync calls that entered the kernel in the trace
	FsyncMs float64 `json:"fsync_ms"`
	STWs    int     `json:"stw"` // stop-the-world ranges (GC and others)
	STWMs   float64 `json:"stw_ms"`
	SpanMs  float64 `json:"span_ms"` // first to last event
	// FsyncSites: fsyncs per call site (fsyncSite), which says whose sync it was.
	FsyncSites map[string]int `json:"fsync_sites,omitempty"`
}

// fsyncSite is the first three frames of stack that are the program's, not the standard
// library's file and syscall layers, innermost first and joined by " < ": enough to tell a
// snapshot's per-block sync from its final one and from the log's.
func fsyncSite(st trace.Stack) string {
	var fns []string
	for f := range st.Frames() {
		fn := f.Func
		if strings.HasPrefix(fn, "syscall.") || strings.HasPrefix(fn, "internal/") || strings.HasPrefix(fn, "os.") ||
			strings.HasPrefix(fn, "runtime.") || strings.HasPrefix(fn, "golang.org/x/sys/") {
			continue
		}
		if fns = append(fns, fn); len(fns) == 3 {
			break
		}
	}
	if len(fns) == 0 {
		return "?"
	}
	return strings.Join(fns, " < ")
}

// isFsyncFrame matches the frame a goroutine is in when it enters fsync or fdatasync:
// syscall.Fsync (os.File.Sync), syscall.Fdatasync, golang.org/x/sys/unix's of both.
func isFsyncFrame(fn string) bool {
	return strings.HasSuffix(fn, ".Fsync") || strings.HasSuffix(fn, ".Fdatasync")
}

// ReadGoTrace sums fsync syscalls and stop-the-world ranges over a Go execution trace. A
// syscall still under way at the end counts as entered, with no time.
func ReadGoTrace(r io.Reader) (GoTraceFigures, error) {
	var out GoTraceFigures
	tr, err := trace.NewReader(r)
	if err != nil {
		return out, fmt.Errorf("go trace: %w", err)
	}
	inSync := map[trace.GoID]trace.Time{} // goroutines in an fsync, since when
	stw := map[trace.ResourceID]trace.Time{}
	var first, last trace.Time
	for {
		ev, err := tr.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, fmt.Errorf("go trace: %w", err)
		}
		if first == 0 {
			first = ev.Time()
		}
		last = ev.Time()
		switch ev.Kind() {
		case trace.EventStateTransition:
			st := ev.StateTransition()
			if st.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			g := st.Resource.Goroutine()
			from, to := st.Goroutine()
			if to == trace.GoSyscall && from == trace.GoRunning {
				for f := range ev.Stack().Frames() {
					if isFsyncFrame(f.Func) {
						out.Fsyncs++
						if out.FsyncSites == nil {
							out.FsyncSites = map[string]int{}
						}
						out.FsyncSites[fsyncSite(ev.Stack())]++
						inSync[g] = ev.Time()
						break
					}
				}
			} else if from == trace.GoSyscall {
				if t0, ok := inSync[g]; ok {
					out.FsyncMs += float64(ev.Time().Sub(t0).Nanoseconds()) / 1e6
					delete(inSync, g)
				}
			}
		case trace.EventRangeBegin, trace.EventRangeEnd:
			rg := ev.Range()
			if !strings.HasPrefix(rg.Name, "stop-the-world") {
				continue
			}
			if ev.Kind() == trace.EventRangeBegin {
				stw[rg.Scope] = ev.Time()
				out.STWs++
			} else if t0, ok := stw[rg.Scope]; ok {
				out.STWMs += float64(ev.Time().Sub(t0).Nanoseconds()) / 1e6
				delete(stw, rg.Scope)
			}
		}
	}
	out.SpanMs = float64(last.Sub(first).Nanoseconds()) / 1e6
	return out, nil
}
