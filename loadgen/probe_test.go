package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine/wire"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"github.com/rig-dev/rig/rundir"
)

// A follower first in the server list redirects; every probe is answered by the leader, after
// its reply delay, and all outputs agree with each other.
func TestProbeFollowsRedirectAndRecordsEveryProbe(t *testing.T) {
	c := startCluster(t, 3)
	c.SetLeader(2)
	const delay = 300 * time.Microsecond
	c.SetDelay(delay)
	if _, err := Preload(t.Context(), PreloadOptions{BookShape: loadspec.BookShape{Orders: 2000, Instruments: 4}, Servers: c.Addrs()}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	const rate = 2000.0
	st, err := Probe(t.Context(), ProbeOptions{
		Servers: c.Addrs(), Rate: rate, Duration: 1500 * time.Millisecond, Out: dir,
		Instruments: 4, Interval: 500 * time.Millisecond, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, st)
	if st.Scheduled != 3000 || st.Answered != 3000 || st.Lost != 0 || st.Sent != 3000 {
		t.Fatalf("scheduled %d sent %d answered %d lost %d, want 3000 3000 3000 0", st.Scheduled, st.Sent, st.Answered, st.Lost)
	}
	if st.StopReason != "duration" {
		t.Errorf("stop reason %q, want duration", st.StopReason)
	}
	if st.Conn.Leader != c.Addrs()[2] || st.Conn.Redirects < 1 {
		t.Errorf("leader %q after %d redirects, want %q after at least one", st.Conn.Leader, st.Conn.Redirects, c.Addrs()[2])
	}
	if len(st.Conn.LeaderChanges) != 0 {
		t.Errorf("leader changes %v, want none (finding the first leader is not a change)", st.Conn.LeaderChanges)
	}
	if cs := c.Stats(); cs.Crossed != 0 {
		t.Errorf("the book saw %d crossing orders", cs.Crossed)
	}

	ps := readSorted(t, filepath.Join(dir, rundir.ProbesFile))
	if len(ps) != 3000 {
		t.Fatalf("%d records in probes.bin, want 3000", len(ps))
	}
	checkSchedule(t, ps, rate)
	for i, p := range ps {
		if p.Outcome != rundir.ProbeOK {
			t.Fatalf("probe %d outcome %d, want OK", i, p.Outcome)
		}
		if p.LatencyNs < int64(delay) {
			t.Fatalf("probe %d latency %v is below the server's reply delay %v", i, time.Duration(p.LatencyNs), delay)
		}
	}
	if got := st.Start.UnixNano(); got != ps[0].IntendedNs {
		t.Errorf("stats start %d, first probe intended %d", got, ps[0].IntendedNs)
	}

	// The interval log: read back with hdrhistogram-go's log reader, one interval per 500 ms of
	// schedule, every answered probe in exactly one interval, intervals back to back.
	hs := readHlog(t, filepath.Join(dir, rundir.ProbesHlogFile))
	if len(hs) != 3 {
		t.Fatalf("%d intervals in probes.hlog, want 3", len(hs))
	}
	var n int64
	for i, h := range hs {
		n += h.TotalCount()
		if h.TotalCount() != 1000 {
			t.Errorf("interval %d holds %d probes, want 1000 (500 ms at 2000/s)", i, h.TotalCount())
		}
		if d := h.EndTimeMs() - h.StartTimeMs(); d != 500 {
			t.Errorf("interval %d is %d ms long, want 500", i, d)
		}
		if i > 0 && h.StartTimeMs() != hs[i-1].EndTimeMs() {
			t.Errorf("interval %d starts at %d, previous ended at %d", i, h.StartTimeMs(), hs[i-1].EndTimeMs())
		}
		if h.Min() < int64(delay) {
			t.Errorf("interval %d min %d ns below the reply delay", i, h.Min())
		}
	}
	if n != st.Answered {
		t.Errorf("hlog holds %d values, answered %d", n, st.Answered)
	}
	if first := hs[0].StartTimeMs(); first != ps[0].IntendedNs/1e6 {
		t.Errorf("first interval starts at %d ms, first probe intended at %d ms", first, ps[0].IntendedNs/1e6)
	}
	head, _ := os.ReadFile(filepath.Join(dir, rundir.ProbesHlogFile))
	for _, want := range []string{"#[Histogram log format version", "#[StartTime: ", "#[BaseTime: ", "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"", "HISTF"} {
		if !strings.Contains(string(head), want) {
			t.Errorf("probes.hlog lacks %q (HistogramLogProcessor expects it)", want)
		}
	}

	disk := readStats(t, dir)
	if disk.Answered != st.Answered || disk.Latency.N != st.Answered || disk.Latency.P99Ns == 0 || disk.Latency.P999Ns == 0 {
		t.Errorf("stats.json %+v does not match the run %+v", disk.Latency, st.Latency)
	}

	// The ledger: every acknowledged probe once, as sent, with the index it was applied at.
	acked, err := rundir.ReadAcked(filepath.Join(dir, rundir.AckedFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(acked) != 3000 {
		t.Fatalf("%d orders in the ledger, want the 3000 acknowledged", len(acked))
	}
	seen := map[uint64]bool{}
	base := acked[0].ID &^ (1<<32 - 1)
	for _, a := range acked {
		i := a.ID - base
		if seen[a.ID] || i >= 3000 || a.Instrument != uint32(i%4) || a.Side != wire.Buy || a.Price != loadspec.DefaultProbePrice || a.Qty != 1 {
			t.Fatalf("ledger record %+v: want each probe once, as sent (id base %#x)", a, base)
		}
		seen[a.ID] = true
		if a.Index == 0 || a.AckNs < st.Start.UnixNano() || a.AckNs > st.End.UnixNano()+int64(5*time.Second) {
			t.Fatalf("ledger record %+v: want a log index and an answer time inside the run (%v–%v)", a, st.Start, st.End)
		}
	}
}

// A leader that stalls for 500 ms (a snapshot): probes due during the stall are charged from
// their INTENDED time, so each carries at least the rest of the stall.
func TestProbeStallIsChargedFromIntendedTime(t *testing.T) {
	c := startCluster(t, 1)
	dir := t.TempDir()
	const rate = 1000.0
	const stall = 500 * time.Millisecond
	// A leader timeout a fifth of the stall: the stalled leader still answers pings, so it is kept.
	run, err := StartProbe(t.Context(), ProbeOptions{Servers: c.Addrs(), Rate: rate, Duration: 1200 * time.Millisecond, Out: dir,
		Conn: ConnOptions{LeaderTimeout: stall / 5}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return run.Stats().Answered >= 300 })
	s0, s1 := c.Stall(stall)
	st := waitNoneLost(t, run, "a stall shorter than the grace period must cost none")
	ps := readSorted(t, filepath.Join(dir, rundir.ProbesFile))
	checkSchedule(t, ps, rate)
	const tolerance = int64(time.Millisecond) // wall clock vs the client's monotonic clock
	during := 0
	for _, p := range ps {
		if p.IntendedNs < s0.UnixNano() || p.IntendedNs >= s1.UnixNano() {
			continue
		}
		during++
		if remainder := s1.UnixNano() - p.IntendedNs; p.LatencyNs < remainder-tolerance {
			t.Fatalf("probe due %v into the stall has latency %v, less than the %v left of the stall: latency is not measured from the intended time",
				time.Duration(p.IntendedNs-s0.UnixNano()), time.Duration(p.LatencyNs), time.Duration(remainder))
		}
	}
	if during < 400 {
		t.Fatalf("only %d probes were due during the %v stall at %v/s", during, stall, rate)
	}
	if st.Latency.MaxNs < int64(stall)-tolerance {
		t.Errorf("max latency %v, want at least the stall %v", time.Duration(st.Latency.MaxNs), stall)
	}
	if st.Conn.ConnLosses != 0 || st.Conn.Reconnects != 0 || st.Conn.LeaderTimeouts != 0 {
		t.Errorf("a stall cost %d connection losses, %d reconnects, %d leader timeouts; pings must keep the session",
			st.Conn.ConnLosses, st.Conn.Reconnects, st.Conn.LeaderTimeouts)
	}
}

// The leader drops every connection mid-run: the client reconnects, resends what was in flight
// with the original intended times, and loses nothing.
func TestProbeReconnectResendsInFlight(t *testing.T) {
	c := startCluster(t, 1)
	c.SetDelay(30 * time.Millisecond) // ~30 probes in flight at any moment
	dir := t.TempDir()
	const rate = 1000.0
	run, err := StartProbe(t.Context(), ProbeOptions{Servers: c.Addrs(), Rate: rate, Duration: time.Second, Out: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return run.Stats().Answered >= 300 })
	c.DropConns(0)
	st, err := run.Wait()
	if err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, st)
	if st.Lost != 0 || st.Answered != 1000 {
		t.Fatalf("answered %d lost %d after a dropped connection, want 1000 and 0", st.Answered, st.Lost)
	}
	if st.Conn.ConnLosses != 1 || st.Conn.Reconnects != 1 {
		t.Errorf("connection losses %d, reconnects %d, want 1 and 1", st.Conn.ConnLosses, st.Conn.Reconnects)
	}
	if st.Conn.Resent < 1 {
		t.Errorf("resent %d: probes in flight on the dropped connection must be resent", st.Conn.Resent)
	}
	ps := readSorted(t, filepath.Join(dir, rundir.ProbesFile))
	if len(ps) != 1000 {
		t.Fatalf("%d records, want exactly 1000 (a resent probe is recorded once)", len(ps))
	}
	checkSchedule(t, ps, rate)
}

// Leadership moves mid-run through an election with no known leader, while the old leader's
// queue is stalled: queued commands fail with StatusError and are resent to the new leader;
// nothing is lost and the change is reported with its gap.
func TestProbeFollowsLeaderChange(t *testing.T) {
	c := startCluster(t, 3)
	dir := t.TempDir()
	run, err := StartProbe(t.Context(), ProbeOptions{Servers: c.Addrs(), Rate: 1000, Duration: 1200 * time.Millisecond, Out: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return run.Stats().Answered >= 300 })
	c.Stall(400 * time.Millisecond) // what the old leader queues now fails when it resumes: node 0 no longer leads
	time.Sleep(50 * time.Millisecond)
	c.SetLeader(-1)
	time.Sleep(150 * time.Millisecond)
	c.SetLeader(2)
	st := waitNoneLost(t, run, "a leader change must cost none")
	if len(st.Conn.LeaderChanges) != 1 {
		t.Fatalf("leader changes %+v, want one", st.Conn.LeaderChanges)
	}
	lc := st.Conn.LeaderChanges[0]
	if lc.From != c.Addrs()[0] || lc.To != c.Addrs()[2] {
		t.Errorf("leader change %s -> %s, want %s -> %s", lc.From, lc.To, c.Addrs()[0], c.Addrs()[2])
	}
	if lc.GapNs < int64(150*time.Millisecond) || lc.At.Before(st.Start) {
		t.Errorf("leader change gap %v at %v: the service gap spans at least the 150 ms election", time.Duration(lc.GapNs), lc.At)
	}
	if st.Conn.Errors < 1 || st.Conn.Redirects < 1 {
		t.Errorf("errors %d, redirects %d: the stalled queue should fail and the old leader redirect", st.Conn.Errors, st.Conn.Redirects)
	}
	// ~150 probes came due during the election; a server on probation gets one at a time, so
	// the client polls the followers instead of bouncing its backlog off each of them.
	if st.Conn.Redirects > 100 {
		t.Errorf("%d redirects during a 150 ms election at 1000/s: the backlog was bounced off followers", st.Conn.Redirects)
	}
	checkSchedule(t, readSorted(t, filepath.Join(dir, rundir.ProbesFile)), 1000)
}

// The only server dies for good: the run still ends after its grace period, and every probe
// due before the end is accounted for, the unanswered ones as lost.
func TestProbeServerGoneCountsLost(t *testing.T) {
	c := startCluster(t, 1)
	c.SetDelay(20 * time.Millisecond)
	dir := t.TempDir()
	run, err := StartProbe(t.Context(), ProbeOptions{Servers: c.Addrs(), Rate: 1000, Duration: time.Second, Grace: 300 * time.Millisecond, Out: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return run.Stats().Answered >= 200 })
	c.Kill(0)
	st, err := run.Wait()
	if err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, st)
	if st.Scheduled != 1000 {
		t.Errorf("scheduled %d, want 1000: probes due while the sender could not connect still count", st.Scheduled)
	}
	if st.Lost < 500 || st.Unsent < 1 || st.Unsent > st.Lost {
		t.Errorf("lost %d (unsent %d): most of the run had no server", st.Lost, st.Unsent)
	}
	if st.Conn.DialFailures < 1 {
		t.Errorf("dial failures %d, want some", st.Conn.DialFailures)
	}
	ps := readSorted(t, filepath.Join(dir, rundir.ProbesFile))
	if int64(len(ps)) != st.Scheduled {
		t.Fatalf("%d records, want one per scheduled probe (%d)", len(ps), st.Scheduled)
	}
	checkSchedule(t, ps, 1000)
	var lost int64
	for _, p := range ps {
		if p.Outcome == rundir.ProbeLost {
			lost++
		}
	}
	if lost != st.Lost {
		t.Errorf("%d lost records, stats say %d", lost, st.Lost)
	}
	hs := readHlog(t, filepath.Join(dir, rundir.ProbesHlogFile))
	var n int64
	for _, h := range hs {
		n += h.TotalCount()
	}
	if n != st.Answered || len(hs) != 1 {
		t.Errorf("hlog: %d intervals holding %d values, want 1 holding %d", len(hs), n, st.Answered)
	}
}

// Cancelling the context (SIGINT in `rig loadgen probe`) ends the schedule early; the run
// still waits for the answers and writes everything.
func TestProbeCancelEndsEarlyAndKeepsEverything(t *testing.T) {
	c := startCluster(t, 1)
	c.SetDelay(10 * time.Millisecond)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	run, err := StartProbe(ctx, ProbeOptions{Servers: c.Addrs(), Rate: 1000, Duration: time.Minute, Out: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return run.Stats().Answered >= 200 })
	cancel()
	st, err := run.Wait()
	if err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, st)
	if st.StopReason != "signal" || st.Lost != 0 || st.Scheduled < 200 || st.Scheduled > 30000 {
		t.Fatalf("stop %q scheduled %d lost %d: want an early, lossless end", st.StopReason, st.Scheduled, st.Lost)
	}
	if disk := readStats(t, dir); disk.Scheduled != st.Scheduled || disk.StopReason != "signal" {
		t.Errorf("stats.json scheduled %d (%q), run %d", disk.Scheduled, disk.StopReason, st.Scheduled)
	}
	if ps := readSorted(t, filepath.Join(dir, rundir.ProbesFile)); int64(len(ps)) != st.Scheduled {
		t.Errorf("%d records for %d probes", len(ps), st.Scheduled)
	}
}

func TestProbeNoLeaderFailsFast(t *testing.T) {
	c := startCluster(t, 2)
	c.SetLeader(-1)
	dir := t.TempDir()
	_, err := Probe(t.Context(), ProbeOptions{Servers: c.Addrs(), Rate: 100, Duration: time.Second, Out: dir, StartTimeout: 200 * time.Millisecond})
	if !errors.Is(err, ErrNoLeader) {
		t.Fatalf("err %v, want ErrNoLeader", err)
	}
	// Every output exists, empty, and says why.
	if st := readStats(t, dir); st.Scheduled != 0 || st.StopReason != "error" || !strings.Contains(st.Error, "no leader") {
		t.Errorf("stats.json: %+v", st)
	}
	if hs := readHlog(t, filepath.Join(dir, rundir.ProbesHlogFile)); len(hs) != 0 {
		t.Errorf("%d intervals without a probe", len(hs))
	}
	if ps := readSorted(t, filepath.Join(dir, rundir.ProbesFile)); len(ps) != 0 {
		t.Errorf("%d probe records without a probe", len(ps))
	}
}

func TestProbeOptionsRejected(t *testing.T) {
	for _, o := range []ProbeOptions{
		{Rate: 10, Out: "x"},
		{Servers: []string{"a:1"}, Rate: 0, Out: "x"},
		{Servers: []string{"a:1"}, Rate: 10},
		{Servers: []string{"a:1"}, Rate: 10, Out: "x", Interval: 1500 * time.Microsecond},
		{Servers: []string{"a:1"}, Rate: 1e9, Duration: time.Hour, Out: "x"},
		{Servers: []string{"a:1"}, Rate: 10, Out: "x", Spin: loadspec.MaxSpin + 1},
		{Servers: []string{"a:1"}, Rate: 10, Out: "x", Spin: -1},
	} {
		if _, err := StartProbe(t.Context(), o); !errors.Is(err, ErrBadOptions) {
			t.Errorf("%+v: err %v, want ErrBadOptions", o, err)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A slow stream leaves the connection idle between probes: pings keep it alive, and answered
// pings do not count as traffic problems.
func TestProbeKeepalivePingsIdleConnection(t *testing.T) {
	c := startCluster(t, 1)
	st, err := Probe(t.Context(), ProbeOptions{
		Servers: c.Addrs(), Rate: 4, Duration: 600 * time.Millisecond, Out: t.TempDir(),
		Conn: ConnOptions{KeepAlive: 40 * time.Millisecond, DeadAfter: time.Second}, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, st)
	if p := c.Stats().Pings; p < 3 {
		t.Errorf("%d pings in 600 ms with 250 ms between probes and a 40 ms keepalive, want several", p)
	}
	if st.Conn.PingTimeouts != 0 || st.Lost != 0 {
		t.Errorf("ping timeouts %d, lost %d on a healthy idle connection", st.Conn.PingTimeouts, st.Lost)
	}
}

// The leader hangs with its sockets open (as a SIGSTOPped process does) and another node takes
// over: only an unanswered ping tells the client, which then finds the new leader and resends.
func TestProbeHungLeaderDetectedByPing(t *testing.T) {
	c := startCluster(t, 2)
	dir := t.TempDir()
	run, err := StartProbe(t.Context(), ProbeOptions{
		Servers: c.Addrs(), Rate: 500, Duration: time.Second, Out: dir,
		Conn: ConnOptions{KeepAlive: 20 * time.Millisecond, DeadAfter: 150 * time.Millisecond}, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return run.Stats().Answered >= 100 })
	c.Freeze(0)
	c.SetLeader(1)
	st := waitNoneLost(t, run, "a hung leader must be dropped and its probes resent")
	if st.Conn.PingTimeouts < 1 || len(st.Conn.LeaderChanges) != 1 {
		t.Errorf("ping timeouts %d, leader changes %v: want the hang detected and one change", st.Conn.PingTimeouts, st.Conn.LeaderChanges)
	}
	if st.Latency.MaxNs < int64(150*time.Millisecond) {
		t.Errorf("max latency %v: probes stuck on the hung leader waited at least DeadAfter", time.Duration(st.Latency.MaxNs))
	}
	checkSchedule(t, readSorted(t, filepath.Join(dir, rundir.ProbesFile)), 500)
}

// The leader falls silent with its sockets open (a partition that holds what is sent, a hung
// process), and its followers go on naming it for a while, as raft followers do until their
// heartbeat timeout: with a ping timeout far beyond the run, only the leader timeout gets the
// client off it. It leaves, is sent back by the followers' redirects, leaves again, and once
// another node leads follows it there; the probes in flight on the silent connections are resent
// and answered, none lost.
func TestProbeSilentLeaderLeftOnLeaderTimeout(t *testing.T) {
	c := startCluster(t, 3)
	dir := t.TempDir()
	const lt = 100 * time.Millisecond
	run, err := StartProbe(t.Context(), ProbeOptions{
		Servers: c.Addrs(), Rate: 500, Duration: 1500 * time.Millisecond, Out: dir, Grace: 2 * time.Second,
		Conn: ConnOptions{DeadAfter: time.Minute, LeaderTimeout: lt}, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return run.Stats().Answered >= 100 })
	c.Freeze(0)
	time.Sleep(3 * lt) // the followers still name node 0
	c.SetLeader(2)
	st := waitNoneLost(t, run, "the silent leader must be left and its probes resent")
	if st.Conn.LeaderTimeouts < 1 || st.Conn.PingTimeouts != 0 || st.Conn.LeaderTimeoutNs != int64(lt) {
		t.Errorf("leader timeouts %d (bound %v), ping timeouts %d: want the silence caught by the leader timeout",
			st.Conn.LeaderTimeouts, time.Duration(st.Conn.LeaderTimeoutNs), st.Conn.PingTimeouts)
	}
	if lc := st.Conn.LeaderChanges; len(lc) != 1 || lc[0].To != c.Addrs()[2] {
		t.Errorf("leader changes %+v: want one, to node 2", lc)
	}
	checkSchedule(t, readSorted(t, filepath.Join(dir, rundir.ProbesFile)), 500)
}

// Without a redirect, a server left on a leader timeout is tried last until a leader timeout has
// passed; a redirect to it is followed (its followers know whether it still leads).
func TestNextTargetAvoidsServerLeftOnTimeout(t *testing.T) {
	cl := &client{servers: []string{"a", "b", "c"}, avoid: map[string]int64{}, epoch: time.Now()}
	cl.avoid["b"] = cl.now() + int64(time.Hour)
	var got []string
	for range 4 {
		a, _ := cl.nextTargetLocked(cl.now())
		got = append(got, a)
	}
	if want := []string{"a", "c", "a", "c"}; !slices.Equal(got, want) {
		t.Errorf("targets %v, want %v", got, want)
	}
	cl.hint = "b"
	if a, _ := cl.nextTargetLocked(cl.now()); a != "b" {
		t.Errorf("a redirect to the avoided server went to %s", a)
	}
	cl.avoid["a"], cl.avoid["c"] = cl.avoid["b"], cl.avoid["b"]
	if a, _ := cl.nextTargetLocked(cl.now()); a == "" {
		t.Error("every server avoided: none tried")
	}
	cl.avoid = map[string]int64{}
	cl.next = 0
	if a, _ := cl.nextTargetLocked(cl.now()); a != "a" {
		t.Errorf("nothing avoided: tried %s first, want a", a)
	}
}

// Started is closed when the schedule starts, with Stats().Start set, and the start line
// carries that start to the controller exactly; a run that cannot start never closes it.
func TestProbeStartedAndStartLine(t *testing.T) {
	c := startCluster(t, 1)
	run, err := StartProbe(t.Context(), ProbeOptions{Servers: c.Addrs(), Rate: 100, Duration: 300 * time.Millisecond, Out: t.TempDir(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-run.Started():
	case <-run.Done():
		t.Fatal("done before it started")
	}
	start := run.Stats().Start
	if start.IsZero() {
		t.Fatal("started without a start")
	}
	if got, ok := loadspec.ParseStartLine(loadspec.StartLine(start) + "\n"); !ok || !got.Equal(start) {
		t.Errorf("start line %q parsed as %v %v, want %v", loadspec.StartLine(start), got, ok, start)
	}
	if _, ok := loadspec.ParseStartLine("probes: 10 scheduled"); ok {
		t.Error("another line parsed as a start")
	}
	run.Wait()

	nl := startCluster(t, 2)
	nl.SetLeader(-1)
	run, err = StartProbe(t.Context(), ProbeOptions{Servers: nl.Addrs(), Rate: 100, Duration: time.Second, Out: t.TempDir(), StartTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run.Wait()
	select {
	case <-run.Started():
		t.Error("a run without a leader says it started")
	default:
	}
}

// The sender's own lateness is kept, a server's is not: a sender held up 40 ms (the stream's lock
// held, as a descheduled sender thread would be) writes a late send over the hold, to when it
// handed the probes over, while a stalled server, whose probes went out on time, adds none; the
// file is there, empty or not. (Which write carries the probes due meanwhile depends on where
// the sender was held: after its write, the next one carries them from their due time; before
// it, that write carries the hold and the next is not late after it.)
func TestProbeLateSendsRecorded(t *testing.T) {
	c := startCluster(t, 1)
	dir := t.TempDir()
	run, err := StartProbe(t.Context(), ProbeOptions{Servers: c.Addrs(), Rate: 1000, Duration: 1500 * time.Millisecond, Out: dir,
		Conn: ConnOptions{LeaderTimeout: time.Second}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return run.Stats().Answered >= 200 })
	const hold = 40 * time.Millisecond
	h0 := time.Now()
	run.s.mu.Lock()
	time.Sleep(hold)
	h1 := time.Now()
	run.s.mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	s0, s1 := c.Stall(200 * time.Millisecond)
	waitNoneLost(t, run, "a stall shorter than the grace period must cost none")
	ls := readLateSends(t, filepath.Join(dir, rundir.LateSendsFile))
	var held *rundir.LateSend
	for i, l := range ls {
		if l.From() < l.DueNs || l.WokeNs <= l.From() || l.SentNs < l.WokeNs || l.Probes < 1 {
			t.Errorf("late send %+v: want due ≤ from < woke ≤ sent and a probe", l)
		}
		lag := time.Duration(l.WokeNs - l.From())
		if l.From() < h1.UnixNano() && l.WokeNs > h0.UnixNano() && lag >= hold/2 {
			held = &ls[i]
		}
		if l.WokeNs > s0.UnixNano() && l.From() < s1.UnixNano() && lag >= 20*time.Millisecond {
			t.Errorf("late send %+v (%v) inside the server's stall [%v, %v]: the probes went out on time", l, lag, s0, s1)
		}
	}
	if held == nil {
		t.Fatalf("late sends %+v: none over the sender's %v hold from %v", ls, hold, h0)
	}
	if got := time.Duration(held.WokeNs - held.From()); got < hold*3/4 || held.WokeNs < h1.UnixNano()-int64(time.Millisecond) {
		t.Errorf("the hold's late send %+v: %v late, handed over at %v; want about %v, after the hold ended at %v",
			held, got, time.Unix(0, held.WokeNs), hold, h1)
	}
}

func readLateSends(t *testing.T, path string) []rundir.LateSend {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []rundir.LateSend
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var l rundir.LateSend
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
		out = append(out, l)
	}
	return out
}

// A write that waits is a server not reading, not the sender's lateness: while the connection's
// writer is held 40 ms (as a full socket buffer holds it), the probes that come due go out late
// in the next write, but no late send covers the time the sender sat in the previous one; a
// hold of the sender itself afterwards still writes one, and the file has it while the run is
// still going (a killed run keeps what was flushed).
func TestProbeLateSendsLeaveOutBlockedWrite(t *testing.T) {
	c := startCluster(t, 1)
	dir := t.TempDir()
	run, err := StartProbe(t.Context(), ProbeOptions{Servers: c.Addrs(), Rate: 1000, Out: dir,
		Conn: ConnOptions{LeaderTimeout: time.Second}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Wait()
	defer run.Stop()
	waitFor(t, func() bool { return run.Stats().Answered >= 200 })
	run.s.cl.mu.Lock()
	cn := run.s.cl.cur
	run.s.cl.mu.Unlock()
	const hold = 40 * time.Millisecond
	b0 := time.Now()
	cn.wmu.Lock()
	time.Sleep(hold)
	b1 := time.Now()
	cn.wmu.Unlock()
	time.Sleep(100 * time.Millisecond)
	h0 := time.Now()
	run.s.mu.Lock()
	time.Sleep(hold)
	h1 := time.Now()
	run.s.mu.Unlock()

	overlap := func(l rundir.LateSend, from, to time.Time) time.Duration {
		return time.Duration(min(l.WokeNs, to.UnixNano()) - max(l.From(), from.UnixNano()))
	}
	var ls []rundir.LateSend
	waitFor(t, func() bool { // flushed within about a second, the run going on
		ls = readLateSendsSoFar(t, filepath.Join(dir, rundir.LateSendsFile))
		return slices.ContainsFunc(ls, func(l rundir.LateSend) bool { return overlap(l, h0, h1) >= hold/2 })
	})
	select {
	case <-run.Done():
		t.Fatal("the run ended before its late sends were read")
	default:
	}
	run.Stop()
	waitNoneLost(t, run, "a held writer must cost none")
	for _, l := range readLateSends(t, filepath.Join(dir, rundir.LateSendsFile)) {
		if l.From() < l.DueNs || l.WokeNs <= l.From() || l.SentNs < l.WokeNs || l.Probes < 1 {
			t.Errorf("late send %+v: want due ≤ from < woke ≤ sent and a probe", l)
		}
		if o := overlap(l, b0, b1); o >= hold/2 {
			t.Errorf("late send %+v covers %v of the %v the sender sat in a held write [%v, %v]: that wait is the server's",
				l, o, hold, b0, b1)
		}
	}
}

// readLateSendsSoFar reads a late sends file still being written: a line not yet whole is left out.
func readLateSendsSoFar(t *testing.T, path string) []rundir.LateSend {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []rundir.LateSend
	for _, line := range strings.Split(string(b), "\n") {
		var l rundir.LateSend
		if json.Unmarshal([]byte(line), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}
