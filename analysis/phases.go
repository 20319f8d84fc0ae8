package analysis

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

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
}

var snapshotPhases = []rundir.InsideKind{rundir.PhaseSnapshotCapture, rundir.PhaseSnapshotPersist, rundir.PhaseLogCompaction}

// covers says whether phase sp of node blocks what the scope's interval measures.
func (sc phaseScope) covers(node string, sp rundir.InsideSpan) bool {
	switch sc.kind {
	case string(WindowSnapshot):
		return slices.Contains(snapshotPhases, sp.Kind)
	case string(WindowRestart):
		return node == sc.node && sp.Blocks == rundir.BlocksReady
	default:
		return sp.Blocks == rundir.BlocksApply && sc.leader != nil && sc.leader(sp.AtNs) == node
	}
}

// takePhases moves the engines' phase spans out of the always-on spans (they are judged by
// phaseScope, not as stalls) and names their source.
func (ts *timeSources) takePhases(spans map[string][]rundir.InsideSpan) {
	ts.phases = map[string][]rundir.InsideSpan{}
	for n, ss := range spans {
		var ph []rundir.InsideSpan
		spans[n] = slices.DeleteFunc(ss, func(s rundir.InsideSpan) bool {
			if slices.Contains(rundir.PhaseKinds, s.Kind) {
				ph = append(ph, s)
				return true
			}
			return false
		})
		if len(ph) > 0 {
			slices.SortStableFunc(ph, func(a, b rundir.InsideSpan) int { return cmp.Compare(a.AtNs, b.AtNs) })
			ts.phases[n] = ph
		}
	}
	if len(ts.phases) > 0 {
		ts.names = append(ts.names, rundir.SourceEnginePhases)
	}
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
	sc := phaseScope{kind: string(w.Kind), node: w.Node, leader: d.leaderAt(s)}
	if w.Kind == WindowRestart && w.Index-1 < len(s.Restarts) {
		if r := s.Restarts[w.Index-1]; r.RelaunchS != nil {
			sc.down = span{d.origin + int64(math.Round(r.KillS*1e9)), d.origin + int64(math.Round(*r.RelaunchS*1e9))}
		}
	}
	return sc
}

// excursionScope is what an excursion measures: client latency.
func (d *runData) excursionScope(s *Summary) phaseScope {
	return phaseScope{kind: KindExcursion, leader: d.leaderAt(s)}
}

// sources are the interval's sources with the timeline where it covers a time down.
func (sc phaseScope) sources(names []string) []string {
	if sc.down.to > sc.down.from {
		return append(names, SourceTimeline)
	}
	return names
}

// phases adds the phases under way in the interval as rows, covering where the scope says.
func (t *windowTally) phases(ts *timeSources, sc phaseScope) {
	for _, node := range sortedKeys(ts.phases) {
		for _, sp := range spansOver(ts.phases[node], t.from, t.to) {
			c, ok := t.clip(sp.AtNs, sp.DurNs)
			if !ok {
				continue
			}
			covers := sc.covers(node, sp)
			var thread string
			if sp.Blocks == rundir.BlocksApply {
				thread = "apply path"
			}
			a := t.get(rowKey{node: node, thread: thread, cause: string(sp.Kind), source: sp.Source})
			a.count++
			a.ns += float64(c.to - c.from)
			if !covers {
				a.details["beside what this measures, not covering"]++
			} else if sp.Detail != "" {
				a.details[sp.Detail]++
			}
			if covers && c.to > c.from {
				t.cover = append(t.cover, whole(c))
			}
		}
	}
	if sc.down.to <= sc.down.from {
		return
	}
	timeline := func(cause string, s span, detail string) {
		if c, ok := t.clip(s.from, s.to-s.from); ok && c.to > c.from {
			a := t.get(rowKey{node: sc.node, cause: cause, source: SourceTimeline})
			a.count++
			a.ns += float64(c.to - c.from)
			a.details[detail]++
			t.cover = append(t.cover, whole(c))
		}
	}
	timeline(causeDown, sc.down, "killed, relaunched after "+fmtMs(nsToMs(sc.down.to-sc.down.from)))
	// From the relaunch to the engine's first phase of the launch, the process was starting
	// (exec, runtime, config): the contract's phase starting, before anything was loaded.
	ph := ts.phases[sc.node]
	if i := slices.IndexFunc(ph, func(s rundir.InsideSpan) bool { return s.AtNs >= sc.down.to && s.Blocks == rundir.BlocksReady }); i >= 0 {
		timeline(causeStart, span{sc.down.to, ph[i].AtNs}, "relaunched, starting until its "+string(ph[i].Kind)+" began")
	}
}

// phaseCauses names the phases that blocked the leader's apply over an excursion [from, to],
// one cause per node and kind whose spans cover causeCoverShare of it, with the spans they
// cover.
func (d *runData) phaseCauses(ts *timeSources, sc phaseScope, from, to int64) ([]Cause, []wspan) {
	length := float64(to - from)
	if length <= 0 {
		return nil, nil
	}
	var out []Cause
	var cover []wspan
	for _, node := range sortedKeys(ts.phases) {
		byKind := map[rundir.InsideKind][]rundir.InsideSpan{}
		var kinds []rundir.InsideKind
		for _, sp := range spansOver(ts.phases[node], from, to) {
			if sp.AtNs+sp.DurNs <= from || !sc.covers(node, sp) {
				continue
			}
			if byKind[sp.Kind] == nil {
				kinds = append(kinds, sp.Kind)
			}
			byKind[sp.Kind] = append(byKind[sp.Kind], sp)
		}
		for _, k := range kinds {
			var ws []wspan
			var what []string
			for _, sp := range byKind[k] {
				ws = append(ws, whole(span{max(sp.AtNs, from), min(sp.AtNs+sp.DurNs, to)}))
				what = append(what, fmt.Sprintf("%s ms from %s (%s)", fmtMsBare(sp.DurNs), fmtS3(d.off(sp.AtNs)), sp.Detail))
			}
			covered := coverNs(ws)
			if float64(covered) < causeCoverShare*length {
				continue
			}
			out = append(out, Cause{Kind: CauseKind(k), Node: node, AtS: d.off(byKind[k][0].AtNs),
				Evidence: fmt.Sprintf("%s: %s covering %s ms (%.0f %%) of it, the leader's apply blocked: %s", rundir.SourceEnginePhases, k,
					fmtMsBare(covered), 100*float64(covered)/length, strings.Join(what, "; "))})
			cover = append(cover, ws...)
		}
	}
	return out, cover
}

// phasesNote qualifies "the engines' own time is not in these tables" where their phases are.
func phasesNote(src []string) string {
	if slices.Contains(src, rundir.SourceEnginePhases) {
		return " beyond their phases (" + rundir.SourceEnginePhases + ")"
	}
	return ""
}
