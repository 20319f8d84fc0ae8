package runq

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"
)

// openTracer opens a Tracer, skipping the test where the kernel or the privilege cannot run
// one, except under CI=true, where CI runs as root on a kernel that can.
func openTracer(t testing.TB, opts Options) *Tracer {
	t.Helper()
	tr, err := Open(opts)
	if errors.Is(err, ErrUnsupported) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true, and CI runs as root on a kernel with BPF and BTF: %v", err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Error(err)
		}
	})
	return tr
}

// worker is an OS thread pinned to one CPU that runs work until stopped, then parks until
// released and exits (its goroutine returns still locked, so the thread ends).
type worker struct {
	tid     int
	done    chan struct{}
	release chan struct{}
}

// startWorkers starts n threads pinned to cpu, each running work(stop) until stop is set.
func startWorkers(t testing.TB, n, cpu int, stop *atomic.Bool, work func(stop *atomic.Bool)) []*worker {
	t.Helper()
	// Each worker needs a P of its own, or Go's scheduler, not the kernel's, would take
	// turns among them.
	prev := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(prev + n)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	ws := make([]*worker, n)
	errc := make(chan error, n)
	for i := range ws {
		w := &worker{done: make(chan struct{}), release: make(chan struct{})}
		ws[i] = w
		tidc := make(chan int)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
			var set unix.CPUSet
			set.Set(cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				errc <- fmt.Errorf("pinning a thread to CPU %d: %w", cpu, err)
				tidc <- 0
				return
			}
			tidc <- unix.Gettid()
			work(stop)
			close(w.done)
			<-w.release
		}()
		w.tid = <-tidc
		if w.tid == 0 {
			t.Fatal(<-errc)
		}
	}
	t.Cleanup(func() { stopWorkers(ws, stop) })
	return ws
}

// stopWorkers stops the workers and waits until each has finished its work and parked.
func stopWorkers(ws []*worker, stop *atomic.Bool) {
	stop.Store(true)
	for _, w := range ws {
		<-w.done
	}
}

func releaseWorkers(ws []*worker) {
	for _, w := range ws {
		select {
		case <-w.release:
		default:
			close(w.release)
		}
	}
}

func spin(stop *atomic.Bool) {
	for !stop.Load() {
	}
}

// spinAndSleep spins about 1 ms and sleeps about 1 ms (a real nanosleep: the thread leaves
// the run queue), over and over: its waits are wake-up waits as well as preemptions, and its
// sleeps must not count as waits.
func spinAndSleep(stop *atomic.Bool) {
	for !stop.Load() {
		end := monoNs() + 1e6
		for monoNs() < end && !stop.Load() {
		}
		ts := unix.NsecToTimespec(1e6)
		for unix.Nanosleep(&ts, &ts) == unix.EINTR {
		}
	}
}

func monoNs() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// runDelay is the thread's cumulative run-queue wait, schedstat's second field, in ns.
func runDelay(t testing.TB, tid int) int64 {
	t.Helper()
	p := fmt.Sprintf("/proc/self/task/%d/schedstat", tid)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		t.Fatalf("%s: %q has no second field", p, b)
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return n
}

// contendedCPU is the CPU the workers share: the last this process may use.
func contendedCPU(t testing.TB) int {
	t.Helper()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	cpu := -1
	for i := 0; i < len(set)*64; i++ {
		if set.IsSet(i) {
			cpu = i
		}
	}
	return cpu
}

