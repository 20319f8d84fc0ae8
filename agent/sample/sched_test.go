package sample

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/agent/runq"
	"github.com/rig-dev/rig/rundir"
)

// fakeProc writes a /proc with one process's threads and the pressure files.
type fakeProc struct {
	t    *testing.T
	root string
}

// newFakeProc is a /proc with the kernel's schedstat and every pressure file at some and full
// µs; the test adds the threads.
func newFakeProc(t *testing.T, some, full int) fakeProc {
	p := fakeProc{t, t.TempDir()}
	p.write("self/schedstat", "1 2 3\n")
	for _, n := range psiFiles {
		p.psi(n, some, full)
	}
	return p
}

func (p fakeProc) write(rel, content string) {
	p.t.Helper()
	path := filepath.Join(p.root, "proc", rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

func (p fakeProc) thread(pid, tid int, comm string, waitNs int) {
	dir := strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid)
	p.write(dir+"/comm", comm+"\n")
	p.write(dir+"/schedstat", "1000 "+strconv.Itoa(waitNs)+" 7\n")
}

func (p fakeProc) psi(name string, some, full int) {
	p.write("pressure/"+name, "some avg10=0.00 avg60=0.00 avg300=0.00 total="+strconv.Itoa(some)+
		"\nfull avg10=0.00 avg60=0.00 avg300=0.00 total="+strconv.Itoa(full)+"\n")
}

func TestSchedDeltasOnlyWhereAThreadWaited(t *testing.T) {
	p := newFakeProc(t, 10, 5)
	p.thread(42, 42, "java", 100)
	p.thread(42, 43, "apply", 5000)
	p.write("engine.pid", "42\n")
	s, err := NewSched(SchedOptions{Root: p.root, PIDFiles: []string{filepath.Join(p.root, "proc", "engine.pid")}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p.thread(42, 43, "apply", 7500) // waited 2.5 µs; thread 42 did not wait
	p.thread(42, 44, "new", 9999)   // first seen: a baseline, not a wait
	p.psi("cpu", 30, 5)
	got := s.Next()
	want := []rundir.SchedThread{{PID: 42, TID: 43, Comm: "apply", WaitNs: 2500}}
	if len(got.Threads) != 1 || got.Threads[0] != want[0] {
		t.Fatalf("threads %+v, want %+v", got.Threads, want)
	}
	if got.PSI == nil || *got.PSI != (rundir.SchedPSI{CPUSomeUs: 20}) {
		t.Fatalf("psi %+v, want cpu some 20 µs only", got.PSI)
	}
	p.thread(42, 44, "new", 10999)
	os.RemoveAll(filepath.Join(p.root, "proc", "42", "task", "43"))
	got = s.Next()
	if len(got.Threads) != 1 || got.Threads[0].TID != 44 || got.Threads[0].WaitNs != 1000 || got.PSI != nil {
		t.Fatalf("second sample %+v, want thread 44 waited 1000 ns and no PSI change", got)
	}
	if _, ok := s.byKey[taskKey{42, 43}]; ok {
		t.Fatal("a thread gone is still followed")
	}
}

// BenchmarkSchedSample is one sample of a process with 40 threads of its own beside the Go
// runtime's (45–47 in all), as a JVM engine has: the sampler's own CPU per interval, and that as
// a share of a core at the default interval (docs/results.md). The samples are back to back, so
// every thread is read at each until 100 ms have passed (schedIdleAfter): at -benchtime 1000x,
// the reads of every thread; BenchmarkSchedRun is the sampler at its interval.
func BenchmarkSchedSample(b *testing.B) {
	defer idleThreads(40)()
	s, err := NewSched(SchedOptions{PIDs: []int{os.Getpid()}})
	if err != nil {
		b.Skip(err)
	}
	defer s.Close()
	runtime.LockOSThread() // RUSAGE_THREAD then measures the sampler's own thread
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	c0 := rusage(syscall.RUSAGE_THREAD)
	for b.Loop() {
		s.Next()
	}
	perSample := float64(rusage(syscall.RUSAGE_THREAD)-c0) / float64(b.N)
	b.ReportMetric(perSample, "cpu-ns/op")
	b.ReportMetric(float64(len(s.tasks)), "threads")
	b.ReportMetric(100*perSample/float64(DefaultSchedInterval), "%core@"+DefaultSchedInterval.String())
}

// BenchmarkSchedRun is the sampler as a node runs it: Run at the default interval for b.N
// intervals, its wake-ups, reads after a sleep and writes included, following the same process as
// BenchmarkSchedSample ("threads"); "psi" follows no process. "wake/timerfd" is Run's interval
// loop alone, "wake/ticker" a Go ticker's at the same interval (what Run waited on before). The
// cost is the whole process's CPU while it runs less the same process's CPU idle for as long just
// before (the runtime's own background work).
func BenchmarkSchedRun(b *testing.B) {
	defer idleThreads(40)()
	for _, c := range []struct {
		name   string
		pids   []int
		placed bool // with the kernel's placer (agent/runq) beside the samples
		run    func(ctx context.Context, s *Sched) error
	}{
		{"wake/ticker", nil, false, func(ctx context.Context, _ *Sched) error {
			return every(ctx, DefaultSchedInterval, func() error { return nil })
		}},
		{"wake/timerfd", nil, false, func(ctx context.Context, _ *Sched) error {
			t, err := newIntervalTimer(DefaultSchedInterval)
			if err != nil {
				return err
			}
			defer t.close()
			defer context.AfterFunc(ctx, t.stop)()
			for {
				if err := t.wait(); err != nil {
					return nil
				}
			}
		}},
		{"psi", nil, false, func(ctx context.Context, s *Sched) error { return s.Run(ctx, io.Discard) }},
		{"threads", []int{os.Getpid()}, false, func(ctx context.Context, s *Sched) error { return s.Run(ctx, io.Discard) }},
		{"threads/placed", []int{os.Getpid()}, true, func(ctx context.Context, s *Sched) error { return s.Run(ctx, io.Discard) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			wall := time.Duration(b.N) * DefaultSchedInterval
			c0 := rusage(syscall.RUSAGE_SELF)
			time.Sleep(wall)
			idle := rusage(syscall.RUSAGE_SELF) - c0
			opts := SchedOptions{PIDs: c.pids}
			if c.placed {
				tr, err := runq.Open(runq.Options{})
				if err != nil {
					b.Skip(err)
				}
				opts.Placer = tr
			}
			s, err := NewSched(opts)
			if err != nil {
				b.Skip(err)
			}
			defer s.Close()
			threads := len(s.tasks)
			debug.FreeOSMemory() // the placer's set-up (the kernel's BTF read once) is not the pass's cost, nor the heap it leaves the runtime to return
			ctx, cancel := context.WithTimeout(context.Background(), wall)
			defer cancel()
			c1 := rusage(syscall.RUSAGE_SELF)
			if err := c.run(ctx, s); err != nil {
				b.Fatal(err)
			}
			perInterval := float64(rusage(syscall.RUSAGE_SELF)-c1-idle) / float64(b.N)
			b.ReportMetric(perInterval, "cpu-ns/op")
			b.ReportMetric(float64(threads), "threads")
			b.ReportMetric(100*perInterval/float64(DefaultSchedInterval), "%core@"+DefaultSchedInterval.String())
		})
	}
}

// idleThreads starts n threads that wait, as most of a JVM's do; the returned func ends them.
func idleThreads(n int) func() {
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			<-stop
		}()
	}
	time.Sleep(10 * time.Millisecond)
	return func() { close(stop); wg.Wait() }
}

func rusage(who int) time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(who, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestSchedFollowsThreadsAsTheyComeAndGo starts and ends real threads of this process between
// samples: each started thread is followed from the next sample on, each ended one is closed at
// the next sample, and the open schedstat files stay one per followed thread over many rounds.
func TestSchedFollowsThreadsAsTheyComeAndGo(t *testing.T) {
	s, err := NewSched(SchedOptions{PIDs: []int{os.Getpid()}})
	if err != nil {
		t.Skip(err)
	}
	defer s.Close()
	for round := range 30 {
		const threads = 4
		tids := make(chan int, threads)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
				tids <- syscall.Gettid()
				<-stop
			}()
		}
		started := make([]int, 0, threads)
		for range threads {
			started = append(started, <-tids)
		}
		s.Next()
		for _, tid := range started {
			if s.byKey[taskKey{os.Getpid(), tid}] == nil {
				t.Fatalf("round %d: thread %d, started before the sample, is not followed after it", round, tid)
			}
		}
		close(stop)
		wg.Wait()
		ended := started[:0]
		for _, tid := range started {
			if tid != os.Getpid() { // the runtime keeps the main thread, locked or not
				waitGone(t, tid)
				ended = append(ended, tid)
			}
		}
		s.Next()
		for _, tid := range ended {
			if s.byKey[taskKey{os.Getpid(), tid}] != nil {
				t.Fatalf("round %d: thread %d ended before the sample and is still followed after it", round, tid)
			}
		}
		if open := openSchedstats(t); open != len(s.tasks) {
			t.Fatalf("round %d: %d schedstat files open for %d followed threads", round, open, len(s.tasks))
		}
	}
	if n := len(s.tasks); n > threadCount(t) {
		t.Fatalf("%d threads followed, the process has %d", n, threadCount(t))
	}
}

