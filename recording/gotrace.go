package recording

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/exp/trace"

	"github.com/rig-dev/rig/internal/untrusted"
	"github.com/rig-dev/rig/rundir"
)

// A Go engine's execution trace: a runtime/trace FlightRecorder dump (the reference
// engine's GET /trace), read with golang.org/x/exp/trace into spans of four kinds:
//
//   - force: every fsync or fdatasync that entered the kernel, timed to its return, with the
//     file's role from its call site (a trace carries no syscall arguments, so no path);
//   - stw: every stop-the-world range, GC's and others, with its reason;
//   - gc_assist: every stretch a goroutine was made to help the GC mark (per goroutine);
//   - sched_delay: every stretch a goroutine on the apply path (applyPath) was runnable but not
//     running, from its wake-up (or preemption) to its start on a P.
//
// Times are the node's wall clock, from the clock snapshot every generation of a Go >= 1.25
// trace starts with.

// GoTrace reads a Go execution trace (FormatGoTrace).
type GoTrace struct{}

// Format is FormatGoTrace.
func (GoTrace) Format() Format { return FormatGoTrace }

// Read reads the trace file at path.
func (GoTrace) Read(ctx context.Context, path string, opt Options) ([]rundir.InsideSpan, error) {
	return readGoTraceFile(ctx, path, opt)
}

// SchedDelayMin and AssistMin are the shortest scheduler delay and GC assist written as spans,
// and assists of one goroutine less than AssistGap apart are one span.
// A busy engine wakes its apply path's goroutines tens of thousands of times a second, each a
// few microseconds behind; listing every one would write hundreds of megabytes a run for
// nothing a window's table could use (an excursion worth explaining is 1 ms or more). Shorter
// ones are left out of the sums too, so a total of these kinds is a lower bound.
const (
	SchedDelayMin = 50 * time.Microsecond
	AssistMin     = 20 * time.Microsecond
	AssistGap     = 10 * time.Microsecond
)

func readGoTraceFile(ctx context.Context, path string, opt Options) ([]rundir.InsideSpan, error) {
	f, err := untrusted.Open(path, "go trace recording")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadGoTrace(ctx, f, opt)
}

// ErrNoClock: the trace has no clock snapshot (written by Go before 1.25), so its events cannot
// be placed on the wall clock the windows are cut on.
var ErrNoClock = errors.New("go trace without a clock snapshot (Go >= 1.25 writes one)")

// roleRules give a force its file's role from its call site: the first rule any frame of the
// stack matches (prefix of the function's full name). The snapshot's rule goes first: its
// writer syncs through the log store's Sync. Rules for the reference engine's packages
// (engine/replica: snapwrite.go writes snapshots, store/ is the raft log and stable store).
var roleRules = []struct{ prefix, role string }{
	{"github.com/rig-dev/rig/engine/replica.WriteSnapshotFile", rundir.RoleSnapshot},
	{"github.com/rig-dev/rig/engine/replica/store.", rundir.RoleLog},
}

// applyPath are the functions whose goroutines carry an order from the client to its reply on
// the reference engine: the connection's reader, appender and repliers (serveConn and its
// closures), the UDP ingress loops, raft's main loop (the leader's log append and its sync) and
// raft's FSM goroutine (the book). A goroutine is on the path when any stack seen of it holds one
// of these frames (the name itself, or a closure in it).
var applyPath = []string{
	"github.com/hashicorp/raft.(*Raft).runFSM",
	"github.com/hashicorp/raft.(*Raft).run",
	"github.com/rig-dev/rig/engine/server.(*Server).serveConn",
	"github.com/rig-dev/rig/engine/server.(*udpIngress).run",
	"github.com/rig-dev/rig/engine/server.(*udpIngress).applyLoop",
	"github.com/rig-dev/rig/engine/server.(*udpIngress).waitLoop",
}

