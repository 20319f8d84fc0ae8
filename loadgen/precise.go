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

// The probe sender's thread asks the kernel to run it before the engines. On a loaded host it
// shares with them (the local target) a sender at an ordinary nice value woke up tens of
// milliseconds late, most often while a relaunched JVM compiled its code, and a lower nice value
// did not cure it (docs/constants.md, "Probe sender priority"). So it asks for SCHED_FIFO at the lowest
// real-time priority (SenderRTPriority), which wakes it ahead of every ordinary thread, and
// failing that (no CAP_SYS_NICE) for SenderNice, and failing that keeps what it has;
// stats.json says what it ran with (send_lag.sender_sched, sender_nice). Its thread sleeps
// between probes and spins at most load.spin before each, so the engines lose only the
// microseconds of each send (and the kernel's real-time throttling caps it at 95 % of a CPU in
// any case); a client on a host of its own, as in production, is never kept waiting by the
// servers either.
const (
	SenderRTPriority = 1
	SenderNice       = -10
)

// senderThread is preciseThread for a schedule's sender, which also asks for the scheduling
// above and one more Go scheduler slot (P) for as long as it runs: woken from nanosleep it needs
// a P, and with every P busy (readers decoding answers, a GC) it waited up to the scheduler's
// 10 ms time slice for one (linkproxy/queue.go measured the same for its timer threads). It
// returns the policy ("fifo" or "other") and nice value the thread runs at, read back, and a
// func that gives the P back.
func senderThread() (policy string, nice int, done func()) {
	preciseThread()
	tid := unix.Gettid()
	rt := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: SenderRTPriority}
	if unix.SchedSetAttr(tid, &rt, 0) != nil {
		_ = unix.Setpriority(unix.PRIO_PROCESS, tid, SenderNice) // best effort: read back below
	}
	policy = "other"
	if a, err := unix.SchedGetAttr(tid, 0); err == nil && a.Policy == unix.SCHED_FIFO {
		policy = "fifo"
	}
	if p, err := unix.Getpriority(unix.PRIO_PROCESS, tid); err == nil {
		nice = 20 - p // getpriority answers 20 - nice on Linux
	}
	addProcs(1)
	return policy, nice, func() { addProcs(-1) }
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
