package analysis

import (
	"math"
	"slices"

	"github.com/rig-dev/rig/rundir"
)

// The engines' own phases (rundir.PhaseKinds, in <node>/pauses.ndjson: a snapshot's capture and
// persist, a relaunched node's restore, joining, replay and catch-up) as causes. A phase is
// exact evidence of what the engine was doing, but not of what waited for it, so a phase covers
// an interval only where it blocks what the interval measures:
//
//   - a snapshot window (the action until every node reported its snapshot): the snapshot
//     phases of any node, which the window waits for;
//   - a restart window (kill until ready again): the relaunched node's own phases that kept it
//     from ready (Blocks ready), its time down between the kill and the relaunch the timeline
//     asked for (the run's own kill and relaunch events), and its start from the relaunch to
//     its first phase;
//   - an excursion, a failover or a burst window (client latency): only a phase that blocked the
//     apply path (Blocks apply) of the node leading at the time, since a command's answer waits
//     for the leader's apply and for no follower's. A follower's take, a persist beside the apply
//     path and a relaunched node's catch-up cover none of it.
//
// Every phase under way is still listed in an interval's table (counted, as other processes' CPU
// is), so the report shows what ran beside the interval without claiming it.

// SourceTimeline is the run's own events (the controller's kill and relaunch), the source of a
// restart window's time down.
const SourceTimeline = "timeline"

// causeDown is a restart window's time between the kill and the relaunch; causeStart its time
// from the relaunch to the engine's first phase of the launch (process start: exec, runtime,
// config), where the engine writes phases.
const (
	causeDown  = "down"
	causeStart = "start"
)

// phaseScope is what an interval measures, for the phases that may cover it.
type phaseScope struct {
	kind string // a WindowKind, or KindExcursion
	node string // restart: the node relaunched
	// leader is the node leading at a time (unix ns); "" where no event says.
	leader func(at int64) string
	down   span // restart: [kill, relaunch]; zero where none
	// downs are each node's restarts, kill until ready: a node that acknowledges no commit
	// (commit.go).
	downs map[string][]span
}

var snapshotPhases = []rundir.InsideKind{rundir.PhaseSnapshotCapture, rundir.PhaseSnapshotPersist, rundir.PhaseLogCompaction}

// phaseBeside is a phase's row detail where it does not block what the interval measures.
const phaseBeside = "beside what this measures, not covering"

// covers says whether a phase of node (its kind, what it blocks, its start) blocks what the
// scope's interval measures.
func (sc phaseScope) covers(node string, kind rundir.InsideKind, blocks string, at int64) bool {
	switch sc.kind {
	case string(WindowSnapshot):
		return slices.Contains(snapshotPhases, kind)
	case string(WindowRestart):
		return node == sc.node && blocks == rundir.BlocksReady
	default:
		return blocks == rundir.BlocksApply && sc.leader != nil && sc.leader(at) == node
	}
}

// beside says why a span that holds up one thing (its blocks: a phase's apply or ready, a log
// sync's commit, the load generator's probes) covers nothing of an interval of this scope, which
// measures something else; "" where it may cover (a commit sync then only where it held the
// commit: commitHeld).
func (sc phaseScope) beside(node string, sp causeSpan) string {
	switch {
	case sp.isPhase() && !sc.covers(node, rundir.InsideKind(sp.cause), sp.blocks, sp.at),
		sp.isCommit() && !sc.commitMeasured(),
		sp.blocks == blocksProbes && !sc.measuresProbes():
		return phaseBeside
	}
	return ""
}

// leaderAt is the node leading at a time, from the summary's leadership (role events).
func (d *runData) leaderAt(s *Summary) func(int64) string {
	return func(at int64) string {
		l := s.LeaderAtLoadStart
		for _, c := range s.LeaderChanges {
			if d.origin+int64(math.Round(c.AtS*1e9)) > at {
				break
			}
			l = c.Node
		}
		return l
	}
}

// windowScope is what window w measures; restart windows are s.Restarts' in order.
func (d *runData) windowScope(s *Summary, w TimeWindow) phaseScope {
	sc := phaseScope{kind: string(w.Kind), node: w.Node, leader: d.leaderAt(s), downs: d.restartDowns(s)}
	if w.Kind == WindowRestart && w.Index-1 < len(s.Restarts) {
		if r := s.Restarts[w.Index-1]; r.RelaunchS != nil {
			sc.down = span{d.origin + int64(math.Round(r.KillS*1e9)), d.origin + int64(math.Round(*r.RelaunchS*1e9))}
		}
	}
	return sc
}

// excursionScope is what an excursion measures: client latency.
func (d *runData) excursionScope(s *Summary) phaseScope {
	return phaseScope{kind: KindExcursion, leader: d.leaderAt(s), downs: d.restartDowns(s)}
}

// sources are the interval's sources with the timeline where it covers a time down.
func (sc phaseScope) sources(names []string) []string {
	if sc.down.to > sc.down.from {
		return slices.Concat(names, []string{SourceTimeline})
	}
	return names
}

// timelineRows adds a restart window's time down (the timeline's kill until its relaunch) and
// its start (the relaunch until the engine's first phase of the launch: exec, runtime, config,
// the contract's phase starting) as rows of [from, to] (get), and returns what they cover. They
// say where the window's time went; they name no cause (the kill is the window's own action).
func (d *runData) timelineRows(st *spanStream, sc phaseScope, from, to int64, get func(rowKey) *rowAcc) []wspan {
	if sc.down.to <= sc.down.from {
		return nil
	}
	var cover []wspan
	row := func(cause string, s span, detail string) {
		c := span{max(s.from, from), min(s.to, to)}
		if c.to <= c.from {
			return
		}
		a := get(rowKey{node: sc.node, cause: cause, source: SourceTimeline})
		a.count++
		a.ns += float64(c.to - c.from)
		a.details[detail]++
		cover = append(cover, whole(c))
	}
	row(causeDown, sc.down, "killed, relaunched after "+fmtMs(nsToMs(sc.down.to-sc.down.from)))
	ss := st.byNode[sc.node]
	if i := slices.IndexFunc(ss, func(c causeSpan) bool {
		return c.isPhase() && c.at >= sc.down.to && c.at <= to && c.blocks == rundir.BlocksReady
	}); i >= 0 {
		row(causeStart, span{sc.down.to, ss[i].at}, "relaunched, starting until its "+ss[i].cause+" began")
	}
	return cover
}

// phasesNote qualifies "the engines' own time is not in these tables" where their phases are.
func phasesNote(src []string) string {
	if slices.Contains(src, rundir.SourceEnginePhases) {
		return " beyond their phases (" + rundir.SourceEnginePhases + ")"
	}
	return ""
}
