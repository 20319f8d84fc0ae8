package analysis

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// election writes an engine election state change as the runner does (rundir.KindElection).
func (f *fixture) election(ms int64, node, from, to string) {
	f.add(ms, map[string]any{"kind": "election", "node": node, "from": from, "election_state": to})
}

// handOffRun is an Aeron-shaped run: the leader node-0 is sent TERM at 5 s, its followers enter
// the election on its end-of-stream (node-1 CANVASS at +128 ms) and node-1 leads at +321 ms; the
// load generator's record says its last reply from node-0 came at +10 ms and its first from
// node-1 at +350 ms. At 8 s node-1 steps down the way rig's own engine does (roles only) and the
// load generator has no record of it: the gap falls back to the probes, silent over
// [7.991 s, 8.021 s].
func handOffRun(t *testing.T) string {
	f := newFixture(t)
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		f.phase(-2000, n, engine.PhaseStarting)
		f.election(-1500, n, "", "CLOSED")
	}
	f.role(-1000, "node-0", engine.RoleLeader)
	f.role(-1000, "node-1", engine.RoleFollower)
	f.role(-1000, "node-2", engine.RoleFollower)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.action(5000, "kill", "node-0", map[string]any{"signal": "TERM", "as": "leader"})
	f.phase(5030, "node-0", rundir.PhaseDown)
	f.election(5128, "node-1", "CLOSED", "CANVASS")
	f.role(5128, "node-1", engine.RoleCandidate)
	f.election(5131, "node-2", "CLOSED", "CANVASS")
	f.role(5131, "node-2", engine.RoleCandidate)
	f.election(5200, "node-1", "CANVASS", "NOMINATE")
	f.election(5250, "node-1", "NOMINATE", "CANDIDATE_BALLOT")
	f.election(5260, "node-2", "CANVASS", "FOLLOWER_BALLOT")
	f.role(5260, "node-2", engine.RoleFollower)
	f.election(5300, "node-1", "CANDIDATE_BALLOT", "LEADER_LOG_REPLICATION")
	f.role(5321, "node-1", engine.RoleLeader)
	f.election(5400, "node-1", "LEADER_LOG_REPLICATION", "CLOSED")
	f.election(5410, "node-2", "FOLLOWER_BALLOT", "CLOSED")

	f.action(8000, "step_down", "node-1", nil)
	f.role(8005, "node-1", engine.RoleFollower)
	f.role(8010, "node-2", engine.RoleCandidate)
	f.role(8020, "node-2", engine.RoleLeader)
	f.run(10000, "load_end")

	var ps []rundir.Probe
	for ms := int64(0); ms < 10000; ms += 10 {
		lat := int64(time.Millisecond)
		if ms >= 8000 && ms < 8020 {
			lat = (8025 - ms) * int64(time.Millisecond)
		}
		ps = append(ps, rundir.Probe{IntendedNs: at(ms).UnixNano(), LatencyNs: lat})
	}
	f.probes(ps)
	inv := []map[string]any{}
	for i, n := range []string{"node-0", "node-1", "node-2"} {
		ip := "127.0.0.1" + string(rune('1'+i))
		inv = append(inv, map[string]any{"name": n, "role": "server", "address": ip, "private_address": ip})
	}
	f.writeJSON("manifest.json", map[string]any{
		"run_id": "handoff", "status": "ok", "playbook": map[string]any{"name": "handoff"},
		"inventory": map[string]any{"target": "local", "nodes": inv},
		"loadgen": map[string]any{"conn": map[string]any{"leader_changes": []any{
			map[string]any{"at": at(5350), "from": "127.0.0.11:7001", "to": "127.0.0.12:7001", "gap_ns": 340 * int64(time.Millisecond)},
		}}},
	})
	return f.close()
}