// Four threads share one CPU: two spin, one spins and sleeps, all three tracked; a fourth
// spins untracked. Every tracked thread's waits are reported, none overlaps the next, and
// their sum is what schedstat's run_delay says the thread waited over the same time, less
// the waits under MinWait; the untracked thread, which waited as much, has none.
func TestWaitsMatchSchedstatUnderContention(t *testing.T) {
	const minWait = 50 * time.Microsecond
	tr := openTracer(t, Options{MinWait: minWait})
	var stop atomic.Bool
	cpu := contendedCPU(t)
	ws := append(startWorkers(t, 2, cpu, &stop, spin), startWorkers(t, 1, cpu, &stop, spinAndSleep)...)
	ws = append(ws, startWorkers(t, 1, cpu, &stop, spin)...)
	tracked, untracked := ws[:3], ws[3]

	// run_delay is read before Track and after the threads park, so every wait reported
	// (ended after Track, as schedstat counts it, and before the park) is inside the schedstat
	// interval.
	before := map[int]int64{}
	for _, w := range ws {
		before[w.tid] = runDelay(t, w.tid)
	}
	t0 := monoNs()
	for _, w := range tracked {
		if err := tr.Track(w.tid); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	stopWorkers(ws, &stop)
	time.Sleep(20 * time.Millisecond) // until each has parked
	delta := map[int]int64{}
	for _, w := range ws {
		delta[w.tid] = runDelay(t, w.tid) - before[w.tid]
	}
	t1 := monoNs()

	byTID := map[int][]Wait{}
	if err := tr.Drain(func(w Wait) { byTID[int(w.TID)] = append(byTID[int(w.TID)], w) }); err != nil {
		t.Fatal(err)
	}
	for _, w := range tracked {
		if err := tr.Untrack(w.tid); err != nil {
			t.Fatal(err)
		}
	}
	releaseWorkers(ws)
	if lost, err := tr.Lost(); err != nil || lost != 0 {
		t.Errorf("Lost() = %d, %v; want 0", lost, err)
	}

	for tid := range byTID {
		if !isTracked(tracked, tid) {
			t.Errorf("waits reported for TID %d, which is not tracked: %v", tid, byTID[tid])
		}
	}
	if n := len(byTID[untracked.tid]); n != 0 {
		t.Errorf("the untracked thread %d has %d waits reported", untracked.tid, n)
	}
	if delta[untracked.tid] < 50*int64(time.Millisecond) {
		t.Errorf("the untracked thread waited only %v in 300 ms on a CPU shared by four: no contention", time.Duration(delta[untracked.tid]))
	}
	for i, w := range tracked {
		waits := byTID[w.tid]
		sort.Slice(waits, func(i, j int) bool { return waits[i].StartNs < waits[j].StartNs })
		var sum int64
		for j, x := range waits {
			sum += x.DurNs
			if x.DurNs < minWait.Nanoseconds() {
				t.Errorf("thread %d: a wait of %v is under MinWait %v", w.tid, time.Duration(x.DurNs), minWait)
			}
			if end := x.StartNs + x.DurNs; end < t0 || end > t1 {
				t.Errorf("thread %d: wait %+v ends outside the tracked time [%d, %d]", w.tid, x, t0, t1)
			}
			if j > 0 && waits[j-1].StartNs+waits[j-1].DurNs > x.StartNs {
				t.Errorf("thread %d: wait %+v overlaps the one before, %+v", w.tid, x, waits[j-1])
			}
		}
		d := delta[w.tid]
		t.Logf("thread %d (%d): %d waits reported summing %v; schedstat run_delay grew %v (%.1f%%)",
			i, w.tid, len(waits), time.Duration(sum), time.Duration(d), 100*float64(sum)/float64(max(d, 1)))
		if len(waits) < 10 {
			t.Errorf("thread %d: %d waits reported in 300 ms on a CPU shared by four, want at least 10", w.tid, len(waits))
		}
		// Each wait is the kernel's own run_delay increment, so only the waits under MinWait
		// may be missing.
		if slack := int64(time.Millisecond) + d/100; sum > d+slack {
			t.Errorf("thread %d: the waits reported sum to %v, over schedstat's %v + %v", w.tid, time.Duration(sum), time.Duration(d), time.Duration(slack))
		}
		if sum < d*90/100 {
			t.Errorf("thread %d: the waits reported sum to %v, under 90%% of schedstat's %v", w.tid, time.Duration(sum), time.Duration(d))
		}
	}
}

func isTracked(ws []*worker, tid int) bool {
	for _, w := range ws {
		if w.tid == tid {
			return true
		}
	}
	return false
}

// After Untrack a thread that keeps waiting has no more waits reported; Drain with nothing
// pending returns at once with none.
func TestUntrackStopsReports(t *testing.T) {
	tr := openTracer(t, Options{MinWait: 50 * time.Microsecond})
	count := func() map[int]int {
		n := map[int]int{}
		done := make(chan error, 1)
		go func() { done <- tr.Drain(func(w Wait) { n[int(w.TID)]++ }) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Drain blocked")
		}
		return n
	}
	if n := count(); len(n) != 0 {
		t.Fatalf("nothing tracked, yet Drain reported %v", n)
	}

	var stop atomic.Bool
	ws := startWorkers(t, 2, contendedCPU(t), &stop, spin)
	a := ws[0].tid
	if err := tr.Track(a); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := count(); n[a] == 0 {
		t.Fatalf("thread %d, tracked and contending, has no waits reported: %v", a, n)
	}
	if err := tr.Untrack(a); err != nil {
		t.Fatal(err)
	}
	count() // a wait that ended between the Drain and Untrack
	before := runDelay(t, a)
	time.Sleep(100 * time.Millisecond)
	if waited := runDelay(t, a) - before; waited < int64(10*time.Millisecond) {
		t.Fatalf("thread %d waited only %v after Untrack: no contention to prove anything", a, time.Duration(waited))
	}
	if n := count(); n[a] != 0 {
		t.Errorf("thread %d has %d waits reported after Untrack", a, n[a])
	}
	stopWorkers(ws, &stop)
	releaseWorkers(ws)
	if n := count(); len(n) != 0 {
		t.Errorf("Drain after everything was drained reported %v", n)
	}
}

// Track refuses a TID no thread can have, naming the range.
func TestTrackRejectsImpossibleTID(t *testing.T) {
	tr := openTracer(t, Options{})
	for _, tid := range []int{0, -1, 1 << 30} {
		err := tr.Track(tid)
		if err == nil || !strings.Contains(err.Error(), "pid_max") {
			t.Errorf("Track(%d) = %v; want an error naming pid_max", tid, err)
		}
	}
}

// Without privilege Open fails with ErrUnsupported (and leaves no state): the test binary
// runs itself as nobody.
func TestOpenUnprivilegedIsUnsupported(t *testing.T) {
	if os.Getenv("RUNQ_OPEN_AS_CHILD") == "1" {
		_, err := Open(Options{})
		fmt.Printf("unsupported=%v err=%v\n", errors.Is(err, ErrUnsupported), err)
		return
	}
	if os.Geteuid() != 0 {
		_, err := Open(Options{})
		if !errors.Is(err, ErrUnsupported) {
			t.Fatalf("Open as uid %d = %v; want ErrUnsupported", os.Geteuid(), err)
		}
		return
	}
	// The test binary's own folder is private to root: run a copy nobody can read.
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	child := filepath.Join(dir, "runq.test")
	if err := os.WriteFile(child, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(child, "-test.run=^TestOpenUnprivilegedIsUnsupported$", "-test.count=1")
	cmd.Env = append(os.Environ(), "RUNQ_OPEN_AS_CHILD=1")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("running the test binary as nobody: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "unsupported=true") {
		t.Fatalf("Open as nobody did not match ErrUnsupported:\n%s", out)
	}
	t.Logf("as nobody: %s", strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]))
}

