package analysis

import (
	"reflect"
	"testing"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/rundir"
)

// A leader kill at 15 s that takes a stock failover's ~11 s (node-2 stands after 10 s, node-1
// wins 1.1 s later), then a 200 ms step-down hand-off at 32 s followed 300 ms later by an
// unprovoked election: the kill's failover is planned and measured stretch by stretch; the
// change after the hand-off is flagged.
func TestFailoverRows(t *testing.T) {
	f := newFixture(t)
	f.role(-1000, "node-0", "leader")
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.action(15000, "kill", "node-0", nil)
	f.role(25000, "node-2", "candidate")
	f.role(26100, "node-1", "leader")
	f.action(32000, "step_down", "node-1", nil)
	f.role(32100, "node-0", "candidate")
	f.role(32200, "node-0", "leader")
	f.role(32500, "node-2", "leader")
	f.run(40000, "load_end")
	var ps []rundir.Probe
	for ms := int64(0); ms < 40000; ms += 10 {
		lat := time.Millisecond
		switch {
		case ms >= 15000 && ms < 26200: // waiting for a leader: answered at 26.2 s
			lat = time.Duration(26200-ms+1) * time.Millisecond
		case ms >= 26200 && ms < 28100: // the queue draining
			lat = 5 * time.Millisecond
		}
		ps = append(ps, rundir.Probe{IntendedNs: at(ms).UnixNano(), LatencyNs: int64(lat)})
	}
	f.probes(ps)
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	if want := []LeaderMark{{32.5, "node-2"}}; !reflect.DeepEqual(s.UnplannedLeaderChanges, want) {
		t.Errorf("unplanned %v, want %v: the 11 s failover is the kill's, the change 300 ms after the hand-off is nobody's", s.UnplannedLeaderChanges, want)
	}
	if len(s.Failovers) != 2 {
		t.Fatalf("failovers %+v, want 2", s.Failovers)
	}
	r := s.Failovers[0]
	eq := func(name string, got *float64, want float64) {
		t.Helper()
		if got == nil || *got != want {
			t.Errorf("kill: %s %v, want %v", name, ptrStr(got), want)
		}
	}
	if r.Action != "kill" || r.From != "node-0" || r.To != "node-1" || r.Candidate != "node-2" {
		t.Errorf("kill row %+v", r)
	}
	eq("detect", r.DetectMs, 10000)
	eq("elect", r.ElectMs, 11100)
	// Last reply before the new leader: the probe sent at 14.99 s, back at 14.991 s; first after
	// it: 26.201 s.
	eq("client gap", r.ClientGapMs, 11210)
	// Seconds from the first reply (26.201 s): two hold 5 ms probes, above 1.5 × the 1 ms level;
	// [28.201, 29.201) is back to normal.
	eq("back to normal", r.NormalMs, 14201)
	if r.BaselineP99Us == nil || *r.BaselineP99Us != 1000 || r.Lost != 0 {
		t.Errorf("kill: baseline %v lost %d, want 1000 µs and 0", ptrStr(r.BaselineP99Us), r.Lost)
	}
	r = s.Failovers[1]
	if r.Action != "step_down" || r.To != "node-0" || r.ElectMs == nil || *r.ElectMs != 200 || r.DetectMs == nil || *r.DetectMs != 100 {
		t.Errorf("step-down row %+v: want node-0 detected at 100 ms, leader at 200 ms", r)
	}
	if el, ok := s.RowPooled[string(actions.ShapeFailover)].Get("elect"); !ok || el.N != 2 || el.Mean != (11100+200)/2.0 || el.CILo != nil {
		// Two values give no interval: Student's t at one degree of freedom reached below zero.
		t.Errorf("pooled %+v", s.RowPooled[string(actions.ShapeFailover)])
	}
}

func ptrStr(p *float64) any {
	if p == nil {
		return "none"
	}
	return *p
}

// The new leader answers a little before its role event is recorded (the engine reports the
// transition after it starts serving): the client gap is still the whole silence from the
// kill to the first answer, not the few ms between an answer and the event.
func TestFailoverGapWhenAnswersBeatTheRoleEvent(t *testing.T) {
	f := newFixture(t)
	f.role(-1000, "node-0", "leader")
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.action(15000, "kill", "node-0", nil)
	f.role(15500, "node-2", "candidate")
	f.role(16020, "node-2", "leader") // recorded 20 ms after it began answering
	f.run(20000, "load_end")
	var ps []rundir.Probe
	for ms := int64(0); ms < 20000; ms += 10 {
		lat := time.Millisecond
		if ms >= 15000 && ms < 16000 { // unanswered until the new leader serves at 16.0 s
			lat = time.Duration(16000-ms+1) * time.Millisecond
		}
		ps = append(ps, rundir.Probe{IntendedNs: at(ms).UnixNano(), LatencyNs: int64(lat)})
	}
	f.probes(ps)
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Failovers) != 1 {
		t.Fatalf("failovers %+v, want 1", s.Failovers)
	}
	// Last answer before the kill: sent at 14.99 s, back at 14.991 s; the silence ends at
	// 16.001 s, when the probes held through the election are answered.
	if g := s.Failovers[0].ClientGapMs; g == nil || *g != 1010 {
		t.Errorf("client gap %v, want 1010 ms", ptrStr(g))
	}
}

