package sample

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rig-dev/rig/rundir"
)

// SchedOptions choose what the scheduler sampler follows.
type SchedOptions struct {
	Root     string        // filesystem root of /proc ("/" on a node)
	Interval time.Duration // default DefaultSchedInterval
	PIDs     []int
	PIDFiles []string // read again at every sample, so a relaunched process is followed
}

// DefaultSchedInterval is fine enough to place a thread's run-queue wait within a latency
// excursion (≥ 1 ms, usually tens) and coarse enough to cost little (docs/results.md has the
// measured cost).
const DefaultSchedInterval = 20 * time.Millisecond

// schedRelist is how often the followed processes' threads are listed again: a thread started
// since is read from the next listing on, and listing every interval would cost as much as the
// reads themselves.
const schedRelist = 200 * time.Millisecond

// Sched samples, per interval, the run-queue wait of every thread of the followed processes
// (/proc/<pid>/task/<tid>/schedstat, cumulative ns) and the node's pressure stall totals
// (/proc/pressure/{cpu,io,memory}). Each thread's schedstat file stays open and is re-read from
// offset 0, so a sample costs one read per thread, not an open and a close.
type Sched struct {
	opts     SchedOptions
	proc     string
	threads  map[taskKey]*task
	psi      [3]psiTotals
	psiFiles [3]*os.File
	hasPSI   bool
	last     time.Time
	listed   time.Time // the threads were last listed
	buf      []byte
}

type taskKey struct{ pid, tid int }

type task struct {
	f    *os.File
	comm string
	wait uint64
	seen bool // listed at the latest sample
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
	s := &Sched{opts: opts, proc: filepath.Join(opts.Root, "proc"), threads: map[taskKey]*task{}, buf: make([]byte, 512)}
	if _, err := os.Stat(filepath.Join(s.proc, "self", "schedstat")); err != nil {
		return nil, fmt.Errorf("sched sampler: the kernel has no per-task schedstat: %w", err)
	}
	s.psi, s.hasPSI = s.readPSI()
	s.relist(nil)
	s.last, s.listed = time.Now(), time.Now()
	return s, nil
}

// Close closes every open schedstat and pressure file.
func (s *Sched) Close() {
	for i, f := range s.psiFiles {
		if f != nil {
			f.Close()
			s.psiFiles[i] = nil
		}
	}
	for k, t := range s.threads {
		t.f.Close()
		delete(s.threads, k)
	}
}

// Next reads every thread and the pressure files and returns what changed since the last call:
// the threads that waited (a thread first seen now is only a baseline) and the PSI increases.
func (s *Sched) Next() rundir.SchedSample {
	now := time.Now()
	out := rundir.SchedSample{AtNs: now.UnixNano(), IntervalNs: int64(now.Sub(s.last))}
	s.last = now
	out.Threads = s.threadsNow(out.Threads)
	if psi, ok := s.readPSI(); ok && s.hasPSI {
		d := func(a, b uint64) uint64 { return uint64(delta(a, b)) }
		p := rundir.SchedPSI{
			CPUSomeUs: d(s.psi[0].some, psi[0].some), CPUFullUs: d(s.psi[0].full, psi[0].full),
			IOSomeUs: d(s.psi[1].some, psi[1].some), IOFullUs: d(s.psi[1].full, psi[1].full),
			MemSomeUs: d(s.psi[2].some, psi[2].some), MemFullUs: d(s.psi[2].full, psi[2].full),
		}
		if p != (rundir.SchedPSI{}) {
			out.PSI = &p
		}
		s.psi = psi
	}
	return out
}

// threadsNow reads every followed thread, appending to out those that waited since their last
// reading. Every schedRelist it lists the processes' threads again: new ones are opened, and
// those gone closed.
func (s *Sched) threadsNow(out []rundir.SchedThread) []rundir.SchedThread {
	if now := time.Now(); s.listed.IsZero() || now.Sub(s.listed) >= schedRelist {
		s.listed = now
		return s.relist(out)
	}
	for k, t := range s.threads {
		out = s.read(k, t, out)
	}
	return out
}

func (s *Sched) read(k taskKey, t *task, out []rundir.SchedThread) []rundir.SchedThread {
	w, err := s.readWait(t.f)
	if err != nil {
		return out // ended: closed at the next listing
	}
	if w > t.wait {
		out = append(out, rundir.SchedThread{PID: k.pid, TID: k.tid, Comm: t.comm, WaitNs: int64(w - t.wait)})
	}
	t.wait = w
	return out
}

func (s *Sched) relist(out []rundir.SchedThread) []rundir.SchedThread {
	for _, t := range s.threads {
		t.seen = false
	}
	for _, pid := range s.pids() {
		dir := filepath.Join(s.proc, strconv.Itoa(pid), "task")
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue // gone, or not started yet
		}
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			k := taskKey{pid, tid}
			if t := s.threads[k]; t != nil {
				t.seen = true
				out = s.read(k, t, out)
				continue
			}
			f, err := os.Open(filepath.Join(dir, e.Name(), "schedstat"))
			if err != nil {
				continue // the thread ended meanwhile
			}
			comm, _ := os.ReadFile(filepath.Join(dir, e.Name(), "comm"))
			t := &task{f: f, comm: strings.TrimSpace(string(comm)), seen: true}
			if t.wait, err = s.readWait(f); err != nil {
				f.Close()
				continue
			}
			s.threads[k] = t // first seen: a baseline, not a wait
		}
	}
	for k, t := range s.threads {
		if !t.seen {
			t.f.Close()
			delete(s.threads, k)
		}
	}
	return out
}

// readWait is schedstat's second field: "<on-cpu ns> <run-queue wait ns> <timeslices>".
func (s *Sched) readWait(f *os.File) (uint64, error) {
	n, err := f.ReadAt(s.buf, 0)
	if n == 0 && err != nil {
		return 0, err
	}
	fields := bytes.Fields(s.buf[:n])
	if len(fields) < 2 {
		return 0, fmt.Errorf("schedstat %q: want 3 fields", s.buf[:n])
	}
	return strconv.ParseUint(string(fields[1]), 10, 64)
}

// readPSI reads the pressure files' totals, keeping them open; false when the kernel has none.
func (s *Sched) readPSI() ([3]psiTotals, bool) {
	var out [3]psiTotals
	for i, name := range psiFiles {
		if s.psiFiles[i] == nil {
			f, err := os.Open(filepath.Join(s.proc, "pressure", name))
			if err != nil {
				return out, false
			}
			s.psiFiles[i] = f
		}
		n, err := s.psiFiles[i].ReadAt(s.buf, 0)
		if n == 0 && err != nil {
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

func (s *Sched) pids() []int {
	return followed(s.opts.PIDs, s.opts.PIDFiles)
}

// Run writes one NDJSON line per interval in which a thread waited or a pressure total moved,
// until ctx ends.
func (s *Sched) Run(ctx context.Context, w io.Writer) error {
	defer s.Close()
	enc := json.NewEncoder(w)
	return every(ctx, s.opts.Interval, func() error {
		smp := s.Next()
		if len(smp.Threads) == 0 && smp.PSI == nil {
			return nil
		}
		if err := enc.Encode(smp); err != nil {
			return fmt.Errorf("sched sampler: write: %w", err)
		}
		return nil
	})
}
