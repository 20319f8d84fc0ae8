package analysis

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/stats"
)

// A failover, told apart into the stretches a client lives through, for every action that
// removes or isolates a leader (a kill or partition of the leader) or hands leadership on
// (step_down), inside the cause's window (leader.go):
//
//   - detection: fault → the first node to become a candidate (a follower whose heartbeat
//     timeout ran out, the hand-off's target, or the old leader relaunched and standing again);
//     when no node was seen as a candidate (one went straight from follower to leader between
//     two observations of its state), detection is the election's time, and DetectedBy says so;
//   - election: fault → a node reports itself leader: another node, or the old leader once it
//     has been down or stopped leading since the fault (relaunched at once, it can stand and win
//     again before the followers' heartbeat timeout runs out);
//   - client gap: the longest silence between two replies that overlaps fault → new leader
//     known, on the client's clock (probe intended send + latency);
//   - back to normal: fault → the end of the first whole second after the first reply whose p99
//     is within normalMargin of the pre-fault level: the median of the per-second p99s in the
//     normalBaselineS before the fault (with fewer than 100 probes in a second its p99 is its
//     slowest).
const (
	normalMargin    = 0.5 // within 50 % of the pre-fault level
	normalBaselineS = 10
)

// FailoverRow is one fault that moved leadership, measured as an event. A stretch that did
// not happen before the next fault (or the end of load) is absent.
type FailoverRow struct {
	AtS       float64  `json:"at_s"`
	Action    string   `json:"action"`
	From      string   `json:"from"`         // the leader at the fault
	To        string   `json:"to,omitempty"` // the next leader
	Candidate string   `json:"candidate,omitempty"`
	DetectMs  *float64 `json:"detect_ms"`
	// DetectedBy is what detection was read from: DetectedByCandidate, or DetectedByLeader when
	// no node was seen as a candidate before the election (absent without an election either).
	DetectedBy  string   `json:"detected_by,omitempty"`
	ElectMs     *float64 `json:"elect_ms"`
	ClientGapMs *float64 `json:"client_gap_ms"`
	NormalMs    *float64 `json:"normal_ms"`
	// BaselineP99Us is the pre-fault level back-to-normal is measured against.
	BaselineP99Us *float64 `json:"baseline_p99_us,omitempty"`
	Lost          int      `json:"lost"` // probes sent between the fault and back to normal that got no reply
}

// What a failover's detection was read from (FailoverRow.DetectedBy).
const (
	DetectedByCandidate = "candidate" // the first node seen standing
	DetectedByLeader    = "leader"    // none seen standing: the election's own time, an upper bound
)

// FailoverFigures are a failover's figures: report.md's columns and pooled lines, summary.json's
// pooled failover figures, the sweep's failover table and plots, and rig compare are built from them.
var FailoverFigures = []RowFigure[FailoverRow]{
	{Figure: Figure{Key: "detect", Label: "detection", Unit: "ms", Dir: stats.LowerIsBetter, MeanCI: true}, Get: ms(func(r FailoverRow) *float64 { return r.DetectMs })},
	{Figure: Figure{Key: "elect", Label: "election", Unit: "ms", Dir: stats.LowerIsBetter, MeanCI: true}, Get: ms(func(r FailoverRow) *float64 { return r.ElectMs })},
	{Figure: Figure{Key: "client_gap", Label: "client gap", Unit: "ms", Dir: stats.LowerIsBetter, MeanCI: true, Headline: true}, Get: ms(func(r FailoverRow) *float64 { return r.ClientGapMs })},
	{Figure: Figure{Key: "normal", Label: "back to normal", Unit: "ms", Dir: stats.LowerIsBetter, MeanCI: true}, Get: ms(func(r FailoverRow) *float64 { return r.NormalMs })},
}

