package analysis

import (
	"net"
	"slices"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// A leader hand-off, as the step-down guide measures it, for every action that moves
// leadership (a step_down, or a kill or partition of the leader: the failovers' causes), on one
// clock from the action (the close):
//
//   - service gap: the client's last reply served by the old leader → its first reply from the
//     new one (OK or Rejected: committed by a leader). Read from the load generator's own record
//     of which server answered (rundir.LeaderChange: the first change after the action); a
//     folder without one falls back to the probes: the longest silence between replies that
//     overlaps action → new leader (the failover's client gap), which cannot say who answered;
//   - detection: the first follower (not the old leader) leaving its follow state: becoming a
//     candidate, entering an election state of its engine (Aeron's CANVASS, ...), or leader;
//   - election: the failover's (a node reporting itself leader, failover.go);
//   - client learning: new leader elected → the client's first reply from it; below zero when
//     the new leader answered before its agent saw its role change;
//   - each node's states as spans: its role, its engine's election state while one is open,
//     down while its process is gone.

// Where a hand-off's service gap was read from (HandOffTimes.ServiceGapFrom).
const (
	GapFromClient = "client" // the load generator's record of which server answered
	GapFromProbes = "probes" // the longest silence between replies: who answered is unknown
)

// Node states in the hand-off lanes beside the engine's roles and election states.
const (
	stateDown     = "down"     // the process is gone
	stateStarting = "starting" // launched, no role reported yet
)

// handOffLead is how much of the lanes before the action is kept: the steady state the
// hand-off starts from.
const handOffLead = int64(1e9)

// HandOffTimes are a hand-off's figures (HandOffFigures), in ms from its action; absent where
// it did not happen before the next action or the end of load.
type HandOffTimes struct {
	ServiceGapMs   *float64 `json:"service_gap_ms"`
	ServiceGapFrom string   `json:"service_gap_from,omitempty"` // GapFromClient or GapFromProbes
	DetectMs       *float64 `json:"detect_ms"`
	Detector       string   `json:"detector,omitempty"`    // the follower that left its follow state first
	DetectedAs     string   `json:"detected_as,omitempty"` // the state it left it for
	ElectMs        *float64 `json:"elect_ms"`
	ClientLearnMs  *float64 `json:"client_learn_ms"`
}

// HandOff is one leader hand-off: its figures, when the client's last reply from the old leader
// and first from the new one came (ms from the action), and every server's states around it.
type HandOff struct {
	AtS    float64 `json:"at_s"`
	Action string  `json:"action"`
	From   string  `json:"from"`
	To     string  `json:"to,omitempty"`
	HandOffTimes
	LastOldReplyMs  *float64 `json:"last_old_reply_ms,omitempty"`
	FirstNewReplyMs *float64 `json:"first_new_reply_ms,omitempty"`
	// AnsweredBy is the server the client's first new reply came from: a node, or its address
	// when the inventory does not name it (a routed link).
	AnsweredBy string        `json:"answered_by,omitempty"`
	Lanes      []HandOffLane `json:"lanes"`
}

// HandOffLane is one server's states from handOffLead before the action until a second after
// the hand-off ended (or the next action).
type HandOffLane struct {
	Node  string      `json:"node"`
	Spans []StateSpan `json:"spans"`
}

// StateSpan is a state a node was in, ms from the action.
type StateSpan struct {
	State  string  `json:"state"`
	FromMs float64 `json:"from_ms"`
	ToMs   float64 `json:"to_ms"`
}

// stateAt is a node entering a state at t (ns).
type stateAt struct {
	t     int64
	state string
}

// laneStates is every server's state over the run, from its events: down while its process is
// gone, else its engine's election state while one is open, else its role.
func (d *runData) laneStates() map[string][]stateAt {
	type node struct{ role, election string }
	cur := map[string]*node{}
	out := map[string][]stateAt{}
	label := func(n *node, down bool) string {
		switch {
		case down:
			return stateDown
		case n.election != "" && n.election != "CLOSED" && n.election != "none":
			return n.election
		case n.role != "":
			return n.role
		}
		return stateStarting
	}
	for _, e := range d.events {
		if e.Node == "" || e.Phase == nil && e.Role == nil && e.Election == nil {
			continue
		}
		n := cur[e.Node]
		if n == nil {
			n = &node{}
			cur[e.Node] = n
		}
		down := len(out[e.Node]) > 0 && out[e.Node][len(out[e.Node])-1].state == stateDown
		switch {
		case e.Phase != nil && e.Phase.To == rundir.PhaseDown:
			*n, down = node{}, true
		case e.Phase != nil && (e.Phase.To == "" || e.Phase.To == engine.PhaseStarting):
			down = false // launched
		case e.Phase != nil:
			if down {
				continue // a signal the runner logged as a phase: still down
			}
		case e.Role != nil:
			n.role = e.Role.To
		case e.Election != nil:
			n.election = e.Election.To
		}
		s := label(n, down)
		if l := out[e.Node]; len(l) == 0 || l[len(l)-1].state != s {
			out[e.Node] = append(l, stateAt{e.T.UnixNano(), s})
		}
	}
	return out
}

// handOffs measures every failover (one per action that moves leadership, in order) as a
// hand-off, and gives each step-down row its hand-off's figures.
func (d *runData) handOffs(s *Summary) []HandOff {
	out := []HandOff{}
	if len(s.Failovers) == 0 {
		return out
	}
	states := d.laneStates()
	for i, f := range s.Failovers {
		at := d.origin + int64(f.AtS*1e9)
		limit := d.loadEnd
		if i+1 < len(s.Failovers) {
			limit = d.origin + int64(s.Failovers[i+1].AtS*1e9)
		}
		h := d.handOff(f, at, limit, states)
		out = append(out, h)
		for j := range s.StepDowns {
			if d.kinds().Makes(rundir.ActionName(f.Action), actions.ShapeStepDown) && s.StepDowns[j].AtS == f.AtS {
				s.StepDowns[j].HandOffTimes = h.HandOffTimes
			}
		}
	}
	return out
}

// handOff measures the failover f, whose action came at at (ns), until limit.
func (d *runData) handOff(f FailoverRow, at, limit int64, states map[string][]stateAt) HandOff {
	h := HandOff{AtS: f.AtS, Action: f.Action, From: f.From, To: f.To}
	h.ElectMs = f.ElectMs
	ms := func(t int64) *float64 { return valPtr(nsToMs(t - at)) }
	elected := int64(-1)
	if f.ElectMs != nil {
		elected = at + int64(*f.ElectMs*1e6)
	}
	end := at
	for _, node := range d.nodes {
		if node == f.From {
			continue
		}
		l := states[node]
		for k := 1; k < len(l); k++ {
			if t := l[k].t; t >= at && t < limit && l[k-1].state == engine.RoleFollower && !isIdle(l[k].state) {
				if h.DetectMs == nil || t-at < int64(*h.DetectMs*1e6) {
					h.DetectMs, h.Detector, h.DetectedAs = ms(t), node, l[k].state
					end = max(end, t)
				}
				break
			}
		}
	}
	last, first := int64(-1), int64(-1)
	if lc, ok := d.clientLeaderChange(at, limit); ok {
		first = lc.At.UnixNano()
		last = first - lc.GapNs
		h.ServiceGapFrom, h.AnsweredBy = GapFromClient, d.nodeAt(lc.To)
	} else if elected >= 0 && d.hasProbe {
		if last, first = d.longestSilence(at, elected, limit); last >= 0 && first >= 0 {
			h.ServiceGapFrom = GapFromProbes
		}
	}
	if h.ServiceGapFrom != "" {
		h.ServiceGapMs = valPtr(nsToMs(first - last))
		h.LastOldReplyMs, h.FirstNewReplyMs = ms(last), ms(first)
		end = max(end, first)
		if elected >= 0 {
			h.ClientLearnMs = valPtr(nsToMs(first - elected))
		}
	}
	end = max(end, elected)
	if end == at { // nothing happened: the lanes show the action's window as far as it went
		end = limit - int64(1e9)
	}
	h.Lanes = lanes(d.nodes, states, at-handOffLead, min(end+int64(1e9), limit), at)
	return h
}

// isIdle says a state is no sign of a follower having noticed anything.
func isIdle(state string) bool {
	return state == engine.RoleFollower || state == stateDown || state == stateStarting
}

// lanes are the nodes' states in [from, to), in ms from at.
func lanes(nodes []string, states map[string][]stateAt, from, to, at int64) []HandOffLane {
	out := make([]HandOffLane, 0, len(nodes))
	ms := func(t int64) float64 { return nsToMs(t - at) }
	for _, node := range nodes {
		lane := HandOffLane{Node: node, Spans: []StateSpan{}}
		l := states[node]
		for k, s := range l {
			next := to
			if k+1 < len(l) {
				next = min(l[k+1].t, to)
			}
			if next <= from || s.t >= to {
				continue
			}
			lane.Spans = append(lane.Spans, StateSpan{State: s.state, FromMs: ms(max(s.t, from)), ToMs: ms(next)})
		}
		out = append(out, lane)
	}
	return out
}

// clientLeaderChange is the probe stream's first change of answering server in [at, limit).
func (d *runData) clientLeaderChange(at, limit int64) (rundir.LeaderChange, bool) {
	if d.man.Loadgen == nil {
		return rundir.LeaderChange{}, false
	}
	for _, lc := range d.man.Loadgen.Conn.LeaderChanges {
		if t := lc.At.UnixNano(); t >= at && t < limit {
			return lc, true
		}
	}
	return rundir.LeaderChange{}, false
}

// nodeAt names the server at a client address by the inventory's addresses; the address itself
// when none has its host (a routed link's proxy).
func (d *runData) nodeAt(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || d.man.Inventory == nil {
		return addr
	}
	for _, n := range d.man.Inventory.Servers() {
		if n.PrivateAddress == host || n.Address == host {
			return n.Name
		}
	}
	return addr
}

// handOffStates are the states the lanes hold, in a stable order for the legend: roles first,
// then the engine's own states as they first appear.
func handOffStates(hs []HandOff) []string {
	out := []string{engine.RoleLeader, engine.RoleFollower, engine.RoleCandidate}
	var seen []string
	for _, h := range hs {
		for _, l := range h.Lanes {
			for _, s := range l.Spans {
				if !slices.Contains(out, s.State) && !slices.Contains(seen, s.State) {
					seen = append(seen, s.State)
				}
			}
		}
	}
	return append(out, seen...)
}
