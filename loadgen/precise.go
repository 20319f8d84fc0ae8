package loadgen

import (
	"runtime"
	"sync"
	"time"

	"github.com/rig-dev/rig/loadgen/loadspec"
	"golang.org/x/sys/unix"
)

// Go's timers wake from epoll_wait, whose timeout is whole milliseconds: a probe due in 200 µs
// waits a millisecond when nothing else runs (send lag p50 553 µs, p99 1.1 ms at 5k/s on a quiet
// machine). The send loop sleeps its last stretch before a message is due in nanosleep instead,
// on a thread of its own whose timer slack is 1 ns (the default, 50 µs, lets the kernel wake it
// that much late to batch wake-ups).
//
// Even so, a sleep wakes late: nanosleep of 200 µs with 1 ns slack woke p50 27 µs, p99 62 µs late
// here. Spin (up to loadspec.MaxSpin) busy-waits the last stretch instead, at the cost of a CPU for that
// long per message: Aeron's busy-spin idle strategy, for a client that has cores to spare.
const (
	preciseWindow = loadspec.MaxSpin
)

// preciseThread locks the calling goroutine to its thread for good: the thread's timer slack
// changes, so it must end with the goroutine rather than go back to the scheduler.
func preciseThread() {
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0) // best effort: without it, 50 µs late at most
}

// SenderNice is the nice value the probe sender's thread asks for. On a host it shares with the
// engines (the local target: three JVMs and the controller on 2 CPUs, load average 10) the
// sender, at nice 0, woke up to tens of milliseconds late: 1.6 % of the probes due clear of
// every fault window went out more than 1 ms late (issue 36). Its thread sleeps between
// probes, so the priority costs the engines only the microseconds of each send; a client on a
// host of its own, as in production, is never kept waiting by the servers either. Lowering a
// nice value needs CAP_SYS_NICE; without it the thread keeps its own and stats.json says which
// it ran at (send_lag.sender_nice).
const SenderNice = -10

// senderThread is preciseThread for a schedule's sender, which also asks for SenderNice and
// one more Go scheduler slot (P) for as long as it runs: woken from nanosleep it needs a P, and
// with every P busy (readers decoding answers, a GC) it waited up to the scheduler's 10 ms time
// slice for one (linkproxy/queue.go measured the same for its timer threads). It returns the
// nice value the thread runs at, read back, and a func that gives the P back.
func senderThread() (nice int, done func()) {
	preciseThread()
	tid := unix.Gettid()
	_ = unix.Setpriority(unix.PRIO_PROCESS, tid, SenderNice) // best effort: read back below
	if p, err := unix.Getpriority(unix.PRIO_PROCESS, tid); err == nil {
		nice = 20 - p // getpriority answers 20 - nice on Linux
	}
	addProcs(1)
	return nice, func() { addProcs(-1) }
}

var procsMu sync.Mutex

func addProcs(n int) {
	procsMu.Lock()
	defer procsMu.Unlock()
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + n)
}

// preciseSleep sleeps d on the calling thread (it holds no P meanwhile: the runtime hands it on).
func preciseSleep(d time.Duration) {
	if d <= 0 {
		return
	}
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}