// outageProbes are probes every 10 ms over [0, endMs): 1 ms answers, except that those sent in
// [fromMs, answeredMs) wait until answeredMs, when the new leader serves them.
func outageProbes(endMs, fromMs, answeredMs int64) []rundir.Probe {
	var ps []rundir.Probe
	for ms := int64(0); ms < endMs; ms += 10 {
		lat := time.Millisecond
		if ms >= fromMs && ms < answeredMs {
			lat = time.Duration(answeredMs-ms+1) * time.Millisecond
		}
		ps = append(ps, rundir.Probe{IntendedNs: at(ms).UnixNano(), LatencyNs: int64(lat)})
	}
	return ps
}

// Every order of events a leader kill can take gives a complete row: detection, election, client
// gap and back to normal. Each case is the event sequence a run stores (events.jsonl, as the
// runner writes it from the agents' transitions: the killed leader's exit as phase down, its
// relaunch as phase starting, its first status's role from nothing).
func TestFailoverEveryOrderOfEvents(t *testing.T) {
	type want struct {
		to, candidate, detectedBy string
		detect, elect             float64
	}
	for _, tc := range []struct {
		name   string
		events func(f *fixture)
		answer int64 // ms: the new leader answers the probes held since the kill
		want   want
	}{{
		// The run: heartbeat 10 s, the killed leader relaunched at once stands 6.75 s
		// after the kill and wins at 7.9 s, before either follower timed out.
		name: "old leader relaunched wins before the followers time out",
		events: func(f *fixture) {
			f.phase(15001, "node-0", "down")
			f.phase(15040, "node-0", "starting")
			f.role(17000, "node-0", "follower")
			f.role(21750, "node-0", "candidate")
			f.role(22900, "node-0", "leader")
		},
		answer: 23000,
		want:   want{to: "node-0", candidate: "node-0", detectedBy: DetectedByCandidate, detect: 6750, elect: 7900},
	}, {
		name: "old leader relaunched goes straight to leader",
		events: func(f *fixture) {
			f.phase(15001, "node-0", "down")
			f.phase(15040, "node-0", "starting")
			f.role(17000, "node-0", "follower")
			f.role(22900, "node-0", "leader")
		},
		answer: 23000,
		want:   want{to: "node-0", detectedBy: DetectedByLeader, detect: 7900, elect: 7900},
	}, {
		// The candidate state fell between two polls of the winner: it is seen going from
		// follower to leader, and no node is ever seen standing.
		name: "candidate shorter than a poll",
		events: func(f *fixture) {
			f.phase(15001, "node-0", "down")
			f.role(25300, "node-1", "leader")
		},
		answer: 25400,
		want:   want{to: "node-1", detectedBy: DetectedByLeader, detect: 10300, elect: 10300},
	}, {
		// One follower is seen standing (and loses); the other goes straight to leader.
		name: "follower straight to leader while another stood",
		events: func(f *fixture) {
			f.phase(15001, "node-0", "down")
			f.role(25000, "node-2", "candidate")
			f.role(25300, "node-1", "leader")
			f.role(25310, "node-2", "follower")
		},
		answer: 25400,
		want:   want{to: "node-1", candidate: "node-2", detectedBy: DetectedByCandidate, detect: 10000, elect: 10300},
	}, {
		// A follower wins first; the relaunched old leader coming back as a follower changes
		// nothing.
		name: "follower wins, old leader rejoins as follower",
		events: func(f *fixture) {
			f.phase(15001, "node-0", "down")
			f.phase(15040, "node-0", "starting")
			f.role(17000, "node-0", "follower")
			f.role(25000, "node-1", "candidate")
			f.role(25200, "node-1", "leader")
		},
		answer: 25300,
		want:   want{to: "node-1", candidate: "node-1", detectedBy: DetectedByCandidate, detect: 10000, elect: 10200},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.role(-1000, "node-0", "leader")
			f.run(0, "load_start")
			f.run(1000, "warmup_end")
			f.action(15000, "kill", "node-0", map[string]any{"signal": "KILL"})
			tc.events(f)
			f.run(40000, "load_end")
			f.probes(outageProbes(40000, 15000, tc.answer))
			s, err := Analyze(f.close())
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Failovers) != 1 {
				t.Fatalf("failovers %+v, want 1", s.Failovers)
			}
			r := s.Failovers[0]
			if r.To != tc.want.to || r.Candidate != tc.want.candidate || r.DetectedBy != tc.want.detectedBy {
				t.Errorf("to %q candidate %q detected by %q, want %q %q %q", r.To, r.Candidate, r.DetectedBy, tc.want.to, tc.want.candidate, tc.want.detectedBy)
			}
			if r.DetectMs == nil || *r.DetectMs != tc.want.detect || r.ElectMs == nil || *r.ElectMs != tc.want.elect {
				t.Errorf("detect %v elect %v, want %v and %v", ptrStr(r.DetectMs), ptrStr(r.ElectMs), tc.want.detect, tc.want.elect)
			}
			// The silence: from the last answer before the kill (sent 14.99 s, back 14.991 s) to
			// the first the new leader gives (answer + 1 ms).
			if g, wantGap := r.ClientGapMs, float64(tc.answer+1-14991); g == nil || *g != wantGap {
				t.Errorf("client gap %v, want %v", ptrStr(g), wantGap)
			}
			if r.NormalMs == nil {
				t.Errorf("no back to normal: the row is incomplete")
			}
		})
	}
}