// waitGone waits for an ended thread to leave /proc/self/task (the runtime ends it after the
// goroutine returns).
func waitGone(t *testing.T, tid int) {
	t.Helper()
	for range 5000 {
		if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid)); os.IsNotExist(err) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("thread %d did not end", tid)
}

func openSchedstats(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && filepath.Base(l) == "schedstat" {
			n++
		}
	}
	return n
}

func threadCount(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestSchedFollowsARelaunchedProcess: the PID file names a new process; the ended one's threads
// are closed and the new one's followed, their first reading a baseline.
func TestSchedFollowsARelaunchedProcess(t *testing.T) {
	p := fakeProc{t, t.TempDir()}
	p.write("self/schedstat", "1 2 3\n")
	p.thread(42, 42, "java", 100)
	p.thread(42, 43, "apply", 5000)
	pidFile := filepath.Join(p.root, "engine.pid")
	if err := os.WriteFile(pidFile, []byte("42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := NewSched(SchedOptions{Root: p.root, PIDs: []int{42}, PIDFiles: []string{pidFile}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.tasks) != 2 || len(s.procs) != 1 {
		t.Fatalf("following %d threads of %d processes, want 2 of 1 (the PID given and in the file is one)", len(s.tasks), len(s.procs))
	}
	os.RemoveAll(filepath.Join(p.root, "proc", "42"))
	p.thread(77, 77, "java", 10)
	p.thread(77, 78, "apply", 20)
	s.opts.PIDs = nil
	if err := os.WriteFile(pidFile, []byte("77\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.listed = time.Time{} // the PID file is due to be read again
	if got := s.Next(); len(got.Threads) != 0 {
		t.Fatalf("first sample of the new process %+v, want only baselines", got.Threads)
	}
	if len(s.tasks) != 2 || s.byKey[taskKey{77, 78}] == nil || s.procs[42] != nil {
		t.Fatalf("following %d threads, processes %v; want the new process's 2", len(s.tasks), s.procs)
	}
	p.thread(77, 78, "apply", 520)
	if got := s.Next(); len(got.Threads) != 1 || got.Threads[0] != (rundir.SchedThread{PID: 77, TID: 78, Comm: "apply", WaitNs: 500}) {
		t.Fatalf("second sample %+v, want thread 78 waited 500 ns", got.Threads)
	}
}

func TestSchedstatFields(t *testing.T) {
	for _, c := range []struct {
		in        string
		cpu, wait uint64
		ok        bool
	}{
		{"1000 7500 7\n", 1000, 7500, true},
		{"0 0 0\n", 0, 0, true},
		{"  1  18446744073709551615 2", 1, 18446744073709551615, true},
		{"18446744073709551616 1 2\n", 0, 0, false},
		{"1 18446744073709551616 2\n", 0, 0, false},
		{"1000\n", 0, 0, false},
		{"1000 -5 7\n", 0, 0, false},
		{"1000 75x 7\n", 0, 0, false},
		{"10x0 75 7\n", 0, 0, false},
		{"", 0, 0, false},
	} {
		if cpu, wait, ok := schedstatFields([]byte(c.in)); cpu != c.cpu || wait != c.wait || ok != c.ok {
			t.Errorf("schedstatFields(%q) = %d, %d, %v; want %d, %d, %v", c.in, cpu, wait, ok, c.cpu, c.wait, c.ok)
		}
	}
}

// TestSchedReadsAnIdleThreadLessOften: passes every 20 ms on an injected clock; a thread that
// runs is read at every pass, one whose schedstat has not moved for schedIdleAfter only every
// schedIdleEvery. The idle thread's wait is so found at its next due reading, over the time since
// its last one, and from then on it is read at every pass again.
func TestSchedReadsAnIdleThreadLessOften(t *testing.T) {
	p := fakeProc{t, t.TempDir()}
	p.write("self/schedstat", "1 2 3\n")
	p.thread(42, 43, "apply", 0)
	p.thread(42, 44, "gc", 0)
	s, err := NewSched(SchedOptions{Root: p.root, PIDs: []int{42}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const every = 20 * time.Millisecond
	t0 := s.last
	gcWait := 0
	for pass := 1; pass <= 20; pass++ {
		p.thread(42, 43, "apply", pass*1000) // waits 1 µs a pass
		if pass == 11 {
			gcWait = 3000 // the idle thread wakes and waits, between two of its readings
			p.thread(42, 44, "gc", gcWait)
		}
		if pass == 16 {
			gcWait += 500
			p.thread(42, 44, "gc", gcWait)
		}
		got := s.sample(t0.Add(time.Duration(pass)*every), nil)
		var apply, gc []rundir.SchedThread
		for _, th := range got.Threads {
			if th.TID == 43 {
				apply = append(apply, th)
			} else {
				gc = append(gc, th)
			}
		}
		if len(apply) != 1 || apply[0].WaitNs != 1000 || apply[0].IntervalNs != 0 {
			t.Fatalf("pass %d: apply %+v, want 1 µs over the sample's interval", pass, apply)
		}
		var want []rundir.SchedThread
		switch pass {
		case 14: // read at 80 ms, idle from 100 ms, read again at 180 and 280 ms
			want = []rundir.SchedThread{{PID: 42, TID: 44, Comm: "gc", WaitNs: 3000, IntervalNs: int64(100 * time.Millisecond)}}
		case 16: // it ran: read at every pass from the one after
			want = []rundir.SchedThread{{PID: 42, TID: 44, Comm: "gc", WaitNs: 500}}
		}
		if !slices.Equal(gc, want) {
			t.Fatalf("pass %d (%v): gc %+v, want %+v", pass, time.Duration(pass)*every, gc, want)
		}
	}
}

// writeCounter counts the writes it is given and keeps their bytes.
type writeCounter struct {
	writes int
	bytes.Buffer
}

func (w *writeCounter) Write(b []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(b)
}

// TestSchedRunWritesInBatches drives Run's loop on an injected clock, 20 ms a pass for 2.4 s,
// a thread waiting 1 µs in each: every sample is in the output, in order and as encoding/json
// reads it, written once a second and at the stop (three writes), not once a sample.
func TestSchedRunWritesInBatches(t *testing.T) {
	p := newFakeProc(t, 0, 0)
	p.thread(42, 43, "apply", 0)
	s, err := NewSched(SchedOptions{Root: p.root, PIDs: []int{42}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const passes, every = 120, 20 * time.Millisecond
	clock, pass := s.last, 0
	wait := func() error {
		if pass == passes {
			return errTimerStopped
		}
		pass++
		clock = clock.Add(every)
		p.thread(42, 43, "apply", pass*1000)
		return nil
	}
	var w writeCounter
	if err := s.run(wait, func() time.Time { return clock }, &w); err != nil {
		t.Fatal(err)
	}
	var got []rundir.SchedSample
	for line := range bytes.Lines(w.Bytes()) {
		var smp rundir.SchedSample
		if err := json.Unmarshal(line, &smp); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		got = append(got, smp)
	}
	if len(got) != passes {
		t.Fatalf("%d samples, want %d", len(got), passes)
	}
	for i, smp := range got {
		want := []rundir.SchedThread{{PID: 42, TID: 43, Comm: "apply", WaitNs: 1000}}
		if smp.IntervalNs != int64(every) || !slices.Equal(smp.Threads, want) || smp.PSI != nil {
			t.Fatalf("sample %d %+v, want thread 43 waited 1 µs in 20 ms", i, smp)
		}
	}
	if w.writes != 3 {
		t.Errorf("%d writes for %d samples over %v, want 3: one a second and the rest at the stop", w.writes, passes, passes*every)
	}
}

// TestSchedPassDoesNotAllocate: a pass of Run (a thread waited, the pressure moved) and its line
// allocate nothing once the buffers have grown, so it never makes the agent collect garbage.
func TestSchedPassDoesNotAllocate(t *testing.T) {
	p := newFakeProc(t, 0, 0)
	p.thread(42, 43, "apply", 0)
	p.thread(42, 44, "encode", 0)
	s, err := NewSched(SchedOptions{Root: p.root, PIDs: []int{42}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	open := func(rel string) *os.File {
		f, err := os.OpenFile(filepath.Join(p.root, "proc", rel), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	apply, cpu := open("42/task/43/schedstat"), open("pressure/cpu")
	defer apply.Close()
	defer cpu.Close()
	n := 0
	buf := make([]byte, 0, 4096)
	pass := func() {
		n++
		// Same length every time: the files are rewritten in place, not truncated.
		apply.WriteAt([]byte(fmt.Sprintf("1000 %08d 7\n", n)), 0)
		cpu.WriteAt([]byte(fmt.Sprintf("some avg10=0.00 avg60=0.00 avg300=0.00 total=%08d\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", n)), 0)
		smp := s.sample(s.last.Add(DefaultSchedInterval), s.threads)
		s.threads = smp.Threads
		if len(smp.Threads) != 1 || smp.PSI == nil {
			t.Fatalf("pass %d: %+v, want thread 43's wait and a CPU stall", n, smp)
		}
		buf = append(smp.AppendJSON(buf[:0]), '\n')
	}
	pass()
	// The file writes above allocate (Sprintf); what is counted is the pass's share.
	writes := testing.AllocsPerRun(50, func() {
		apply.WriteAt([]byte(fmt.Sprintf("1000 %08d 7\n", n)), 0)
		cpu.WriteAt([]byte(fmt.Sprintf("some avg10=0.00 avg60=0.00 avg300=0.00 total=%08d\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", n)), 0)
	})
	if raceOn {
		t.Skip("allocations are not counted under the race detector, which allocates on its own; go test ./agent/sample counts them")
	}
	if allocs := testing.AllocsPerRun(50, pass) - writes; allocs > 0 {
		t.Errorf("a pass allocates %.1f times, want none", allocs)
	}
}

// TestIntervalTimer: a wait returns once the timer has expired; a stop ends a wait under way and
// every later one.
func TestIntervalTimer(t *testing.T) {
	tm, err := newIntervalTimer(time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := tm.wait(); err != nil {
		t.Fatalf("wait: %v", err)
	}
	tm.close()
	tm, err = newIntervalTimer(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer tm.close()
	done := make(chan error)
	go func() { done <- tm.wait() }()
	time.Sleep(10 * time.Millisecond) // most likely parked in the netpoller by now; either way it must end
	tm.stop()
	if err := <-done; !errors.Is(err, errTimerStopped) {
		t.Fatalf("wait under way at the stop: %v, want errTimerStopped", err)
	}
	if err := tm.wait(); !errors.Is(err, errTimerStopped) {
		t.Fatalf("wait after the stop: %v, want errTimerStopped", err)
	}
}

// TestSchedNoPSI: a sampler told another reads the pressure stalls opens no pressure file and
// reports none, however they move; its threads are sampled as before.
func TestSchedNoPSI(t *testing.T) {
	p := newFakeProc(t, 10, 5)
	p.thread(42, 43, "apply", 0)
	s, err := NewSched(SchedOptions{Root: p.root, PIDs: []int{42}, NoPSI: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p.psi("cpu", 30, 5)
	p.thread(42, 43, "apply", 700)
	got := s.Next()
	if got.PSI != nil || len(got.Threads) != 1 || got.Threads[0].WaitNs != 700 {
		t.Fatalf("sample %+v, want thread 43's 700 ns and no pressure stalls", got)
	}
	if s.psiFiles != [3]int{-1, -1, -1} {
		t.Fatalf("pressure files open: %v", s.psiFiles)
	}
}
