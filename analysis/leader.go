package analysis

import (
	"fmt"
	"strings"
)

// leaderGraceS is how long after a step_down, or a kill of the leader, one leader change counts
// as the one the action asked for. Elections here take raft's election timeout (a few hundred ms
// to a few s on a loaded machine); a second change in the same stretch is not the action's.
const leaderGraceS = 10.0

// unplannedLeaderChanges finds the leader changes after load start that no action asked for:
// each step_down, and each kill of the node that was leader at the time, explains the first
// change to another node within leaderGraceS after it; every other change is unplanned (an
// election from a slow heartbeat, a follower standing after a long snapshot, a flurry after a
// step-down).
func unplannedLeaderChanges(s *Summary) []LeaderMark {
	type cause struct {
		at   float64
		used bool
	}
	var causes []*cause
	leader := s.LeaderAtLoadStart
	changes := s.LeaderChanges
	ci := 0
	// Walk actions and changes in time order so "the leader at the kill" is known.
	advance := func(to float64) {
		for ci < len(changes) && changes[ci].AtS < to {
			leader = changes[ci].Node
			ci++
		}
	}
	for _, a := range s.Actions {
		advance(a.AtS)
		switch {
		case a.Action == "step_down":
			causes = append(causes, &cause{at: a.AtS})
		case a.Action == "kill" && a.Node != "" && a.Node == leader:
			causes = append(causes, &cause{at: a.AtS})
		}
	}
	out := []LeaderMark{}
	prev := s.LeaderAtLoadStart
	for _, c := range changes {
		if c.Node == prev { // the same leader reported again: no change
			continue
		}
		prev = c.Node
		planned := false
		for _, k := range causes {
			if !k.used && c.AtS >= k.at && c.AtS <= k.at+leaderGraceS {
				k.used, planned = true, true
				break
			}
		}
		if !planned {
			out = append(out, c)
		}
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
	w := fmt.Sprintf("%d unplanned leader change(s), not asked for by a step_down or a kill of the leader within %.0f s before: %s",
		len(at), leaderGraceS, strings.Join(at, ", "))
	if len(touched) > 0 {
		w += "; figures that include one are flagged: " + strings.Join(touched, ", ")
	}
	return []string{w}
}