// failoverRows measures every leader cause of the run (leaderCauses: each event that moves the
// leader, or hits it and may: the events of actions.ShapeFailover, which follows from Moves).
func (d *runData) failoverRows(lead leadership) []FailoverRow {
	causes := leaderCauses(lead)
	rows := []FailoverRow{}
	for i, c := range causes {
		at := d.origin + int64(c.AtS*1e9)
		limit := d.loadEnd
		if i+1 < len(causes) {
			limit = d.origin + int64(causes[i+1].AtS*1e9)
		}
		rows = append(rows, d.failover(c, at, limit, lead.Window))
	}
	return rows
}

// failover measures one cause at at (ns) until limit (the next cause or the end of load); its
// election counts only inside the cause's window w (leader.go), as its attribution does.
func (d *runData) failover(c leaderCause, at, limit int64, w LeaderWindow) FailoverRow {
	row := FailoverRow{AtS: c.AtS, Action: c.Action, From: c.Node}
	elected := int64(-1)
	electBy := limit
	if w.S > 0 {
		electBy = min(limit, at+int64(w.S*1e9))
	}
	oldLost := false // the old leader went down or stopped leading after the fault
	for _, e := range d.events {
		t := e.T.UnixNano()
		if t < at || t >= electBy {
			continue
		}
		if e.Node == c.Node && (e.Phase != nil && e.Phase.To == rundir.PhaseDown || e.Role != nil && e.Role.To != engine.RoleLeader) {
			oldLost = true
		}
		if e.Role == nil {
			continue
		}
		if e.Role.To == engine.RoleCandidate && row.DetectMs == nil {
			row.Candidate, row.DetectMs, row.DetectedBy = e.Node, valPtr(nsToMs(t-at)), DetectedByCandidate
		}
		if e.Role.To == engine.RoleLeader && (e.Node != c.Node || oldLost) {
			row.To, row.ElectMs, elected = e.Node, valPtr(nsToMs(t-at)), t
			if row.DetectMs == nil { // it stood and won between two observations
				row.DetectMs, row.DetectedBy = row.ElectMs, DetectedByLeader
			}
			break
		}
	}
	if elected < 0 || !d.hasProbe {
		return row
	}
	last, first := d.longestSilence(at, elected, limit)
	if last >= 0 && first >= 0 {
		row.ClientGapMs = valPtr(nsToMs(first - last))
	}
	// The pre-fault level: the median of the whole seconds' p99s before the fault.
	base := d.secondP99s(max(at-int64(normalBaselineS*1e9), d.warmupEnd), at)
	if len(base) == 0 || first < 0 {
		return row
	}
	slices.Sort(base)
	level := base[len(base)/2]
	row.BaselineP99Us = valPtr(nsToUs(level))
	bound := int64(float64(level) * (1 + normalMargin))
	normal := int64(-1)
	for from := first; from+int64(1e9) <= limit; from += int64(1e9) {
		if p := d.secondP99s(from, from+int64(1e9)); len(p) == 1 && p[0] <= bound {
			normal = from + int64(1e9)
			break
		}
	}
	end := limit
	if normal >= 0 {
		row.NormalMs = valPtr(nsToMs(normal - at))
		end = normal
	}
	plo, phi := d.probeRange(at, end)
	for _, p := range d.probes[plo:phi] {
		if p.Outcome != rundir.ProbeOK {
			row.Lost++
		}
	}
	return row
}

// longestSilence is the longest silence between two replies (on the client's clock: intended
// send + latency, in the order they arrived) that overlaps [at, elected]: its last reply before
// and first reply after, -1 when there is none. Not simply the replies either side of the
// election's role event, which the engine reports a little after it starts answering (a reply
// that beat the event made a 1 s failover's gap 3.56 ms).
func (d *runData) longestSilence(at, elected, limit int64) (last, first int64) {
	lo, hi := d.probeRange(at-int64(normalBaselineS*1e9), limit)
	var replies []int64
	for _, p := range d.probes[lo:hi] {
		if p.Outcome == rundir.ProbeOK {
			replies = append(replies, p.IntendedNs+p.LatencyNs)
		}
	}
	slices.Sort(replies)
	last, first = -1, -1
	for i := 1; i < len(replies); i++ {
		a, b := replies[i-1], replies[i]
		if a < elected && b > at && (first < 0 || b-a > first-last) {
			last, first = a, b
		}
	}
	return last, first
}

