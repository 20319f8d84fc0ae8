package loadgen

import (
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rig-dev/rig/rundir"
)

// A message sent late is counted in the second it was due, which may precede seconds the
// connector has already ticked: the timeline stays in order, one entry per second.
func TestTimelineCountsLateBySecondDue(t *testing.T) {
	cl := &client{epochUnix: time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC).UnixNano()}
	sec := int64(time.Second)
	cl.mu.Lock()
	cl.tickLocked(1*sec+5, func(s *rundir.ConnSecond) { s.Dials++ })
	cl.tickLocked(3*sec+5, func(s *rundir.ConnSecond) { s.Dials++ })
	cl.mu.Unlock()
	cl.lateConnected([]int64{2*sec + 10, 2*sec + 20, 3*sec + 1, 1 * sec})
	tl := cl.stats.Timeline
	if len(tl) != 3 {
		t.Fatalf("timeline %+v, want seconds 1, 2, 3", tl)
	}
	for i, want := range []struct{ s, dials, late int64 }{{1, 1, 1}, {2, 0, 2}, {3, 1, 1}} {
		got := tl[i]
		if got.At.Unix()-time.Unix(0, cl.epochUnix).Unix() != want.s || got.Dials != want.dials || got.LateConnected != want.late {
			t.Errorf("second %d: %+v, want dials %d late %d", want.s, got, want.dials, want.late)
		}
	}
}

// The sender's thread asks for real-time scheduling (or a lower nice) and reports what it really
// runs with (read back: without CAP_SYS_NICE it keeps its own), and holds one more scheduler slot
// while it runs.
func TestSenderThread(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	type seen struct {
		policy         string
		nice, procs, p int
		fifo           bool
	}
	got := make(chan seen)
	go func() {
		policy, nice, done := senderThread()
		during := runtime.GOMAXPROCS(0)
		tid := unix.Gettid()
		p, _ := unix.Getpriority(unix.PRIO_PROCESS, tid)
		a, err := unix.SchedGetAttr(tid, 0)
		done()
		got <- seen{policy, nice, during, 20 - p, err == nil && a.Policy == unix.SCHED_FIFO}
	}()
	g := <-got
	if g.procs != procs+1 || runtime.GOMAXPROCS(0) != procs {
		t.Errorf("GOMAXPROCS %d while sending, %d after, want %d then %d", g.procs, runtime.GOMAXPROCS(0), procs+1, procs)
	}
	if g.nice != g.p || (g.policy == "fifo") != g.fifo {
		t.Errorf("reported %s nice %d, the thread runs fifo=%v nice %d", g.policy, g.nice, g.fifo, g.p)
	}
	if os.Geteuid() == 0 && g.policy != "fifo" {
		t.Errorf("as root the sender runs %s, want fifo", g.policy)
	}
}