// Close detaches and frees every program and map (none is pinned), and the Tracer refuses
// use after it.
func TestCloseLeavesNothing(t *testing.T) {
	tr, err := Open(Options{})
	if errors.Is(err, ErrUnsupported) {
		openTracer(t, Options{}) // skips, or fails under CI
	}
	if err != nil {
		t.Fatal(err)
	}
	var progIDs []ebpf.ProgramID
	for _, p := range []*ebpf.Program{tr.shared.prog} {
		info, err := p.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := info.ID()
		progIDs = append(progIDs, id)
	}
	var mapIDs []ebpf.MapID
	for _, m := range append([]*ebpf.Map{tr.shared.slots, tr.shared.rings, tr.shared.lost}, tr.shared.inner...) {
		info, err := m.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := info.ID()
		mapIDs = append(mapIDs, id)
	}
	if err := tr.Track(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	// The kernel frees a detached program after an RCU grace period.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		for _, id := range progIDs {
			if p, err := ebpf.NewProgramFromID(id); err == nil {
				p.Close()
				left = append(left, fmt.Sprintf("program %d", id))
			}
		}
		for _, id := range mapIDs {
			if m, err := ebpf.NewMapFromID(id); err == nil {
				m.Close()
				left = append(left, fmt.Sprintf("map %d", id))
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after Close the kernel still has %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for name, err := range map[string]error{
		"Track":   tr.Track(os.Getpid()),
		"Untrack": tr.Untrack(os.Getpid()),
		"Drain":   tr.Drain(func(Wait) {}),
	} {
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("%s after Close = %v; want os.ErrClosed", name, err)
		}
	}
	if _, err := tr.Lost(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Lost after Close = %v; want os.ErrClosed", err)
	}
}

// Drain allocates nothing per wait once warm.
func TestDrainDoesNotAllocate(t *testing.T) {
	tr := openTracer(t, Options{MinWait: 50 * time.Microsecond})
	var stop atomic.Bool
	ws := startWorkers(t, 3, contendedCPU(t), &stop, spin)
	for _, w := range ws {
		if err := tr.Track(w.tid); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	count := func(Wait) { n++ }
	time.Sleep(50 * time.Millisecond)
	if err := tr.Drain(count); err != nil {
		t.Fatal(err)
	}
	var most uint64
	for range 3 {
		time.Sleep(50 * time.Millisecond)
		n = 0
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		err := tr.Drain(count)
		runtime.ReadMemStats(&m1)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatal("no waits to drain: no contention")
		}
		// The spinning workers allocate nothing, so the process's mallocs are Drain's.
		most = max(most, m1.Mallocs-m0.Mallocs)
		if m1.Mallocs-m0.Mallocs == 0 {
			stopWorkers(ws, &stop)
			releaseWorkers(ws)
			return
		}
	}
	t.Errorf("Drain of waits allocated %d times, every try", most)
}

// A kernel whose sched_switch does not pass prev_state (before 5.18), or passes other
// arguments, is unsupported rather than a verifier error.
func TestCheckArgsRefusesOtherTracepoints(t *testing.T) {
	task := &btf.Struct{Name: "task_struct", Size: 8}
	boolT := &btf.Int{Name: "_Bool", Size: 1, Encoding: btf.Bool}
	uintT := &btf.Int{Name: "unsigned int", Size: 4}
	data := btf.FuncParam{Name: "__data", Type: &btf.Pointer{Target: &btf.Void{}}}
	proto := func(params ...btf.FuncParam) *btf.Typedef {
		return &btf.Typedef{Name: "btf_trace_sched_switch", Type: &btf.Pointer{Target: &btf.FuncProto{
			Return: &btf.Void{}, Params: append([]btf.FuncParam{data}, params...)}}}
	}
	want := []string{"bool preempt", "task_struct *prev", "task_struct *next", "unsigned int prev_state"}
	now := proto(btf.FuncParam{Type: boolT}, btf.FuncParam{Type: &btf.Pointer{Target: task}},
		btf.FuncParam{Type: &btf.Pointer{Target: task}}, btf.FuncParam{Type: uintT})
	if err := checkArgs("sched_switch", now, want); err != nil {
		t.Fatalf("today's sched_switch: %v", err)
	}
	for name, fn := range map[string]*btf.Typedef{
		"before 5.18": proto(btf.FuncParam{Type: boolT}, btf.FuncParam{Type: &btf.Pointer{Target: task}},
			btf.FuncParam{Type: &btf.Pointer{Target: task}}),
		"prev not a task": proto(btf.FuncParam{Type: boolT}, btf.FuncParam{Type: uintT},
			btf.FuncParam{Type: &btf.Pointer{Target: task}}, btf.FuncParam{Type: uintT}),
	} {
		err := checkArgs("sched_switch", fn, want)
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "sched_switch") {
			t.Errorf("%s: %v; want ErrUnsupported naming sched_switch", name, err)
		}
	}
}

