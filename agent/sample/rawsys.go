package sample

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The scheduler sampler's pass makes its system calls raw (syscall.RawSyscall: the runtime is
// not told) and waits for its interval on a timerfd through the netpoller, not on a Go timer.
// Why: at 20 ms the Go runtime's own work around each pass cost more than the pass. A Go timer
// wakes the thread polling for it and sysmon (which sleeps until the next timer), and the
// goroutine it readies wakes a spinning thread; every ordinary system call after an idle spell
// wakes sysmon again (entersyscall), which then polls every 20 µs for as long as the pass runs.
// A timerfd wakes only the thread blocked in the netpoller, and raw calls wake no one. Each raw
// call here reads a small /proc file that is rendered on the spot, or a pid file that is in the
// page cache: microseconds, during which the goroutine keeps its P (a stop-the-world waits for
// it as long) — not a call that can block on a device or a peer.

// rawPread reads fd from offset 0 into b.
func rawPread(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, e := syscall.RawSyscall6(syscall.SYS_PREAD64, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// rawNlink is fd's link count.
func rawNlink(fd int) (uint64, error) {
	var st syscall.Stat_t
	if _, _, e := syscall.RawSyscall(syscall.SYS_FSTAT, uintptr(fd), uintptr(unsafe.Pointer(&st)), 0); e != 0 {
		return 0, e
	}
	return uint64(st.Nlink), nil
}

var atFDCWD = unix.AT_FDCWD // a variable: the constant is negative, a uintptr argument is not

// rawReadFile reads the start of the file at path (NUL-terminated) into b.
func rawReadFile(path []byte, b []byte) (int, error) {
	fd, _, e := syscall.RawSyscall6(syscall.SYS_OPENAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(&path[0])), syscall.O_RDONLY|syscall.O_CLOEXEC, 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	n, err := rawPread(int(fd), b)
	syscall.RawSyscall(syscall.SYS_CLOSE, fd, 0, 0)
	return n, err
}

// intervalTimer is a periodic timerfd the netpoller waits on.
type intervalTimer struct {
	f    *os.File
	rc   syscall.RawConn
	read func(fd uintptr) bool // t.expired, kept: a method value made at each wait would allocate
	b    [8]byte
	err  error
}

// newIntervalTimer starts a timer that expires every d from now.
func newIntervalTimer(d time.Duration) (*intervalTimer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("timerfd: %w", err)
	}
	spec := unix.ItimerSpec{Interval: unix.NsecToTimespec(d.Nanoseconds()), Value: unix.NsecToTimespec(d.Nanoseconds())}
	if err := unix.TimerfdSettime(fd, 0, &spec, nil); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("timerfd: %w", err)
	}
	t := &intervalTimer{f: os.NewFile(uintptr(fd), "timerfd")} // non-blocking: the netpoller's
	if t.rc, err = t.f.SyscallConn(); err != nil {
		t.f.Close()
		return nil, fmt.Errorf("timerfd: %w", err)
	}
	t.read = t.expired
	return t, nil
}

// wait returns once the timer has expired since the last wait (once however many times it
// did: a late pass is not followed by a burst), or once stop was called (errTimerStopped).
func (t *intervalTimer) wait() error {
	t.err = nil
	if err := t.rc.Read(t.read); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return errTimerStopped
		}
		return fmt.Errorf("timerfd: %w", err)
	}
	if t.err != nil {
		return fmt.Errorf("timerfd: %w", t.err)
	}
	return nil
}

var errTimerStopped = errors.New("interval timer stopped")

// expired reads the expiry count: false (the netpoller waits) while there is none.
func (t *intervalTimer) expired(fd uintptr) bool {
	_, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&t.b[0])), uintptr(len(t.b)))
	if e == syscall.EAGAIN {
		return false
	}
	if e != 0 {
		t.err = e
	}
	return true
}

// stop makes a wait under way, and every later one, return errTimerStopped.
func (t *intervalTimer) stop() { t.f.SetReadDeadline(time.Unix(1, 0)) }

func (t *intervalTimer) close() error { return t.f.Close() }