// secondP99s is the p99 of each whole second of probes in [from, to) (intended send time) that
// holds an answered probe, where a second with a lost probe counts as beyond every bound.
func (d *runData) secondP99s(from, to int64) []int64 {
	var out []int64
	for s := from; s+int64(1e9) <= to; s += int64(1e9) {
		lo, hi := d.probeRange(s, s+int64(1e9))
		var lat []int64
		lost := false
		for _, p := range d.probes[lo:hi] {
			if p.Outcome != rundir.ProbeOK {
				lost = true
				continue
			}
			lat = append(lat, p.LatencyNs)
		}
		if len(lat) == 0 {
			continue
		}
		slices.Sort(lat)
		v := percentileNs(lat, 99, 100)
		if lost {
			v = 1<<63 - 1
		}
		out = append(out, v)
	}
	return out
}

// FaultWindow is a stretch of the run that "normal" latency (Summary.Normal) leaves out: a
// snapshot window, a kill (or power loss) until the node is ready again, a partition until its
// heal, a failover until back to normal; each but the snapshot's is extended by the drain after
// it (withDrain: until a probe is answered no slower than the median before it, at most
// drainMax).
type FaultWindow struct {
	What  string  `json:"what"` // snapshot, kill, power_loss, partition, failover
	Node  string  `json:"node,omitempty"`
	FromS float64 `json:"from_s"`
	ToS   float64 `json:"to_s"`
}

// faultLead is how long before a fault its window opens, as a snapshot window does: a probe sent
// just before it is answered only after it.
const faultLead = time.Second

// faultWindows are the windows normal latency leaves out, in time order: the snapshot windows
// and every fault's (the rows summarize built: restarts, failovers; and the partitions).
// The spans are the same windows on the run's clock (ns), which normal latency skips.
func (d *runData) faultWindows(s *Summary) ([]FaultWindow, []span) {
	type win struct {
		FaultWindow
		sp span
	}
	var all []win
	add := func(what, node string, sp span) {
		all = append(all, win{FaultWindow{What: what, Node: node, FromS: d.off(sp.from), ToS: d.off(sp.to)}, sp})
	}
	for _, w := range d.snapWins {
		add(string(actions.ShapeSnapshot), "", w)
	}
	ns := func(s float64) int64 { return d.origin + int64(s*1e9) }
	var faults []span
	var labels [][2]string
	fault := func(what, node string, from, to int64) {
		faults = append(faults, span{from - int64(faultLead), max(from, to)})
		labels = append(labels, [2]string{what, node})
	}
	kills := d.actions(downs)
	for _, r := range s.Restarts {
		// The window is named as the kind that took the node down (a power loss's kill events).
		var what string
		for _, k := range kills {
			if k.Node == r.Node && d.off(k.T.UnixNano()) == r.KillS {
				what, _, _ = d.kinds().Down(k)
			}
		}
		end := ns(r.KillS)
		switch {
		case r.ReadyS != nil:
			end = ns(*r.ReadyS)
		case r.RelaunchS != nil: // never ready again: out until the end of load
			end = d.loadEnd
		}
		fault(what, r.Node, ns(r.KillS), end)
	}
	for _, r := range s.Failovers {
		end := ns(r.AtS)
		switch {
		case r.NormalMs != nil:
			end += int64(*r.NormalMs * 1e6)
		case r.ElectMs != nil:
			end += int64(*r.ElectMs * 1e6)
		default: // no new leader: out until the end of load
			end = d.loadEnd
		}
		fault(string(actions.ShapeFailover), r.From, ns(r.AtS), end)
	}
	// A kind that takes nodes out of the majority until an event of its own ends it (a
	// partition until its heal) is a fault for its whole window.
	for _, name := range actions.Names() {
		k, _ := actions.New(name)
		_, spans := k.(actions.Spanner)
		_, downs := k.(actions.Downer)
		if !spans || !downs {
			continue
		}
		for _, w := range actions.Windows(name, d.events) {
			end := d.loadEnd
			if w.End != nil {
				end = w.End.T.UnixNano()
			}
			fault(name, w.Start.Node, w.Start.T.UnixNano(), end)
		}
	}
	for i, sp := range d.withDrain(faults) {
		add(labels[i][0], labels[i][1], span{sp.from, min(sp.to, max(d.loadEnd, sp.from))})
	}
	slices.SortStableFunc(all, func(a, b win) int { return cmp.Compare(a.sp.from, b.sp.from) })
	wins, spans := make([]FaultWindow, len(all)), make([]span, len(all))
	for i, w := range all {
		wins[i], spans[i] = w.FaultWindow, w.sp
	}
	return wins, spans
}

