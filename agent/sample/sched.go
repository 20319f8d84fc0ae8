package sample

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rig-dev/rig/agent/runq"
	"github.com/rig-dev/rig/rundir"
)

// SchedOptions choose what the scheduler sampler follows.
type SchedOptions struct {
	Root     string        // filesystem root of /proc ("/" on a node)
	Interval time.Duration // default DefaultSchedInterval
	PIDs     []int
	PIDFiles []string // read again at every sample, so a relaunched process is followed
	// NoPSI leaves the pressure stalls out: another node on the same kernel reads them (the
	// local target), and they are a third of a sample's reads.
	NoPSI bool
	// Placer, where the kernel can (agent/runq's Tracer), reports each run-queue wait of the
	// followed threads over its threshold where it was: the samples carry those waits
	// (rundir.SchedSample.Waits) beside the totals. The sampler tracks the threads it follows,
	// untracks those that end, and closes it (where NewSched fails, the caller still has it).
	Placer Placer
	// Log is told what the placer could not do (a thread it could not track, a failed read).
	Log *slog.Logger
}

// Placer places run-queue waits (agent/runq's Tracer is one): the waits of the threads tracked,
// each reported once by Drain.
type Placer interface {
	Track(tids ...int) error
	Untrack(tids ...int) error
	Drain(func(runq.Wait)) error
	Close() error
}

// DefaultSchedInterval is fine enough to place a thread's run-queue wait within a latency
// excursion (≥ 1 ms, usually tens) and coarse enough to cost little (docs/results.md has the
// measured cost).
const DefaultSchedInterval = 20 * time.Millisecond

// PlacedSchedInterval is the interval where a Placer places the waits: those over its threshold
// carry their own place, so the samples need only spread the short rest (and read the pressure
// stalls), and five times fewer passes than DefaultSchedInterval's cost five times less. Chosen on
// quickstarts side by side with the threshold (docs/results.md, "Run-queue waits placed exactly").
const PlacedSchedInterval = 100 * time.Millisecond

// A thread whose schedstat has not moved (no CPU time, no wait) for schedIdleAfter is read only
// every schedIdleEvery instead of every interval: most of a process's threads sleep most of the
// time (a JVM's compiler and GC threads, a Go runtime's idle threads), and each read costs about
// as much as the interval's wake-up does. A thread that ran is read at every interval again from
// its next reading on; a wait found at an idle thread's reading is over the time since its last
// one (rundir.SchedThread.IntervalNs), so its total is kept and its place known to that grain.
const (
	schedIdleAfter = 100 * time.Millisecond
	schedIdleEvery = 100 * time.Millisecond
)

// schedRelist is how often the PID files are read again, so a relaunched process is followed.
// A followed process's threads are listed again only when that listing may have changed: its
// thread count moved (the link count of /proc/<pid>/task is 2 + its threads, one fstat a
// sample), a thread's read failed (it ended), or the followed processes changed. A thread
// started since the last sample is so opened at the next one, and a thread ended is closed there.
const schedRelist = 200 * time.Millisecond

// Schedule of the sampler's writes: its lines are kept in memory and written once a second (or
// once this many bytes are waiting) and when it stops, not one write a sample.
const (
	schedFlushEvery = time.Second
	schedFlushBytes = 64 << 10
)

