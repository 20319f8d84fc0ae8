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

// The sender's thread asks for SenderNice and reports the nice value it really runs at (read
// back: without CAP_SYS_NICE it keeps its own), and holds one more scheduler slot while it runs.
func TestSenderThread(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	got := make(chan [3]int)
	go func() {
		nice, done := senderThread()
		during := runtime.GOMAXPROCS(0)
		p, _ := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
		done()
		got <- [3]int{nice, during, 20 - p}
	}()
	g := <-got
	if g[1] != procs+1 || runtime.GOMAXPROCS(0) != procs {
		t.Errorf("GOMAXPROCS %d while sending, %d after, want %d then %d", g[1], runtime.GOMAXPROCS(0), procs+1, procs)
	}
	if g[0] != g[2] {
		t.Errorf("reported nice %d, the thread runs at %d", g[0], g[2])
	}
	if os.Geteuid() == 0 && g[0] != SenderNice {
		t.Errorf("as root the sender runs at nice %d, want %d", g[0], SenderNice)
	}
}
