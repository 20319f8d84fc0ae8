package loadgen

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/rig-dev/rig/rundir"
)

func TestBackoffDoublesToCap(t *testing.T) {
	want := []time.Duration{0, 5, 10, 20, 40, 80, 100, 100}
	for f, w := range want {
		if got := backoff(f, 100*time.Millisecond); got != w*time.Millisecond {
			t.Errorf("backoff after %d failures %v, want %v", f, got, w*time.Millisecond)
		}
	}
}

// The leader dies and the followers keep naming it until their heartbeat timeout (10 s with
// Aeron's default): on an injected clock, the connector's policy (nextTargetLocked, the
// failures that demoteLocked and a refused dial record) dials each server at most about once
// per MaxBackoff, where a fixed 10 ms poll made 838 reconnects and 671 failed dials.
func TestDeadLeaderDialsPacedOnInjectedClock(t *testing.T) {
	var now int64
	cl := &client{servers: []string{"a", "b", "c"}, opts: ConnOptions{}.withDefaults(),
		eps: map[string]*endpoint{}, avoid: map[string]int64{}, conns: map[*conn]struct{}{},
		stateCh: make(chan struct{}), log: slog.New(slog.DiscardHandler), clock: func() int64 { return now }}
	cl.hint = "a" // the lost leader's connection: tried again first
	perSec := map[string]map[int64]int{"a": {}, "b": {}, "c": {}}
	const rtt = int64(200 * time.Microsecond)
	for now < int64(10*time.Second) {
		cl.mu.Lock()
		addr, wait := cl.nextTargetLocked(now)
		now += int64(wait)
		perSec[addr][now/int64(time.Second)]++
		if addr == "a" { // refused
			cl.failedLocked(addr, now)
		} else { // a follower: connected, one probe on probation, NotLeader naming the dead leader
			now += rtt
			c := &conn{cl: cl, addr: addr, inflight: map[uint64]struct{}{}}
			cl.cur = c
			cl.demoteLocked(c, "a")
		}
		cl.mu.Unlock()
		now += rtt
	}
	for addr, secs := range perSec {
		total := 0
		for sec, n := range secs {
			total += n
			// 1 s / 100 ms, plus the ramp 5+10+20+40+80 ms in the first second.
			if limit := 11 + 5*b2i(sec == 0); n > limit {
				t.Errorf("%s dialled %d times in second %d, want at most %d", addr, n, sec, limit)
			}
		}
		if total < 50 {
			t.Errorf("%s dialled %d times in 10 s: the client must keep polling during an election", addr, total)
		}
	}
	// A leader found resets the backoff: a redirect (a step-down) is then followed at once.
	c := &conn{cl: cl, addr: "b", inflight: map[uint64]struct{}{}}
	cl.confirmLocked(c, now)
	cl.demoteLocked(c, "c")
	if addr, wait := cl.nextTargetLocked(now); addr != "c" || wait != 0 {
		t.Errorf("redirect after a leader answered: %s after %v, want c at once", addr, wait)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A real in-process cluster loses its leader and the followers keep naming it for a second:
// the dead server gets a bounded number of dials, the schedule goes on being scheduled through
// the outage (the sender never blocks on a dial), the probes due in it are held and counted as
// such, and none is lost.
func TestProbeDeadLeaderPacedAndScheduleKept(t *testing.T) {
	c := startCluster(t, 3)
	dir := t.TempDir()
	run, err := StartProbe(t.Context(), ProbeOptions{Servers: c.Addrs(), Rate: 1000, Duration: 2500 * time.Millisecond, Out: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return run.Stats().Answered >= 300 })
	c.Kill(0) // node 0 stays the leader the followers name
	before := run.Stats().Scheduled
	time.Sleep(500 * time.Millisecond)
	if mid := run.Stats().Scheduled; mid-before < 250 {
		t.Errorf("%d probes scheduled in 500 ms of outage at 1000/s: the sender blocked on the outage", mid-before)
	}
	time.Sleep(500 * time.Millisecond)
	c.SetLeader(1)
	st := waitNoneLost(t, run, "a leader lost for a second must cost no probe")
	t.Logf("conn %+v send lag %+v", st.Conn, st.SendLag)
	// 1 s at most once per 100 ms per server, plus the ramp; the old fixed 10 ms poll made ~100.
	if st.Conn.DialFailures > 20 || st.Conn.Reconnects > 45 {
		t.Errorf("%d failed dials, %d reconnects in a 1 s outage: not paced", st.Conn.DialFailures, st.Conn.Reconnects)
	}
	var dials, fails int64
	for _, s := range st.Conn.Timeline {
		dials += s.Dials
		fails += s.DialFailures
		// The dead server: at most the ramp (5 dials in 155 ms) and one per 100 ms after it.
		if s.DialFailures > 16 {
			t.Errorf("second %v: %d failed dials of the dead server", s.At, s.DialFailures)
		}
	}
	if fails != st.Conn.DialFailures || dials != st.Conn.Connects+st.Conn.DialFailures {
		t.Errorf("timeline: %d dials, %d failed; totals %d connects, %d failed", dials, fails, st.Conn.Connects, st.Conn.DialFailures)
	}
	if len(st.Conn.Holds) == 0 || st.SendLag.Held < 800 {
		t.Fatalf("holds %+v, %d held: the second of outage must be one hold of ~1000 probes", st.Conn.Holds, st.SendLag.Held)
	}
	var inHolds int64
	for _, h := range st.Conn.Holds {
		inHolds += h.Messages
		if !h.To.After(h.From) {
			t.Errorf("hold %+v ends before it begins", h)
		}
	}
	if inHolds != st.SendLag.Held {
		t.Errorf("holds carry %d messages, send lag says %d held", inHolds, st.SendLag.Held)
	}
	// Lateness outside the outage is the machine's (it varies with the load), never the
	// outage's: the probes due in the outage are all held, none counted late while connected.
	if heldLate := st.SendLag.Late - st.SendLag.LateConnected; heldLate > st.SendLag.Held || heldLate < 800 {
		t.Errorf("late %d, held %d, late while connected %d: the outage's probes must be the held ones", st.SendLag.Late, st.SendLag.Held, st.SendLag.LateConnected)
	}
	checkSchedule(t, readSorted(t, filepath.Join(dir, rundir.ProbesFile)), 1000)
}