// onApplyPath returns the applyPath frame of st (its short name), or "".
func onApplyPath(st trace.Stack) string {
	for f := range st.Frames() {
		for _, p := range applyPath {
			if f.Func == p || strings.HasPrefix(f.Func, p+".func") {
				return shortFunc(f.Func)
			}
		}
	}
	return ""
}

// shortFunc drops the import path: github.com/hashicorp/raft.(*Raft).runFSM is raft.(*Raft).runFSM.
func shortFunc(fn string) string {
	if i := strings.LastIndexByte(fn, '/'); i >= 0 {
		return fn[i+1:]
	}
	return fn
}

// entryFunc is the function a goroutine runs (its outermost frame but the runtime's exit stub).
func entryFunc(st trace.Stack) string {
	var last string
	for f := range st.Frames() {
		if f.Func != "runtime.goexit" && f.Func != "" {
			last = f.Func
		}
	}
	return shortFunc(last)
}

func forceRole(st trace.Stack) string {
	for _, r := range roleRules {
		for f := range st.Frames() {
			if strings.HasPrefix(f.Func, r.prefix) {
				return r.role
			}
		}
	}
	return rundir.RoleOther
}

// syncCall names the sync a stack is entering, or "" when it is not one: syscall.Fsync
// (os.File.Sync), syscall.Fdatasync and golang.org/x/sys/unix's of both.
func syncCall(st trace.Stack) string {
	for f := range st.Frames() {
		switch {
		case strings.HasSuffix(f.Func, ".Fsync"):
			return "fsync"
		case strings.HasSuffix(f.Func, ".Fdatasync"):
			return "fdatasync"
		}
	}
	return ""
}

// callSite is the first three frames of st that are the program's, not the standard library's
// file and syscall layers, innermost first and joined by " < ": enough to tell a snapshot's
// per-block sync from its final one and from the log's.
func callSite(st trace.Stack) string {
	var fns []string
	for f := range st.Frames() {
		fn := f.Func
		if strings.HasPrefix(fn, "syscall.") || strings.HasPrefix(fn, "internal/") || strings.HasPrefix(fn, "os.") ||
			strings.HasPrefix(fn, "runtime.") || strings.HasPrefix(fn, "golang.org/x/sys/") {
			continue
		}
		if fns = append(fns, shortFunc(fn)); len(fns) == 3 {
			break
		}
	}
	if len(fns) == 0 {
		return "?"
	}
	return strings.Join(fns, " < ")
}

// goSpan is a span waiting for its goroutine's name, known only once some stack of it is seen.
type goSpan struct {
	g    trace.GoID
	n    int // assists merged into it
	span rundir.InsideSpan
}

// goTraceReader is the state of one read.
type goTraceReader struct {
	wallOff  int64                            // wall ns = trace ns + wallOff (the latest clock snapshot)
	hasClock bool                             // a clock snapshot was read
	names    map[trace.GoID]string            // a goroutine's entry function, once a stack of it was seen
	apply    map[trace.GoID]string            // goroutines on the apply path: their applyPath frame
	inSync   map[trace.GoID]rundir.InsideSpan // a force under way
	runnable map[trace.GoID]trace.Time        // runnable since
	assist   map[trace.GoID]trace.Time        // assisting the GC since
	stw      map[trace.ResourceID]trace.Time  // stopped the world since
	out      []rundir.InsideSpan
	pending  []goSpan // sched delays and assists, named at the end
	// lastAssist is the index in pending of each goroutine's latest assist span.
	lastAssist map[trace.GoID]int
}

func (r *goTraceReader) wall(t trace.Time) int64 { return int64(t) + r.wallOff }

// thread names goroutine g: its apply-path function if it is on the path (raft starts every
// goroutine through one wrapper, raft.(*raftState).goFunc.func1, which would name them all
// alike), else its entry function; "" while no stack of it was seen.
func (r *goTraceReader) thread(g trace.GoID) string {
	if fn, ok := r.apply[g]; ok {
		return fn
	}
	return r.names[g]
}