// Options.RingBytes the kernel would refuse is named before anything is loaded.
func TestOpenRefusesBadRingBytes(t *testing.T) {
	for _, n := range []int{1000, 3 << 12} {
		_, err := Open(Options{RingBytes: n})
		if err == nil || !strings.Contains(err.Error(), "Options.RingBytes") || errors.Is(err, ErrUnsupported) {
			t.Errorf("RingBytes %d: %v; want an error naming Options.RingBytes", n, err)
		}
	}
}

// With fewer slots than TIDs (forced to two here; pid_max over 65536 in earnest), Track of a
// thread whose slot another tracked thread holds fails with ErrSlotTaken and leaves the first
// tracked: its waits are still reported, the refused thread's are not, and untracking the
// refused thread frees nothing. Once the first is untracked, the slot is the other's.
func TestTrackRefusesTakenSlot(t *testing.T) {
	tr := openTracer(t, Options{MinWait: 50 * time.Microsecond, slots: 2})
	var stop atomic.Bool
	ws := startWorkers(t, 3, contendedCPU(t), &stop, spin)
	// Of three TIDs two have the same parity, so the same one of two slots.
	a, b := ws[0].tid, ws[1].tid
	switch {
	case ws[0].tid%2 == ws[2].tid%2:
		b = ws[2].tid
	case ws[1].tid%2 == ws[2].tid%2:
		a = ws[2].tid
	}
	drain := func() map[int]int {
		n := map[int]int{}
		if err := tr.Drain(func(w Wait) { n[int(w.TID)]++ }); err != nil {
			t.Fatal(err)
		}
		return n
	}

	err := tr.Track(a, b)
	if !errors.Is(err, ErrSlotTaken) || !strings.Contains(err.Error(), strconv.Itoa(b)) {
		t.Fatalf("Track(%d, %d) with two slots = %v; want ErrSlotTaken naming %d", a, b, err, b)
	}
	if err := tr.Untrack(b); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	n := drain()
	if n[a] < 10 {
		t.Errorf("thread %d, tracked and contending, has %d waits reported in 150 ms, want at least 10", a, n[a])
	}
	if n[b] != 0 {
		t.Errorf("thread %d, refused its slot, has %d waits reported", b, n[b])
	}

	if err := tr.Untrack(a); err != nil {
		t.Fatal(err)
	}
	if err := tr.Track(b); err != nil {
		t.Fatalf("Track(%d) once %d is untracked: %v", b, a, err)
	}
	drain() // a wait of a's that ended before Untrack
	time.Sleep(150 * time.Millisecond)
	n = drain()
	if n[b] < 10 || n[a] != 0 {
		t.Errorf("after Untrack(%d) and Track(%d): waits reported %v; want at least 10 of %d's, none of %d's", a, b, n, b, a)
	}
	stopWorkers(ws, &stop)
	releaseWorkers(ws)
}