func TestHandOffs(t *testing.T) {
	dir := handOffRun(t)
	s, err := Analyze(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.HandOffs) != 2 {
		t.Fatalf("hand-offs %+v: want the TERM of the leader and the step-down", s.HandOffs)
	}
	h := s.HandOffs[0]
	want := HandOffTimes{ServiceGapMs: valPtr(340.0), ServiceGapFrom: GapFromClient, DetectMs: valPtr(128.0), Detector: "node-1",
		DetectedAs: "CANVASS", ElectMs: valPtr(321.0), ClientLearnMs: valPtr(29.0)}
	if !reflect.DeepEqual(h.HandOffTimes, want) {
		t.Errorf("TERM hand-off %s: want %s", show(h.HandOffTimes), show(want))
	}
	if h.Action != "kill" || h.From != "node-0" || h.To != "node-1" || h.AnsweredBy != "node-1" ||
		*h.LastOldReplyMs != 10 || *h.FirstNewReplyMs != 350 {
		t.Errorf("TERM hand-off %+v: want kill node-0 → node-1, answered by node-1, last old reply +10 ms, first new +350 ms", h)
	}
	// Each server's states around it: the election states while one is open, else the role.
	lane := func(h HandOff, node string) []StateSpan {
		for _, l := range h.Lanes {
			if l.Node == node {
				return l.Spans
			}
		}
		return nil
	}
	wantLanes := map[string][]StateSpan{
		"node-0": {{"leader", -1000, 30}, {"down", 30, 1350}},
		"node-1": {{"follower", -1000, 128}, {"CANVASS", 128, 200}, {"NOMINATE", 200, 250}, {"CANDIDATE_BALLOT", 250, 300},
			{"LEADER_LOG_REPLICATION", 300, 400}, {"leader", 400, 1350}},
		"node-2": {{"follower", -1000, 131}, {"CANVASS", 131, 260}, {"FOLLOWER_BALLOT", 260, 410}, {"follower", 410, 1350}},
	}
	for node, w := range wantLanes {
		if got := lane(h, node); !reflect.DeepEqual(got, w) {
			t.Errorf("%s's lane %+v, want %+v", node, got, w)
		}
	}

	// rig's own engine: roles only, no record of who answered.
	h = s.HandOffs[1]
	want = HandOffTimes{ServiceGapMs: valPtr(30.0), ServiceGapFrom: GapFromProbes, DetectMs: valPtr(10.0), Detector: "node-2",
		DetectedAs: engine.RoleCandidate, ElectMs: valPtr(20.0), ClientLearnMs: valPtr(1.0)}
	if !reflect.DeepEqual(h.HandOffTimes, want) || h.AnsweredBy != "" {
		t.Errorf("step-down hand-off %s (answered by %q): want %s", show(h.HandOffTimes), h.AnsweredBy, show(want))
	}
	if len(s.StepDowns) != 1 || !reflect.DeepEqual(s.StepDowns[0].HandOffTimes, h.HandOffTimes) {
		t.Errorf("step-down rows %+v: want one with the hand-off's figures", s.StepDowns)
	}
	if err := WriteOutputs(dir, s); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, PlotHandOff)); err != nil || fi.Size() == 0 {
		t.Errorf("no hand-off plot: %v", err)
	}
	report, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"| 1 | 5.0 s | kill | node-0 | node-1 | 340 ms | 128 ms | 321 ms | 29.0 ms | node-1 (CANVASS) | node-1 |",
		"| 2 | 8.0 s | step_down | node-1 | node-2 | 30.0 ms² | 10.0 ms | 20.0 ms | 1.00 ms | node-2 (candidate) | — |",
	} {
		if !strings.Contains(string(report), line) {
			t.Errorf("report.md lacks the hand-off row\n%s", line)
		}
	}
}

func show(h HandOffTimes) string {
	f := func(p *float64) string {
		if p == nil {
			return "—"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("{gap %s from %s, detect %s by %s as %s, elect %s, learn %s}", f(h.ServiceGapMs), h.ServiceGapFrom,
		f(h.DetectMs), h.Detector, h.DetectedAs, f(h.ElectMs), f(h.ClientLearnMs))
}