// Sched samples, per interval, the run-queue wait of every thread of the followed processes
// (/proc/<pid>/task/<tid>/schedstat, cumulative ns) and the node's pressure stall totals
// (/proc/pressure/{cpu,io,memory}). Each thread's schedstat file stays open and is re-read from
// offset 0 with pread, so a sample costs one read per thread, not an open and a close; the kernel's
// read is most of that cost, so nothing else per thread allocates or goes through os.File, and a
// pass's calls are raw (rawsys.go says why).
type Sched struct {
	opts     SchedOptions
	proc     string
	procs    map[int]*procTasks
	tasks    []*task // read at every sample, in this order
	byKey    map[taskKey]*task
	byTID    map[int]*task // the same tasks by thread id, unique on the host: the placer's key
	psi      [3]psiTotals
	psiFiles [3]int // open pressure files, -1 until opened
	hasPSI   bool
	last     time.Time
	at       int64           // this pass's time, ns since the epoch (s.last's)
	prevAt   int64           // the previous pass's
	listed   time.Time       // the PID files were last read
	pidPaths [][]byte        // opts.PIDFiles, NUL-terminated for the raw open
	pidBuf   []int           // pids' result, reused
	psiOut   rundir.SchedPSI // sample's PSI, reused: Run's samples do not outlive the next one
	threads  []rundir.SchedThread
	buf      []byte
	// The placer's waits of a pass: waits is the sample's (reused), onWait the method value
	// Drain is handed (made once, so a pass allocates nothing), monoOff the wall clock's offset
	// from the monotonic one, which the kernel's wait times are on (monoAt read at monoStart).
	waits      []rundir.SchedWait
	onWait     func(runq.Wait)
	monoOff    int64
	monoStart  time.Time
	monoAt     int64
	track      []int // threads opened and ended at a listing, for the placer
	untrack    []int
	placerErrs int // failures of the placer's calls, logged first and then every 100th
}

type taskKey struct{ pid, tid int }

// procTasks is a followed process's /proc/<pid>/task, kept open for its link count.
type procTasks struct {
	fd    int
	nlink uint64
}

type task struct {
	key     taskKey
	fd      int // schedstat, O_RDONLY
	comm    string
	cpu     uint64 // schedstat at the last reading
	wait    uint64
	readAt  int64 // pass of the last reading (Sched.at)
	movedAt int64 // pass of the last reading that found cpu or wait moved
	seen    bool  // listed at the latest listing
	// exact is the placed waits' total not yet matched to a reading: they ended before the pass
	// read the thread (the placer is drained first), so most are in its next reading's wait.
	exact uint64
}

// idle says whether t is read only every schedIdleEvery, and not due at this pass.
func (s *Sched) idle(t *task) bool {
	// A thread the placer saw queued has run: its reading is due, so its rest of the wait is
	// spread over an interval, not over the idle spell.
	return t.exact == 0 && s.at-t.movedAt >= int64(schedIdleAfter) && s.at-t.readAt < int64(schedIdleEvery)
}

type psiTotals struct{ some, full uint64 }

var psiFiles = [3]string{"cpu", "io", "memory"}

// NewSched takes the first reading (the baseline of the first interval).
func NewSched(opts SchedOptions) (*Sched, error) {
	if opts.Root == "" {
		opts.Root = "/"
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultSchedInterval
	}
	s := &Sched{opts: opts, proc: filepath.Join(opts.Root, "proc"), procs: map[int]*procTasks{},
		byKey: map[taskKey]*task{}, byTID: map[int]*task{}, psiFiles: [3]int{-1, -1, -1}, buf: make([]byte, 512)}
	for _, f := range opts.PIDFiles {
		p, err := syscall.ByteSliceFromString(f)
		if err != nil {
			return nil, fmt.Errorf("sched sampler: pid file %q: %w", f, err)
		}
		s.pidPaths = append(s.pidPaths, p)
	}
	if _, err := os.Stat(filepath.Join(s.proc, "self", "schedstat")); err != nil {
		return nil, fmt.Errorf("sched sampler: the kernel has no per-task schedstat: %w", err)
	}
	if opts.Placer != nil {
		s.onWait = s.addWait
		var mono unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono); err != nil {
			return nil, fmt.Errorf("sched sampler: reading the monotonic clock: %w", err)
		}
		s.monoStart, s.monoAt = time.Now(), mono.Nano()
	}
	if !opts.NoPSI {
		s.psi, s.hasPSI = s.readPSI()
	}
	s.last, s.listed = time.Now(), time.Now()
	s.at = s.last.UnixNano()
	s.relist(nil, s.pids(), true)
	return s, nil
}

