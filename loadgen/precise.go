package loadgen

import (
	"runtime"
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

// preciseSleep sleeps d on the calling thread (it holds no P meanwhile: the runtime hands it on).
func preciseSleep(d time.Duration) {
	if d <= 0 {
		return
	}
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}