// normalSection is report.md's normal latency: its figures and the windows it leaves out.
func normalSection(s *Summary) string {
	var b strings.Builder
	n := s.Normal
	fmt.Fprintf(&b, "Normal latency (post-warm-up probes outside every snapshot and fault window): n = %d, lost %d, p50 %s, p99 %s, max %s.",
		n.N, n.Lost, usCell(n.P50Us), pctCell(n.P99Us, n.N, minNForP99), usCell(n.MaxUs))
	if len(s.NormalLeftOut) == 0 {
		b.WriteString(" No window was left out.\n\n")
		return b.String()
	}
	b.WriteString(" Left out: ")
	for i, w := range s.NormalLeftOut {
		if i > 0 {
			b.WriteString(", ")
		}
		what := w.What
		if w.Node != "" {
			what += " " + w.Node
		}
		fmt.Fprintf(&b, "%s [%s – %s]", what, fmtS(w.FromS), fmtS(w.ToS))
	}
	b.WriteString(" (a snapshot from its action − 1 s to the last node finished + 1 s; a kill or power loss from 1 s before it " +
		"until the node is ready again, a partition until its heal, a failover until back to normal, each then until a probe is " +
		"answered no slower than the median of the 5 s before it, at most 10 s more).\n\n")
	return b.String()
}

// lateOutsideFaults counts the load generator's late sends (outside its holds) that were due in
// a whole second clear of every fault window (snapshots are not faults), and their share of the
// post-warm-up probes due in those seconds: the late-probe share outside the outage. Nil when the timeline has no per-second late counts (an older load generator)
// while the run had late sends.
func (d *runData) lateOutsideFaults(tl []rundir.ConnSecond, wins []FaultWindow) (*int64, *float64) {
	var faults []span
	for _, w := range wins {
		if w.What != string(actions.ShapeSnapshot) {
			faults = append(faults, span{d.origin + int64(w.FromS*1e9), d.origin + int64(w.ToS*1e9)})
		}
	}
	clear := func(sec int64) bool {
		for _, f := range faults {
			if sec < f.to && sec+int64(time.Second) > f.from {
				return false
			}
		}
		return sec >= d.warmupEnd && sec+int64(time.Second) <= d.loadEnd
	}
	var late, counted int64
	for _, t := range tl {
		counted += t.LateConnected
		if sec := t.At.UnixNano(); clear(sec) {
			late += t.LateConnected
		}
	}
	if counted == 0 && d.man.Loadgen != nil && d.man.Loadgen.SendLag.LateConnected > 0 {
		return nil, nil
	}
	var due int64
	first := d.warmupEnd - d.warmupEnd%int64(time.Second)
	for sec := first; sec < d.loadEnd; sec += int64(time.Second) {
		if clear(sec) {
			lo, hi := d.probeRange(sec, sec+int64(time.Second))
			due += int64(hi - lo)
		}
	}
	pct := 0.0
	if due > 0 {
		pct = math.Round(1e4*float64(late)/float64(due)) / 100
	}
	return &late, &pct
}