// seen learns goroutine g's name and path from one of its stacks.
func (r *goTraceReader) seen(g trace.GoID, st trace.Stack) {
	if st == trace.NoStack || g == trace.NoGoroutine {
		return
	}
	if _, ok := r.names[g]; !ok {
		if fn := entryFunc(st); fn != "" {
			r.names[g] = fn
		}
	}
	if _, ok := r.apply[g]; !ok {
		if fn := onApplyPath(st); fn != "" {
			r.apply[g] = fn
		}
	}
}

// ReadGoTrace reads a Go execution trace into spans, in the order they ended (a force or STW
// still under way at the end is written with the time it had so far, and says so).
func ReadGoTrace(ctx context.Context, in io.Reader, opt Options) ([]rundir.InsideSpan, error) {
	tr, err := trace.NewReader(in)
	if err != nil {
		return nil, fmt.Errorf("go trace: %w", err)
	}
	r := &goTraceReader{names: map[trace.GoID]string{}, apply: map[trace.GoID]string{},
		inSync: map[trace.GoID]rundir.InsideSpan{}, runnable: map[trace.GoID]trace.Time{},
		assist: map[trace.GoID]trace.Time{}, stw: map[trace.ResourceID]trace.Time{}, lastAssist: map[trace.GoID]int{}}
	var last trace.Time
	for n := 0; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		ev, err := tr.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("go trace: %w", err)
		}
		last = ev.Time()
		if ev.Kind() == trace.EventSync {
			if cs := ev.Sync().ClockSnapshot; cs != nil {
				r.wallOff, r.hasClock = cs.Wall.UnixNano()-int64(cs.Trace), true
			}
			continue
		}
		if !r.hasClock {
			return nil, ErrNoClock
		}
		switch ev.Kind() {
		case trace.EventStateTransition:
			r.transition(ev)
		case trace.EventRangeBegin, trace.EventRangeEnd:
			r.rangeEvent(ev)
		}
	}
	// Still under way at the end: a force counts (it entered the kernel), timed so far.
	for _, s := range r.inSync {
		s.DurNs = r.wall(last) - s.AtNs
		s.Detail += " (still in the call when the recording ended)"
		r.out = append(r.out, s)
	}
	for _, t0 := range r.stw {
		r.out = append(r.out, rundir.InsideSpan{AtNs: r.wall(t0), DurNs: int64(last.Sub(t0)), Kind: rundir.InsideSTW,
			Source: string(FormatGoTrace), Detail: "still stopped when the recording ended"})
	}
	for _, p := range r.pending {
		s := p.span
		if s.Kind == rundir.InsideSchedDelay {
			fn, ok := r.apply[p.g]
			if !ok {
				continue // not on the apply path
			}
			s.Thread = fn
		} else {
			if s.DurNs < int64(AssistMin) {
				continue
			}
			s.Thread = r.thread(p.g)
			if p.n > 1 {
				s.Detail = fmt.Sprintf("%d assists", p.n)
			}
		}
		if s.Thread == "" {
			s.Thread = fmt.Sprintf("goroutine %d", p.g)
		}
		r.out = append(r.out, s)
	}
	opt.Logger.Debug("go trace read", "spans", len(r.out), "goroutines", len(r.names), "apply_path", len(r.apply))
	return r.out, nil
}