// Close closes every open schedstat, task directory and pressure file, and the placer.
func (s *Sched) Close() {
	if s.opts.Placer != nil {
		s.logPlacer()
		s.placerErr("close", s.opts.Placer.Close())
		s.opts.Placer = nil
	}
	for i, fd := range s.psiFiles {
		if fd >= 0 {
			syscall.Close(fd)
			s.psiFiles[i] = -1
		}
	}
	for _, t := range s.tasks {
		syscall.Close(t.fd)
	}
	s.tasks = s.tasks[:0]
	clear(s.byKey)
	clear(s.byTID)
	for pid, p := range s.procs {
		syscall.Close(p.fd)
		delete(s.procs, pid)
	}
}

// Next reads every thread and the pressure files and returns what changed since the last call:
// the threads that waited (a thread first seen now is only a baseline) and the PSI increases.
func (s *Sched) Next() rundir.SchedSample {
	out := s.sample(time.Now(), nil)
	out.Waits = slices.Clone(out.Waits)
	if out.PSI != nil {
		p := *out.PSI
		out.PSI = &p
	}
	return out
}

// sample is Next at now, its threads appended to threads[:0] and its PSI in s.psiOut.
func (s *Sched) sample(now time.Time, threads []rundir.SchedThread) rundir.SchedSample {
	out := rundir.SchedSample{AtNs: now.UnixNano(), IntervalNs: int64(now.Sub(s.last))}
	s.last, s.prevAt, s.at = now, s.at, now.UnixNano()
	if s.opts.Placer != nil {
		out.Waits = s.drain(now)
	}
	out.Threads = s.threadsNow(now, threads[:0])
	if !s.hasPSI {
		return out
	}
	if psi, ok := s.readPSI(); ok {
		d := func(a, b uint64) uint64 { return uint64(delta(a, b)) }
		s.psiOut = rundir.SchedPSI{
			CPUSomeUs: d(s.psi[0].some, psi[0].some), CPUFullUs: d(s.psi[0].full, psi[0].full),
			IOSomeUs: d(s.psi[1].some, psi[1].some), IOFullUs: d(s.psi[1].full, psi[1].full),
			MemSomeUs: d(s.psi[2].some, psi[2].some), MemFullUs: d(s.psi[2].full, psi[2].full),
		}
		if s.psiOut != (rundir.SchedPSI{}) {
			out.PSI = &s.psiOut
		}
		s.psi = psi
	}
	return out
}

// drain takes the placer's waits since the last pass, before the threads are read, so each is in
// its thread's next reading (task.exact).
func (s *Sched) drain(now time.Time) []rundir.SchedWait {
	s.waits = s.waits[:0]
	// The monotonic clock from the pass's own reading (Go's is CLOCK_MONOTONIC) against one
	// reading at the start: a clock_gettime call each pass costs more than the rest of it.
	s.monoOff = s.at - (s.monoAt + int64(now.Sub(s.monoStart)))
	s.placerErr("drain", s.opts.Placer.Drain(s.onWait))
	return s.waits
}

// addWait keeps a drained wait of a followed thread (its Comm for Next's callers: the file
// leaves it to the thread's readings).
func (s *Sched) addWait(w runq.Wait) {
	if t := s.byTID[int(w.TID)]; t != nil {
		t.exact += uint64(max(w.DurNs, 0))
		s.waits = append(s.waits, rundir.SchedWait{TID: t.key.tid, Comm: t.comm, FromNs: w.StartNs + s.monoOff, DurNs: w.DurNs})
	}
}

// placerCounts is what a placer may say of itself (runq.Tracer does): waits it could not report
// (their time stays in the samples' spread rest) and its programs' own cost, counted where the
// kernel's BPF statistics are on.
type placerCounts interface {
	Lost() (uint64, error)
	Stats() ([]runq.ProgStats, error)
}

