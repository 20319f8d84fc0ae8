package analysis

import (
	"fmt"
	"strings"
)

// A leader change is attributed to the action that asked for it by events, not by a window of
// fixed length: a step_down, or a kill of the node leading at the time, opens a cause, and the
// first change to another leader after it is that cause's, however long the failover took (a
// stock hashicorp/raft failover after a leader kill waits out the heartbeat timeout and an
// election: ~11 s on a loaded machine, more than any fixed window that is short enough to catch
// a flurry). The cause then closes, so a second change after it (a flurry after a 200 ms
// hand-off, an election started by a slow heartbeat) is flagged however soon it follows. A
// cause that no change answers closes at the next cause.
//
// leaderAttribution is the rule's one-line name, which the report's warning quotes.
const leaderAttribution = "each step_down or kill of the leader explains the first change to another leader after it, until that change or the next such action"

// leaderCause is an action that asks for a leader change.
type leaderCause struct {
	AtS    float64
	Action string
	Node   string // the leader when it acted ("" when unknown)
}

// leaderCauses are the actions that ask for a leader change, in time order: every step_down,
// and every kill of the node that was leader at that moment.
func leaderCauses(s *Summary) []leaderCause {
	var out []leaderCause
	leader := s.LeaderAtLoadStart
	ci := 0
	for _, a := range s.Actions {
		for ci < len(s.LeaderChanges) && s.LeaderChanges[ci].AtS < a.AtS {
			leader = s.LeaderChanges[ci].Node
			ci++
		}
		switch {
		case a.Action == "step_down":
			out = append(out, leaderCause{AtS: a.AtS, Action: a.Action, Node: leader})
		case (a.Action == "kill" || a.Action == "partition") && a.Node != "" && a.Node == leader:
			out = append(out, leaderCause{AtS: a.AtS, Action: a.Action, Node: leader})
		}
	}
	return out
}

// unplannedLeaderChanges finds the leader changes after load start that no action asked for
// (the rule above); the same leader reported again is no change.
func unplannedLeaderChanges(s *Summary) []LeaderMark {
	causes := leaderCauses(s)
	out := []LeaderMark{}
	prev := s.LeaderAtLoadStart
	next := 0     // the first cause not yet reached
	open := false // a cause reached and not yet answered
	for _, c := range s.LeaderChanges {
		for next < len(causes) && causes[next].AtS <= c.AtS {
			open = true // a later cause replaces an unanswered one
			next++
		}
		if c.Node == prev {
			continue
		}
		prev = c.Node
		if open {
			open = false
			continue
		}
		out = append(out, c)
	}
	return out
}

// flagUnplanned records the unplanned leader changes in the summary, flags every figure whose
// window holds one, and returns the warnings that say so.
func flagUnplanned(s *Summary) []string {
	s.UnplannedLeaderChanges = unplannedLeaderChanges(s)
	if len(s.UnplannedLeaderChanges) == 0 {
		return nil
	}
	in := func(from, to float64) bool {
		for _, c := range s.UnplannedLeaderChanges {
			if c.AtS >= from && c.AtS <= to {
				return true
			}
		}
		return false
	}
	var touched []string
	for i := range s.Snapshots {
		r := &s.Snapshots[i]
		if in(r.WindowFromS, r.WindowToS) {
			r.UnplannedLeaderChange = true
			touched = append(touched, fmt.Sprintf("snapshot at %.1f s", r.AtS))
		}
	}
	for i := range s.StepDowns {
		r := &s.StepDowns[i]
		if in(r.WindowFromS, r.WindowToS) {
			r.UnplannedLeaderChange = true
			touched = append(touched, fmt.Sprintf("step-down at %.1f s", r.AtS))
		}
	}
	for i := range s.Restarts {
		r := &s.Restarts[i]
		for name, w := range map[string]*Window{"all up": &r.Windows.AllUp, "one down": &r.Windows.OneDown, "rejoining": r.Windows.Rejoining} {
			if w != nil && w.N+w.Lost > 0 && in(w.FromS, w.ToS) {
				w.UnplannedLeaderChange = true
				touched = append(touched, fmt.Sprintf("restart of %s at %.1f s (%s window)", r.Node, r.KillS, name))
			}
		}
	}
	var at []string
	for _, c := range s.UnplannedLeaderChanges {
		at = append(at, fmt.Sprintf("%s at %.1f s", c.Node, c.AtS))
	}
	w := fmt.Sprintf("%d unplanned leader change(s) (%s): %s",
		len(at), leaderAttribution, strings.Join(at, ", "))
	if len(touched) > 0 {
		w += "; figures that include one are flagged: " + strings.Join(touched, ", ")
	}
	return []string{w}
}