// Every TID has a slot of its own up to a pid_max of 65536; above, the slots stay 65536.
func TestSlotCount(t *testing.T) {
	for pidMax, want := range map[int]int{301: 512, 32768: 32768, 32769: 65536, 65536: 65536, 65537: 65536, pidLimit: 65536} {
		if got := slotCount(pidMax); got != want {
			t.Errorf("slotCount(%d) = %d, want %d", pidMax, got, want)
		}
	}
}

// TestSharedTracersGetOnlyTheirWaits: one program shared by two tracers attached through the
// files a process would be handed (Files, Attach): each gets its own threads' waits and no
// other's, a thread the other tracks is refused (ErrSlotTaken), and a tracer that closes frees
// its threads' slots for the other while the program keeps running.
func TestSharedTracersGetOnlyTheirWaits(t *testing.T) {
	openTracer(t, Options{}).Close() // skips where the kernel cannot
	sh, err := OpenShared(Options{MinWait: 50 * time.Microsecond}, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	trs := make([]*Tracer, 2)
	for i := range trs {
		files, err := sh.Files(i)
		if err != nil {
			t.Fatal(err)
		}
		trs[i], err = Attach(Handle{Slots: int(files[0].Fd()), Ring: int(files[1].Fd()), Lost: int(files[2].Fd()), Index: i, MinWait: sh.MinWait()})
		for _, f := range files { // Attach holds duplicates
			f.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	defer trs[1].Close()
	var stop atomic.Bool
	ws := startWorkers(t, 3, contendedCPU(t), &stop, spin)
	defer releaseWorkers(ws)
	for i, tr := range trs {
		if err := tr.Track(ws[i].tid); err != nil {
			t.Fatal(err)
		}
	}
	if err := trs[1].Track(ws[0].tid); !errors.Is(err, ErrSlotTaken) {
		t.Errorf("tracking the other tracer's thread: %v, want ErrSlotTaken", err)
	}
	time.Sleep(200 * time.Millisecond)
	got := make([]map[int32]int, 2)
	for i, tr := range trs {
		got[i] = map[int32]int{}
		if err := tr.Drain(func(w Wait) { got[i][w.TID]++ }); err != nil {
			t.Fatal(err)
		}
	}
	for i := range trs {
		if got[i][int32(ws[i].tid)] < 5 || len(got[i]) != 1 {
			t.Errorf("tracer %d drained %v, want only thread %d's waits, at least 5 in 200 ms on a CPU shared by three", i, got[i], ws[i].tid)
		}
	}
	// Closing tracer 0 untracks its thread: tracer 1 may track it, and gets its waits.
	if err := trs[0].Close(); err != nil {
		t.Fatal(err)
	}
	if err := trs[1].Track(ws[0].tid); err != nil {
		t.Fatalf("tracking a closed tracer's thread: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	n := 0
	if err := trs[1].Drain(func(w Wait) {
		if w.TID == int32(ws[0].tid) {
			n++
		}
	}); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Errorf("tracer 1 got no waits of thread %d after tracking it", ws[0].tid)
	}
	if lost, err := trs[1].Lost(); err != nil || lost != 0 {
		t.Errorf("Lost() = %d, %v", lost, err)
	}
	if st, err := sh.Stats(); err != nil || st.Tracepoint != "sched_switch" {
		t.Errorf("Stats() = %+v, %v", st, err)
	}
}

// TestWaitsAcrossCPUMovesWhole: a tracked thread moved between two busy CPUs while it waits has
// its wait cut by the kernel (run_delay counts the part before each move, and queues it afresh
// on the other CPU); the reported waits still sum to its run_delay growth, not to the parts
// after the last move.
func TestWaitsAcrossCPUMovesWhole(t *testing.T) {
	tr := openTracer(t, Options{MinWait: 50 * time.Microsecond})
	var stop atomic.Bool
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	a, b := -1, contendedCPU(t)
	for i := 0; i < b && a < 0; i++ {
		if allowed.IsSet(i) {
			a = i
		}
	}
	if a < 0 {
		t.Skip("needs two CPUs this process may use")
	}
	busy := append(startWorkers(t, 3, a, &stop, spin), startWorkers(t, 3, b, &stop, spin)...)
	moved := startWorkers(t, 1, a, &stop, spin)[0]
	ws := append(busy, moved)
	before := runDelay(t, moved.tid)
	if err := tr.Track(moved.tid); err != nil {
		t.Fatal(err)
	}
	var set unix.CPUSet
	for i := range 60 {
		set.Zero()
		set.Set([]int{a, b}[i%2])
		if err := unix.SchedSetaffinity(moved.tid, &set); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	stopWorkers(ws, &stop)
	time.Sleep(20 * time.Millisecond) // until each has parked
	grew := runDelay(t, moved.tid) - before
	var sum int64
	if err := tr.Drain(func(w Wait) {
		if int(w.TID) == moved.tid {
			sum += w.DurNs
		}
	}); err != nil {
		t.Fatal(err)
	}
	releaseWorkers(ws)
	t.Logf("moved 60 times: waits reported sum to %v; run_delay grew %v (%.1f%%)", time.Duration(sum), time.Duration(grew), 100*float64(sum)/float64(max(grew, 1)))
	if grew < int64(50*time.Millisecond) {
		t.Fatalf("the moved thread waited only %v in 300 ms among three spinners a CPU: no contention", time.Duration(grew))
	}
	if sum < grew*90/100 || sum > grew+int64(time.Millisecond)+grew/100 {
		t.Errorf("waits reported sum to %v, want run_delay's growth %v (90 %% at least: the waits under MinWait)", time.Duration(sum), time.Duration(grew))
	}
}
