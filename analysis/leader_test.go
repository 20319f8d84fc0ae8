package analysis

import (
	"github.com/rig-dev/rig/rundir"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestUnplannedLeaderChanges(t *testing.T) {
	s := &Summary{
		LeaderAtLoadStart: "node-0",
		Actions: []ActionMark{
			{AtS: 10, Action: "step_down", Node: "node-0", Moves: rundir.MovesLeader},
			{AtS: 30, Action: "kill", Node: "node-2", Moves: rundir.MovesIfLeader}, // a follower
			{AtS: 50, Action: "kill", Node: "node-1", Moves: rundir.MovesIfLeader}, // the leader by then
			{AtS: 70, Action: "snapshot"},
		},
		LeaderChanges: []LeaderMark{
			{AtS: 10.3, Node: "node-1"}, // the step-down's
			{AtS: 12.0, Node: "node-2"}, // a second election in the step-down's stretch
			{AtS: 12.5, Node: "node-1"}, // and back
			{AtS: 12.6, Node: "node-1"}, // reported again: no change
			{AtS: 31.0, Node: "node-0"}, // after a follower's kill: nobody asked
			{AtS: 32.0, Node: "node-1"},
			{AtS: 51.5, Node: "node-0"}, // the leader's kill
			{AtS: 71.0, Node: "node-2"}, // during a snapshot
		},
		Snapshots: []SnapshotRow{{AtS: 70, WindowFromS: 69, WindowToS: 72}, {AtS: 90, WindowFromS: 89, WindowToS: 91}},
		StepDowns: []StepDownRow{{AtS: 10, WindowFromS: 9, WindowToS: 11.3}},
	}
	warn := flagUnplanned(s, leadershipOf(s))
	want := []LeaderMark{{12.0, "node-2"}, {12.5, "node-1"}, {31.0, "node-0"}, {32.0, "node-1"}, {71.0, "node-2"}}
	if !reflect.DeepEqual(s.UnplannedLeaderChanges, want) {
		t.Errorf("unplanned %v, want %v", s.UnplannedLeaderChanges, want)
	}
	if !s.Snapshots[0].UnplannedLeaderChange || s.Snapshots[1].UnplannedLeaderChange {
		t.Errorf("snapshot flags %v %v, want the first only", s.Snapshots[0].UnplannedLeaderChange, s.Snapshots[1].UnplannedLeaderChange)
	}
	if s.StepDowns[0].UnplannedLeaderChange {
		t.Error("the step-down's own change flagged its window")
	}
	if len(warn) != 1 || !strings.Contains(warn[0], "5 unplanned leader change(s)") || !strings.Contains(warn[0], "snapshot at 70.0 s") {
		t.Errorf("warnings %q", warn)
	}

	quiet := &Summary{LeaderAtLoadStart: "node-0", Actions: []ActionMark{{AtS: 5, Action: "step_down", Moves: rundir.MovesLeader}}, LeaderChanges: []LeaderMark{{6, "node-1"}}}
	if w := flagUnplanned(quiet, leadershipOf(quiet)); w != nil || quiet.UnplannedLeaderChanges == nil || len(quiet.UnplannedLeaderChanges) != 0 {
		t.Errorf("a planned change: warnings %q, unplanned %v (want an empty list, not null)", w, quiet.UnplannedLeaderChanges)
	}
}

// TestLeaderAttributionByEvents: with no window (the engines reported no timers), a failover that
// takes longer than any fixed window would allow (~11 s after a leader kill: heartbeat timeout
// plus an election) is still the kill's, and a change right after a 200 ms hand-off is not the
// step-down's.
func TestLeaderAttributionByEvents(t *testing.T) {
	s := &Summary{
		LeaderAtLoadStart: "node-0",
		Actions: []ActionMark{
			{AtS: 10, Action: "kill", Node: "node-0", Moves: rundir.MovesIfLeader},    // the leader
			{AtS: 20, Action: "relaunch", Node: "node-0"},                             // not a cause
			{AtS: 40, Action: "step_down", Node: "node-1", Moves: rundir.MovesLeader}, // the leader by then
			{AtS: 60, Action: "step_down", Node: "node-2", Moves: rundir.MovesLeader}, // answered by no change
		},
		LeaderChanges: []LeaderMark{
			{AtS: 21.1, Node: "node-1"}, // 11.1 s after the kill: the kill's
			{AtS: 40.2, Node: "node-2"}, // the step-down's 200 ms hand-off
			{AtS: 40.5, Node: "node-0"}, // 300 ms later, unprovoked
			{AtS: 60.3, Node: "node-0"}, // node-0 reported again: no change
			{AtS: 75.0, Node: "node-1"}, // long after the step-down at 60 that moved nothing: still its
			{AtS: 80.0, Node: "node-2"}, // nothing asked
		},
		StepDowns:    []StepDownRow{{AtS: 40, WindowFromS: 39, WindowToS: 41.2}},
		LeaderWindow: leaderWindowFor(0, 0),
	}
	warn := flagUnplanned(s, leadershipOf(s))
	want := []LeaderMark{{40.5, "node-0"}, {80.0, "node-2"}}
	if !reflect.DeepEqual(s.UnplannedLeaderChanges, want) {
		t.Errorf("unplanned %v, want %v", s.UnplannedLeaderChanges, want)
	}
	if !s.StepDowns[0].UnplannedLeaderChange {
		t.Error("the change 300 ms after the hand-off did not flag the step-down's window")
	}
	if len(warn) != 1 || !strings.Contains(warn[0], s.LeaderWindow.Rule) {
		t.Errorf("warnings %q: want the rule named", warn)
	}
	causes := leaderCauses(leadershipOf(s))
	if len(causes) != 3 || causes[0].Node != "node-0" || causes[1].Node != "node-1" || causes[2].Node != "node-0" {
		t.Errorf("causes %+v: want the kill of node-0 and the step-downs of node-1 and node-0", causes)
	}
}

func TestLeaderSpans(t *testing.T) {
	s := &Summary{LeaderAtLoadStart: "node-0", LeaderChanges: []LeaderMark{{10, "node-1"}, {10.5, "node-1"}, {20, "node-2"}}}
	got := leaderSpans(s, 30)
	want := []leaderSpan{{"node-0", 0, 10}, {"node-1", 10, 20}, {"node-2", 20, 30}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("spans %v, want %v", got, want)
	}
}

// The window comes from the engines' raft timers: 2 × heartbeat timeout + 3 rounds of 2 × election
// timeout. Inside it the first change to another leader is the action's (a kill's election that
// took a split vote, a partition's, a step-down's hand-off); a change after it is flagged, and so
// is a second change right after a planned one. The same sequence with timers ten times longer
// attributes the late ones.
func TestLeaderWindowFromEngineTimers(t *testing.T) {
	w := leaderWindowFor(100*time.Millisecond, 500*time.Millisecond)
	if w.S != 3.2 || w.HeartbeatMs != 100 || w.ElectionMs != 500 ||
		!strings.Contains(w.Rule, "within 3.2s") || !strings.Contains(w.Rule, "heartbeat_timeout 100ms") || !strings.Contains(w.Rule, "election_timeout 500ms") {
		t.Errorf("window %+v: want 3.2 s from heartbeat 100ms and election 500ms, named in the rule", w)
	}
	seq := func(w LeaderWindow) *Summary {
		return &Summary{
			LeaderAtLoadStart: "node-0",
			Actions: []ActionMark{
				{AtS: 10, Action: "kill", Node: "node-0", Moves: rundir.MovesIfLeader},
				{AtS: 20, Action: "step_down", Node: "node-1", Moves: rundir.MovesLeader}, // refused: no change follows it
				{AtS: 40, Action: "partition", Node: "node-1", Moves: rundir.MovesIfLeader},
				{AtS: 60, Action: "kill", Node: "node-2", Moves: rundir.MovesIfLeader},
				{AtS: 80, Action: "step_down", Node: "node-0", Moves: rundir.MovesLeader},
			},
			LeaderChanges: []LeaderMark{
				{AtS: 11.5, Node: "node-1"}, // 1.5 s after the kill: a split vote, still inside 3.2 s
				{AtS: 30.0, Node: "node-2"}, // 10 s after the step-down that moved nothing
				{AtS: 30.5, Node: "node-1"}, // and back
				{AtS: 40.4, Node: "node-2"}, // the partition's
				{AtS: 65.0, Node: "node-0"}, // 5 s after the kill of node-2
				{AtS: 80.2, Node: "node-1"}, // the step-down's hand-off
				{AtS: 80.5, Node: "node-2"}, // 300 ms later, unprovoked
			},
			LeaderWindow: w,
		}
	}
	s := seq(w)
	warn := flagUnplanned(s, leadershipOf(s))
	want := []LeaderMark{{30.0, "node-2"}, {30.5, "node-1"}, {65.0, "node-0"}, {80.5, "node-2"}}
	if !reflect.DeepEqual(s.UnplannedLeaderChanges, want) {
		t.Errorf("unplanned %v, want %v", s.UnplannedLeaderChanges, want)
	}
	if len(warn) != 1 || !strings.Contains(warn[0], "within 3.2s") {
		t.Errorf("warnings %q: want the window named", warn)
	}
	long := seq(leaderWindowFor(time.Second, 5*time.Second)) // 32 s
	flagUnplanned(long, leadershipOf(long))
	if want := []LeaderMark{{30.5, "node-1"}, {80.5, "node-2"}}; !reflect.DeepEqual(long.UnplannedLeaderChanges, want) {
		t.Errorf("with a 32 s window: unplanned %v, want %v", long.UnplannedLeaderChanges, want)
	}
}

// A kind the analysis does not know is a cause when its event says it moves the leader.
func TestLeaderCauseByTheEvent(t *testing.T) {
	s := &Summary{LeaderAtLoadStart: "node-0",
		Actions:       []ActionMark{{AtS: 5, Action: "toy", Node: "node-0", Moves: rundir.MovesLeader}, {AtS: 20, Action: "toy2", Node: "node-1"}},
		LeaderChanges: []LeaderMark{{6, "node-1"}, {21, "node-2"}}}
	if w := flagUnplanned(s, leadershipOf(s)); len(s.UnplannedLeaderChanges) != 1 || s.UnplannedLeaderChanges[0].AtS != 21 {
		t.Errorf("unplanned %v (%q); want only the change after the action that says nothing", s.UnplannedLeaderChanges, w)
	}
}
