package analysis

import (
	"strings"
	"testing"

	"github.com/rig-dev/rig/rundir"
)

// The load generator's per-second dial timeline and its holds are split by the faults' windows:
// a kill's window holds the seconds from the kill's to the next fault's, and the holds that
// began in it.
func TestClientConnPerFault(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(100, "warmup_end")
	f.action(2500, "kill", "node-0", map[string]any{"signal": "KILL"})
	f.action(6000, "step_down", "node-1", nil)
	f.run(9000, "load_end")
	var ps []rundir.Probe
	for ms := int64(0); ms < 9000; ms += 50 {
		ps = append(ps, rundir.Probe{IntendedNs: at(ms).UnixNano(), LatencyNs: 2_000_000, Outcome: rundir.ProbeOK})
	}
	f.probes(ps)
	sec := func(s int64, dials, fails, rec, res int64) rundir.ConnSecond {
		return rundir.ConnSecond{At: at(s * 1000), Dials: dials, DialFailures: fails, Reconnects: rec, Resent: res}
	}
	st := rundir.ProbeStats{Scheduled: 1000,
		SendLag: rundir.SendLag{Late: 320, Held: 300, LateConnected: 7},
		Conn: rundir.ConnStats{
			Timeline: []rundir.ConnSecond{sec(0, 1, 0, 0, 0), sec(2, 10, 6, 4, 5), sec(3, 10, 5, 5, 2), sec(6, 1, 0, 1, 20)},
			Holds: []rundir.Hold{
				{From: at(2500), To: at(4000), Messages: 290, MaxLagNs: 1_500_000_000},
				{From: at(6100), To: at(6300), Messages: 10},
			},
		}}
	f.writeJSON("manifest.json", map[string]any{"status": "ok", "loadgen": st})
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	c := s.ClientConn
	if c == nil || c.Dials != 22 || c.DialFailures != 11 || c.Reconnects != 10 || c.Resent != 27 || c.LateConnectedPct != 1 {
		t.Fatalf("client conn %+v, want 22 dials, 11 failed, 10 reconnects, 27 resends, 7 late of 700 outside holds = 1 %%", c)
	}
	if len(c.Faults) != 2 {
		t.Fatalf("faults %+v, want the kill and the step-down", c.Faults)
	}
	k, sd := c.Faults[0], c.Faults[1]
	if k.Action != "kill" || k.AtS != 2.5 || k.ToS != 6 || k.Dials != 20 || k.DialFailures != 11 || k.Reconnects != 9 || k.Held != 290 || k.LongestHoldS != 1.5 {
		t.Errorf("kill window %+v, want [2.5, 6): seconds 2 and 3, the 1.5 s hold of 290", k)
	}
	if sd.Action != "step_down" || sd.Dials != 1 || sd.Resent != 20 || sd.Held != 10 {
		t.Errorf("step-down window %+v, want second 6 and the hold of 10", sd)
	}
	if rep := renderReport(s); !strings.Contains(rep, "## Load generator through faults") || !strings.Contains(rep, "| kill node-0 | 2.5 s – 6.0 s | 20 | 11 | 9 | 7 | 290 | 1.500 s |") {
		t.Errorf("report:\n%s", rep)
	}
}

// The sender's late sends outside its holds are counted by the second they were due; the share
// that counts against the load generator is the one due clear of every fault window (a kill
// until its drain ends here), per post-warm-up probe due in those seconds.
func TestLateOutsideFaults(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(100, "warmup_end")
	f.action(2500, "kill", "node-2", map[string]any{"signal": "KILL"})
	f.run(9000, "load_end")
	var ps []rundir.Probe
	for ms := int64(0); ms < 9000; ms += 50 {
		ps = append(ps, rundir.Probe{IntendedNs: at(ms).UnixNano(), LatencyNs: 2_000_000, Outcome: rundir.ProbeOK})
	}
	f.probes(ps)
	late := func(s, n int64) rundir.ConnSecond { return rundir.ConnSecond{At: at(s * 1000), LateConnected: n} }
	st := rundir.ProbeStats{Scheduled: 180, SendLag: rundir.SendLag{Late: 10, LateConnected: 10},
		Conn: rundir.ConnStats{Timeline: []rundir.ConnSecond{{At: at(0), Dials: 1}, late(1, 3), late(2, 4), late(5, 2), late(7, 1)}}}
	f.writeJSON("manifest.json", map[string]any{"status": "ok", "loadgen": st})
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	c := s.ClientConn
	// The kill's window is [1.5 s, 2.5 s]: seconds 1 and 2 touch it, second 0 holds warm-up;
	// seconds 3–8 are clear, 20 probes each, 3 of them late.
	if c == nil || c.LateOutsideFaults == nil || *c.LateOutsideFaults != 3 || *c.LateOutsideFaultsPct != 2.5 {
		t.Fatalf("client conn %+v, want 3 late of 120 due clear of the kill: 2.5 %%", c)
	}
	if c.Faults[0].LateConnected != 7 {
		t.Errorf("kill window late %d, want 7 (seconds 2 and after: 4 + 2 + 1)", c.Faults[0].LateConnected)
	}
	if rep := renderReport(s); !strings.Contains(rep, "Outside every fault window (Probes overall lists them): 3 probes sent late outside a hold, 2.50 % of the post-warm-up probes due there.") {
		t.Errorf("report:\n%s", rep)
	}
}