func (r *goTraceReader) transition(ev trace.Event) {
	st := ev.StateTransition()
	if st.Resource.Kind != trace.ResourceGoroutine {
		return
	}
	g := st.Resource.Goroutine()
	// The transitioning goroutine's own stack: the starting stack of a new one, the status
	// stack of one found blocked, or the executing stack when it transitions itself.
	r.seen(g, st.Stack)
	if ev.Goroutine() == g {
		r.seen(g, ev.Stack())
	}
	from, to := st.Goroutine()
	switch {
	case from == trace.GoRunning && to == trace.GoSyscall:
		if call := syncCall(ev.Stack()); call != "" {
			s := rundir.InsideSpan{AtNs: r.wall(ev.Time()), Kind: rundir.InsideForce, Source: string(FormatGoTrace),
				Thread: r.thread(g), Role: forceRole(ev.Stack()), Detail: call + " at " + callSite(ev.Stack())}
			if s.Role == rundir.RoleLog {
				// The log store's sync: the one engine_syncs records too, judged on the commit path.
				s.Blocks = rundir.BlocksCommit
			}
			r.inSync[g] = s
		}
	case from == trace.GoSyscall:
		if s, ok := r.inSync[g]; ok {
			s.DurNs = r.wall(ev.Time()) - s.AtNs
			r.out = append(r.out, s)
			delete(r.inSync, g)
		}
	}
	switch {
	case to == trace.GoRunnable && from != trace.GoUndetermined:
		// Woken, created, preempted, or back from a syscall without a P. A goroutine found
		// runnable when the recording began waited since an unknown time: not counted.
		r.runnable[g] = ev.Time()
	case from == trace.GoRunnable && to == trace.GoRunning:
		if t0, ok := r.runnable[g]; ok {
			if d := ev.Time().Sub(t0); d >= SchedDelayMin {
				r.pending = append(r.pending, goSpan{g: g, span: rundir.InsideSpan{AtNs: r.wall(t0), DurNs: int64(d),
					Kind: rundir.InsideSchedDelay, Source: string(FormatGoTrace)}})
			}
		}
		delete(r.runnable, g)
	case to != trace.GoRunnable:
		delete(r.runnable, g)
	}
}

func (r *goTraceReader) rangeEvent(ev trace.Event) {
	rg := ev.Range()
	switch {
	case strings.HasPrefix(rg.Name, "stop-the-world"):
		// A range already under way when the recording began (RangeActive, not read) has
		// no known start: it is left out.
		if ev.Kind() == trace.EventRangeBegin {
			r.stw[rg.Scope] = ev.Time()
		}
		if ev.Kind() != trace.EventRangeEnd {
			return
		}
		t0, ok := r.stw[rg.Scope]
		if !ok {
			return // began before the recording: its length is unknown
		}
		delete(r.stw, rg.Scope)
		reason := strings.TrimSuffix(strings.TrimPrefix(rg.Name, "stop-the-world ("), ")")
		s := rundir.InsideSpan{AtNs: r.wall(t0), DurNs: int64(ev.Time().Sub(t0)), Kind: rundir.InsideSTW,
			Source: string(FormatGoTrace), Detail: reason}
		if rg.Scope.Kind == trace.ResourceGoroutine {
			s.Thread = r.thread(rg.Scope.Goroutine())
		}
		r.out = append(r.out, s)
	case rg.Name == "GC mark assist":
		if rg.Scope.Kind != trace.ResourceGoroutine {
			return
		}
		g := rg.Scope.Goroutine()
		if ev.Kind() == trace.EventRangeBegin {
			r.assist[g] = ev.Time()
		}
		if ev.Kind() != trace.EventRangeEnd {
			return
		}
		t0, ok := r.assist[g]
		if !ok {
			return
		}
		delete(r.assist, g)
		at, end := r.wall(t0), r.wall(ev.Time())
		// The runtime assists in units of some 40 us, back to back while a goroutine owes
		// the collector: one span for a run of them (gaps under AssistGap count as assisting).
		if i, ok := r.lastAssist[g]; ok && at-(r.pending[i].span.AtNs+r.pending[i].span.DurNs) < int64(AssistGap) {
			r.pending[i].span.DurNs = end - r.pending[i].span.AtNs
			r.pending[i].n++
			return
		}
		r.lastAssist[g] = len(r.pending)
		r.pending = append(r.pending, goSpan{g: g, n: 1, span: rundir.InsideSpan{AtNs: at, DurNs: end - at,
			Kind: rundir.InsideGCAssist, Source: string(FormatGoTrace)}})
	}
}