// Normal latency leaves out every fault window, not only snapshots: a leader kill from 1 s
// before it until back to normal, and a partition until its heal (each with its drain); the
// summary lists what it left out.
func TestNormalLeavesOutFaultWindows(t *testing.T) {
	f := newFixture(t)
	f.role(-1000, "node-0", "leader")
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.action(15000, "kill", "node-0", map[string]any{"signal": "KILL"})
	f.phase(15001, "node-0", "down")
	f.role(16000, "node-1", "candidate")
	f.role(16200, "node-1", "leader")
	f.action(30000, "partition", "node-2", map[string]any{})
	f.action(33000, "heal", "node-2", map[string]any{})
	f.run(40000, "load_end")
	var ps []rundir.Probe
	for ms := int64(0); ms < 40000; ms += 10 {
		lat := time.Millisecond
		switch {
		case ms >= 15000 && ms < 16300: // held until the new leader answers at 16.3 s
			lat = time.Duration(16300-ms+1) * time.Millisecond
		case ms >= 16300 && ms < 17500: // the queue draining
			lat = 20 * time.Millisecond
		case ms >= 30000 && ms < 33000: // a follower cut off: commits wait on the other one
			lat = 3 * time.Millisecond
		}
		ps = append(ps, rundir.Probe{IntendedNs: at(ms).UnixNano(), LatencyNs: int64(lat)})
	}
	f.probes(ps)
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Failovers) != 1 || s.Failovers[0].NormalMs == nil {
		t.Fatalf("failovers %+v, want one with back to normal", s.Failovers)
	}
	// Back to normal: the first whole second from the first reply (16.301 s) whose p99 is within
	// 1.5 × 1 ms is [18.301, 19.301), the drain's 20 ms probes running to 17.5 s: 4301 ms.
	if got := *s.Failovers[0].NormalMs; got != 4301 {
		t.Errorf("back to normal %v ms, want 4301", got)
	}
	// The kill (never relaunched) until its drain ends, the failover until back to normal, the
	// partition until its heal.
	want := []FaultWindow{{"kill", "node-0", 14, 17.5}, {"failover", "node-0", 14, 19.301}, {"partition", "node-2", 29, 33}}
	if !reflect.DeepEqual(s.NormalLeftOut, want) {
		t.Errorf("left out %+v, want %+v", s.NormalLeftOut, want)
	}
	if s.Normal.MaxUs == nil || *s.Normal.MaxUs != 1000 || s.Normal.Lost != 0 {
		t.Errorf("normal %+v: every probe outside the faults was answered in 1 ms", s.Normal)
	}
	// [1, 14) and (19.301, 29) and (33, 40): 1300 + 969 + 699 probes.
	if s.Normal.N != 1300+969+699 {
		t.Errorf("normal n %d, want %d", s.Normal.N, 1300+969+699)
	}
	if s.Probes.MaxUs == nil || *s.Probes.MaxUs <= 1000 {
		t.Errorf("all probes %+v: the outage should show there", s.Probes)
	}
}