// logPlacer logs the placer's counts as it closes.
func (s *Sched) logPlacer() {
	p, ok := s.opts.Placer.(placerCounts)
	if !ok || s.opts.Log == nil {
		return
	}
	lost, err := p.Lost()
	s.placerErr("lost", err)
	args := []any{"lost_waits", lost}
	stats, err := p.Stats()
	s.placerErr("stats", err)
	for _, st := range stats {
		if st.RunCount > 0 {
			args = append(args, st.Tracepoint+"_runs", st.RunCount, st.Tracepoint+"_ns", st.RunTime.Nanoseconds())
		}
	}
	s.opts.Log.Info("run-queue wait placer closed", args...)
}

// placerErr logs the placer's failures: the first, then every 100th, with their count.
func (s *Sched) placerErr(what string, err error) {
	if err == nil {
		return
	}
	if s.placerErrs%100 == 0 && s.opts.Log != nil {
		s.opts.Log.Warn("run-queue wait placer failed: its waits are sampled only", "call", what, "err", err, "failures", s.placerErrs+1)
	}
	s.placerErrs++
}

// threadsNow reads the followed threads (an idle one at its slower pace), appending to out those
// that waited since their last reading, and lists a process's threads again where they may have
// changed.
func (s *Sched) threadsNow(now time.Time, out []rundir.SchedThread) []rundir.SchedThread {
	relist := false
	var pids []int
	if now.Sub(s.listed) >= schedRelist {
		s.listed = now
		if pids = s.pids(); !s.samePIDs(pids) {
			relist = true
		}
	}
	for _, p := range s.procs {
		if relist {
			break
		}
		if nlink, err := rawNlink(p.fd); err != nil || nlink != p.nlink {
			relist = true
		}
	}
	if relist {
		if pids == nil {
			pids = s.pids()
		}
		return s.relist(out, pids, true)
	}
	ended := false
	for _, t := range s.tasks {
		if s.idle(t) {
			continue
		}
		var ok bool
		if out, ok = s.read(t, out); !ok {
			delete(s.byKey, t.key) // unlisted, so the listing below closes it
			ended = true
		}
	}
	if ended {
		// Opens a thread started in the same interval as one ended (the count did not move)
		// and closes the ended ones; the others were read above.
		return s.relist(out, s.pids(), false)
	}
	return out
}

// read appends t's wait since its last reading (with that reading's interval where it was not
// the previous pass); false where the read failed (the thread ended).
func (s *Sched) read(t *task, out []rundir.SchedThread) ([]rundir.SchedThread, bool) {
	cpu, w, err := s.readSchedstat(t.fd)
	if err != nil {
		return out, false
	}
	if w > t.wait {
		// The placed waits drained before this read are in it, but one can end between the
		// drain and the read (in this reading, placed at the next pass) or be drained before
		// its thread's schedstat counts it (placed now, in the next reading): what this reading
		// cannot hold is carried to the next, so the placed and the spread add up to the wait.
		placed := min(t.exact, w-t.wait)
		t.exact -= placed
		th := rundir.SchedThread{PID: t.key.pid, TID: t.key.tid, Comm: t.comm, WaitNs: int64(w - t.wait), ExactNs: int64(placed)}
		if t.readAt != s.prevAt {
			th.IntervalNs = s.at - t.readAt
		}
		out = append(out, th)
	}
	if cpu != t.cpu || w != t.wait {
		t.movedAt = s.at
	}
	t.cpu, t.wait, t.readAt = cpu, w, s.at
	return out, true
}

