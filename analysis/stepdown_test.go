package analysis

import (
	"testing"
	"time"

	"github.com/rig-dev/rig/rundir"
)

// A step-down at +5 s: node-1 reports leadership 50 ms later; probes sent in those 50 ms wait
// 60 ms, one probe at 8 s (outside the window) waits 500 ms and must not count.
func TestStepDownRows(t *testing.T) {
	f := newFixture(t)
	f.role(-1000, "node-0", "leader")
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.action(5000, "step_down", "node-0", nil)
	f.role(5050, "node-1", "leader")
	f.action(9000, "step_down", "node-1", nil) // no new leader before the load ends
	f.run(10000, "load_end")
	var ps []rundir.Probe
	for ms := int64(0); ms < 10000; ms += 10 {
		lat := time.Millisecond
		switch {
		case ms >= 5000 && ms < 5050:
			lat = 60 * time.Millisecond
		case ms == 8000:
			lat = 500 * time.Millisecond
		}
		ps = append(ps, rundir.Probe{IntendedNs: at(ms).UnixNano(), LatencyNs: int64(lat)})
	}
	f.probes(ps)
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.StepDowns) != 2 {
		t.Fatalf("step-downs %+v", s.StepDowns)
	}
	r := s.StepDowns[0]
	if r.From != "node-0" || r.To != "node-1" || r.NewLeaderMs == nil || *r.NewLeaderMs != 50 {
		t.Errorf("row 1 %+v: want node-0 -> node-1 after 50 ms", r)
	}
	if r.ClientGapMs == nil || *r.ClientGapMs != 60 || r.WindowFromS != 4 || r.WindowToS != 6.05 {
		t.Errorf("row 1 gap %v in [%v, %v], want 60 ms in [4, 6.05]", r.ClientGapMs, r.WindowFromS, r.WindowToS)
	}
	// The window is [4 s, 6.05 s]: probes every 10 ms, both ends included.
	if r.WindowProbes != 206 || r.WindowLost != 0 {
		t.Errorf("row 1 window has %d probes (%d lost), want 206 and 0", r.WindowProbes, r.WindowLost)
	}
	r = s.StepDowns[1]
	if r.To != "" || r.NewLeaderMs != nil {
		t.Errorf("row 2 %+v: no new leader was reported", r)
	}
	if r.ClientGapMs == nil || *r.ClientGapMs != 500 {
		t.Errorf("row 2 gap %v: its window [8 s, end of load] holds the 500 ms probe", r.ClientGapMs)
	}
}
