package analysis

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/rundir"
)

// A leader change is attributed to the action that asked for it by events and the engine's own
// timers, not by a constant: a step_down, or a kill or partition of the node leading at the time,
// opens a cause, and the first change to another leader within the cause's window after it is
// that cause's. The window is what the engines' raft timers in effect allow a failover (the
// manifest's engine_config, the longest any server reports): a follower stands within 2 × its
// heartbeat timeout (hashicorp/raft draws it from [1×, 2×)), and an election round ends within
// 2 × the election timeout; leaderWindowRounds rounds are allowed for split votes. A step-down's
// hand-off is bounded by the same timers (the transfer gives up after an election timeout). The
// cause then closes, so a second change after it (a flurry after a 200 ms hand-off, an election
// started by a slow heartbeat) is flagged however soon it follows. A cause that no change answers
// closes at the end of its window or at the next cause. Without both timers reported there is no
// window: a cause then lasts until its change or the next cause, and the report says so.
const leaderWindowRounds = 3

// LeaderWindow is the window a leader change was attributed in, and where it came from; the
// report quotes Rule.
type LeaderWindow struct {
	S           float64 `json:"s,omitempty"` // absent: no window (the engines reported no timers)
	HeartbeatMs float64 `json:"heartbeat_timeout_ms,omitempty"`
	ElectionMs  float64 `json:"election_timeout_ms,omitempty"`
	Rule        string  `json:"rule"`
}

// leaderWindow derives the window from the longest heartbeat and election timeouts the engines
// report in effect.
func (d *runData) leaderWindow() LeaderWindow {
	table := d.resolved().Table
	return leaderWindowFor(table.LongestInEffect(driver.HeartbeatTimeout, d.man.Engines),
		table.LongestInEffect(driver.ElectionTimeout, d.man.Engines))
}

func leaderWindowFor(hb, el time.Duration) LeaderWindow {
	const causes = "each step_down, kill or partition of the leader explains the first change to another leader"
	if hb <= 0 || el <= 0 {
		return LeaderWindow{Rule: causes + " after it, until that change or the next such action " +
			"(no window: the engines reported no heartbeat_timeout and election_timeout in effect)"}
	}
	w := 2*hb + leaderWindowRounds*2*el
	return LeaderWindow{S: w.Seconds(), HeartbeatMs: nsToMs(int64(hb)), ElectionMs: nsToMs(int64(el)),
		Rule: fmt.Sprintf("%s within %v after it (2 × heartbeat_timeout %v + %d × 2 × election_timeout %v, the engines' "+
			"settings in effect: a follower stands within 2 × its heartbeat timeout, an election round ends within 2 × the "+
			"election timeout), until that change or the next such action", causes, w, hb, leaderWindowRounds, el)}
}

// until is the end of a cause's window that opened at atS (+Inf without a window).
func (w LeaderWindow) until(atS float64) float64 {
	if w.S <= 0 {
		return math.Inf(1)
	}
	return atS + w.S
}

// leadership is what attributing leader changes reads: the leader at load start, every change
// after it, the actions, and the window a cause explains a change in.
type leadership struct {
	AtLoadStart string
	Changes     []LeaderMark
	Actions     []ActionMark
	Window      LeaderWindow
}

// leadershipOf is a summary's leadership, as summarize set it.
func leadershipOf(s *Summary) leadership {
	return leadership{AtLoadStart: s.LeaderAtLoadStart, Changes: s.LeaderChanges, Actions: s.Actions, Window: s.LeaderWindow}
}

// leaderCause is an action that asks for a leader change.
type leaderCause struct {
	AtS    float64
	Action string
	Node   string // the leader when it acted ("" when unknown)
}

// leaderCauses are the actions that ask for a leader change, in time order: every step_down,
// and every kill of the node that was leader at that moment.
func leaderCauses(l leadership) []leaderCause {
	var out []leaderCause
	leader := l.AtLoadStart
	ci := 0
	for _, a := range l.Actions {
		for ci < len(l.Changes) && l.Changes[ci].AtS < a.AtS {
			leader = l.Changes[ci].Node
			ci++
		}
		switch a.Moves {
		case rundir.MovesLeader:
			out = append(out, leaderCause{AtS: a.AtS, Action: a.Action, Node: leader})
		case rundir.MovesIfLeader:
			if a.Node != "" && a.Node == leader {
				out = append(out, leaderCause{AtS: a.AtS, Action: a.Action, Node: leader})
			}
		}
	}
	return out
}

// unplannedLeaderChanges finds the leader changes after load start that no action asked for
// (the rule above); the same leader reported again is no change.
func unplannedLeaderChanges(l leadership) []LeaderMark {
	causes := leaderCauses(l)
	out := []LeaderMark{}
	prev := l.AtLoadStart
	next := 0                 // the first cause not yet reached
	openUntil := math.Inf(-1) // the end of the window of a cause reached and not yet answered
	for _, c := range l.Changes {
		for next < len(causes) && causes[next].AtS <= c.AtS {
			openUntil = l.Window.until(causes[next].AtS) // a later cause replaces an unanswered one
			next++
		}
		if c.Node == prev {
			continue
		}
		prev = c.Node
		planned := c.AtS <= openUntil
		openUntil = math.Inf(-1)
		if !planned {
			out = append(out, c)
		}
	}
	return out
}

// flagUnplanned records the unplanned leader changes in the summary, flags every figure whose
// window holds one, and returns the warnings that say so.
func flagUnplanned(s *Summary, lead leadership) []string {
	s.UnplannedLeaderChanges = unplannedLeaderChanges(lead)
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
		len(at), lead.Window.Rule, strings.Join(at, ", "))
	if len(touched) > 0 {
		w += "; figures that include one are flagged: " + strings.Join(touched, ", ")
	}
	return []string{w}
}
