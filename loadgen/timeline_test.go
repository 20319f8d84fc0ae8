package loadgen

import (
	"testing"
	"time"

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