// relist lists the threads of pids: new ones are opened (their first reading a baseline), and
// those gone or unreadable closed; with read, the threads already followed are read too.
func (s *Sched) relist(out []rundir.SchedThread, pids []int, read bool) []rundir.SchedThread {
	for _, t := range s.tasks {
		t.seen = false
	}
	want := map[int]bool{}
	for _, pid := range pids {
		want[pid] = true
		dir := filepath.Join(s.proc, strconv.Itoa(pid), "task")
		// Opened afresh at each listing: a directory kept from an ended process would never
		// count the threads of one started since under the same PID.
		if p := s.procs[pid]; p != nil {
			syscall.Close(p.fd)
			delete(s.procs, pid)
		}
		fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			continue // gone, or not started yet: its threads are closed below
		}
		p := &procTasks{fd: fd}
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err == nil {
			p.nlink = uint64(st.Nlink) // before the listing: a thread started after it moves the count again
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			syscall.Close(fd)
			continue
		}
		s.procs[pid] = p
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			k := taskKey{pid, tid}
			if t := s.byKey[k]; t != nil {
				t.seen = true
				if read {
					var ok bool
					if out, ok = s.read(t, out); !ok {
						t.seen = false
					}
				}
				continue
			}
			fd, err := syscall.Open(filepath.Join(dir, e.Name(), "schedstat"), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
			if err != nil {
				continue // the thread ended meanwhile
			}
			comm, _ := os.ReadFile(filepath.Join(dir, e.Name(), "comm"))
			t := &task{key: k, fd: fd, comm: strings.TrimSpace(string(comm)), seen: true, readAt: s.at, movedAt: s.at}
			if t.cpu, t.wait, err = s.readSchedstat(fd); err != nil {
				syscall.Close(fd)
				continue
			}
			s.tasks = append(s.tasks, t) // first seen: a baseline, not a wait
			s.byKey[k] = t
			s.byTID[tid] = t
			if s.opts.Placer != nil {
				s.track = append(s.track, tid)
			}
		}
	}
	kept := s.tasks[:0]
	for _, t := range s.tasks {
		if t.seen && want[t.key.pid] {
			kept = append(kept, t)
			continue
		}
		syscall.Close(t.fd)
		switch s.byKey[t.key] {
		// Not a thread of the same id opened afresh above; nil: its read failed (threadsNow
		// unlisted it), it ended.
		case t, nil:
			delete(s.byKey, t.key)
			delete(s.byTID, t.key.tid)
			if s.opts.Placer != nil {
				s.untrack = append(s.untrack, t.key.tid)
			}
		}
	}
	clear(s.tasks[len(kept):])
	s.tasks = kept
	if s.opts.Placer != nil {
		if len(s.untrack) > 0 {
			s.placerErr("untrack", s.opts.Placer.Untrack(s.untrack...))
		}
		if len(s.track) > 0 {
			s.placerErr("track", s.opts.Placer.Track(s.track...))
		}
	}
	s.track, s.untrack = s.track[:0], s.untrack[:0]
	for pid, p := range s.procs {
		if !want[pid] {
			syscall.Close(p.fd)
			delete(s.procs, pid)
		}
	}
	return out
}

// samePIDs says whether pids are the processes followed now (none of them gone).
func (s *Sched) samePIDs(pids []int) bool {
	if len(pids) != len(s.procs) {
		return false
	}
	for _, pid := range pids {
		if s.procs[pid] == nil {
			return false
		}
	}
	return true
}

// readSchedstat is schedstat's first two fields: "<on-cpu ns> <run-queue wait ns> <timeslices>".
func (s *Sched) readSchedstat(fd int) (cpu, wait uint64, err error) {
	// From offset 0: a schedstat file is rendered afresh at each read from its start. A raw
	// call (rawsys.go): rendering allocates a page, which under memory pressure can wait in
	// reclaim, holding the goroutine's P meanwhile — the agent's, not the engine's.
	n, err := rawPread(fd, s.buf)
	if err != nil {
		return 0, 0, err
	}
	if n <= 0 {
		return 0, 0, io.ErrUnexpectedEOF
	}
	cpu, wait, ok := schedstatFields(s.buf[:n])
	if !ok {
		return 0, 0, fmt.Errorf("schedstat %q: want 3 fields of digits", s.buf[:n])
	}
	return cpu, wait, nil
}

