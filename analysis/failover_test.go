package analysis

import (
	"reflect"
	"testing"
	"time"

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
	if el, ok := s.FailoverPooled.Get("elect"); !ok || el.N != 2 || el.Mean != (11100+200)/2.0 || el.CILo == nil {
		t.Errorf("pooled %+v", s.FailoverPooled)
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