// schedstatFields parses the first two space-separated fields of b as decimals without
// allocating.
func schedstatFields(b []byte) (cpu, wait uint64, ok bool) {
	i := 0
	field := func() (uint64, bool) {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n') {
			i++
		}
		var v uint64
		start := i
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			d := uint64(b[i] - '0')
			if v > (math.MaxUint64-d)/10 {
				return 0, false
			}
			v = v*10 + d
		}
		if i == start || (i < len(b) && b[i] != ' ' && b[i] != '\t' && b[i] != '\n') {
			return 0, false
		}
		return v, true
	}
	if cpu, ok = field(); !ok {
		return 0, 0, false
	}
	if wait, ok = field(); !ok {
		return 0, 0, false
	}
	return cpu, wait, true
}

// readPSI reads the pressure files' totals, keeping them open; false when the kernel has none.
func (s *Sched) readPSI() ([3]psiTotals, bool) {
	var out [3]psiTotals
	for i, name := range psiFiles {
		if s.psiFiles[i] < 0 {
			fd, err := syscall.Open(filepath.Join(s.proc, "pressure", name), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
			if err != nil {
				return out, false
			}
			s.psiFiles[i] = fd
		}
		// Rendering a pressure file takes a mutex another reader may hold, for as long as that
		// reader renders one: microseconds, so a raw read as for the threads.
		n, err := rawPread(s.psiFiles[i], s.buf)
		if err != nil || n <= 0 {
			return out, false
		}
		out[i] = parsePSI(s.buf[:n])
	}
	return out, true
}

// parsePSI reads "some avg10=… total=N" and "full … total=N" lines.
func parsePSI(b []byte) psiTotals {
	var p psiTotals
	for line := range bytes.Lines(b) {
		kind, rest, _ := bytes.Cut(line, []byte(" "))
		_, total, ok := bytes.Cut(rest, []byte("total="))
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(string(bytes.TrimSpace(total)), 10, 64)
		if err != nil {
			continue
		}
		switch string(kind) {
		case "some":
			p.some = v
		case "full":
			p.full = v
		}
	}
	return p
}

// pids are the followed processes, each once (a PID given and in a PID file is read once), as
// followed reads them but with raw calls; valid until the next call.
func (s *Sched) pids() []int {
	pids := append(s.pidBuf[:0], s.opts.PIDs...)
	for _, path := range s.pidPaths {
		n, err := rawReadFile(path, s.buf)
		if err != nil {
			continue // not started yet, or between runs
		}
		if pid, ok := parsePID(s.buf[:n]); ok {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	s.pidBuf = slices.Compact(pids)
	return s.pidBuf
}

// Run writes one NDJSON line per interval in which a thread waited or a pressure total moved,
// until ctx ends; the lines are written in batches (schedFlushEvery), the last when ctx ends.
func (s *Sched) Run(ctx context.Context, w io.Writer) error {
	defer s.Close()
	t, err := newIntervalTimer(s.opts.Interval)
	if err != nil {
		return fmt.Errorf("sched sampler: %w", err)
	}
	defer t.close()
	defer context.AfterFunc(ctx, t.stop)()
	return s.run(t.wait, time.Now, w)
}

// run is Run's loop: a sample after each wait, at now, until wait returns errTimerStopped.
func (s *Sched) run(wait func() error, now func() time.Time, w io.Writer) error {
	var buf []byte
	flushed := now()
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		_, err := w.Write(buf)
		buf = buf[:0]
		if err != nil {
			return fmt.Errorf("sched sampler: write: %w", err)
		}
		return nil
	}
	for {
		if err := wait(); err != nil {
			ferr := flush()
			if errors.Is(err, errTimerStopped) {
				return ferr
			}
			return fmt.Errorf("sched sampler: %w", err)
		}
		at := now()
		smp := s.sample(at, s.threads)
		s.threads = smp.Threads
		if len(smp.Threads) > 0 || smp.PSI != nil || len(smp.Waits) > 0 {
			buf = append(smp.AppendJSON(buf), '\n')
		}
		if len(buf) >= schedFlushBytes || at.Sub(flushed) >= schedFlushEvery {
			flushed = at
			if err := flush(); err != nil {
				return err
			}
		}
	}
}
