package analysis

import (
	"fmt"
	"slices"
	"time"

	"github.com/rig-dev/rig/rundir"
)

// Periodicity on causes: a cause series (other processes' CPU, an engine process's CPU, GC
// pauses, an engine's own stalls) whose onsets repeat at a steady gap is periodic with its
// period whether or not its excursions are. A busy loop of 300 ms every 3 s makes excursions only
// where it meets a probe's path, irregularly, but its onsets keep the beat.

// CausePeriodic is one cause series whose onsets repeat (summary.json's
// excursions.cause_periodic).
type CausePeriodic struct {
	// Cause is a CauseKind (host_cpu, gc, or an inside stall's: force, safepoint, sched_delay) or
	// process_cpu (an engine process's CPU over its run median).
	Cause   string  `json:"cause"`
	Node    string  `json:"node"`   // HostNode for other processes' CPU on the local target
	Series  string  `json:"series"` // what the onsets are of
	PeriodS float64 `json:"period_s"`
	Count   int     `json:"count"`  // onsets in the periodic chain
	Onsets  int     `json:"onsets"` // every onset of the series between warm-up end and load end
	FirstS  float64 `json:"first_s"`
}

const (
	causeProcessCPU = "process_cpu"
	// causePeriodMaxOnsets: a series with more onsets than this is continuous, not a beat (and
	// the chain search is quadratic in it).
	causePeriodMaxOnsets = 400
	// stallOnsetGap: a span starting within this of the previous one's end continues it, one
	// onset (the threads of one collection, a force after a write).
	stallOnsetGap = int64(50 * time.Millisecond)
)

// causeSeries is one cause's onsets (unix ns), known to within tol.
type causeSeries struct {
	cause, node, what string
	onsets            []int64
	tol               int64
}

// causePeriodic finds the cause series whose onsets repeat: a chain (periodicTol, within the
// series' own resolution) holding at least periodMinRun onsets, periodMinCover of the beats that
// fit in the measured window and periodMinCover of the series' own onsets, so a dense series
// with a chance chain inside it is not one.
func (d *runData) causePeriodic(st *spanStream) []CausePeriodic {
	series := d.hostSeriesOnsets(st.host)
	for _, node := range st.nodes {
		series = append(series, stallSeries(node, st.byNode[node])...)
	}
	var out []CausePeriodic
	for _, s := range series {
		var on []int64
		for _, t := range s.onsets {
			if (d.warmupEnd == 0 || t >= d.warmupEnd) && (d.loadEnd == 0 || t <= d.loadEnd) {
				on = append(on, t)
			}
		}
		if len(on) < periodMinRun || len(on) > causePeriodMaxOnsets {
			continue
		}
		slices.Sort(on)
		found, _ := d.periodicTol(on, s.tol, func(int) (float64, bool) { return 0, false })
		for _, p := range found {
			if float64(p.Count) < periodMinCover*float64(len(on)) {
				continue
			}
			out = append(out, CausePeriodic{Cause: s.cause, Node: s.node, Series: s.what, PeriodS: p.PeriodS, Count: p.Count, Onsets: len(on), FirstS: p.FirstS})
		}
	}
	return out
}

// hostSeriesOnsets are the OS samples' series: other processes' CPU over the host thresholds
// (once for the machine on the local target), and each engine process's CPU at least
// hostOthersJump over its run median. An onset is the start of the first sample of a run of
// such samples; it is known to within the samples' interval.
func (d *runData) hostSeriesOnsets(h *hostSeries) []causeSeries {
	var out []causeSeries
	for i, node := range sortedKeys(h.byNode) {
		ss := h.byNode[node]
		var tol int64
		for _, smp := range ss {
			tol = max(tol, int64(smp.Interval*1e9))
		}
		onsets := func(over func(rundir.Sample) bool) []int64 {
			var on []int64
			was := false
			for _, smp := range ss {
				is := over(smp)
				if is && !was {
					on = append(on, smp.Time.UnixNano()-int64(smp.Interval*1e9))
				}
				was = is
			}
			return on
		}
		if !h.local || i == 0 {
			machine := node
			if h.local {
				machine = HostNode
			}
			out = append(out, causeSeries{cause: string(CauseHostCPU), node: machine, what: "other processes' CPU over the host thresholds", tol: tol,
				onsets: onsets(func(smp rundir.Sample) bool { return h.othersCause(node, smp) })})
		}
		cpu := map[string][]float64{}
		for _, smp := range ss {
			for _, p := range smp.Procs {
				cpu[p.Comm] = append(cpu[p.Comm], p.CPUPct)
			}
		}
		for _, comm := range sortedKeys(cpu) {
			v := slices.Sorted(slices.Values(cpu[comm]))
			med := v[len(v)/2]
			out = append(out, causeSeries{cause: causeProcessCPU, node: node, what: fmt.Sprintf("process %s's CPU at least %.0f %% of a core over its run median %.0f %%", comm, hostOthersJump, med), tol: tol,
				onsets: onsets(func(smp rundir.Sample) bool {
					i := slices.IndexFunc(smp.Procs, func(p rundir.SampleProc) bool { return p.Comm == comm })
					return i >= 0 && smp.Procs[i].CPUPct >= med+hostOthersJump
				})})
		}
	}
	return out
}

// stallSeries are a node's stalls (its cause spans, sorted by start) by cause and source; the
// sampled levels (run-queue waits, pressure stalls, OS samples: hostSeriesOnsets) are left out:
// they are levels, not events with onsets.
func stallSeries(node string, ss []causeSpan) []causeSeries {
	type key struct {
		kind CauseKind
		src  string
	}
	byKey := map[key]*causeSeries{}
	ends := map[key]int64{}
	var order []key
	for _, sp := range ss {
		// An engine's phases are the timeline's own beat (a snapshot every N s), not a cause
		// found repeating.
		if sp.names == "" || sp.level || sp.isPhase() {
			continue
		}
		k := key{sp.names, sp.source}
		s := byKey[k]
		if s == nil {
			s = &causeSeries{cause: string(sp.names), node: node, what: sp.source + " " + string(sp.names) + " spans", tol: int64(periodTolMin)}
			byKey[k] = s
			order = append(order, k)
		} else if sp.at <= ends[k]+stallOnsetGap {
			ends[k] = max(ends[k], sp.at+sp.dur)
			continue
		}
		s.onsets = append(s.onsets, sp.at)
		ends[k] = sp.at + sp.dur
	}
	out := make([]causeSeries, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	return out
}

// markPeriodic gives each cause of an excursion the period of its cause's series, if periodic.
func markPeriodic(causes []Cause, ps []CausePeriodic) {
	for i := range causes {
		c := &causes[i]
		if j := slices.IndexFunc(ps, func(p CausePeriodic) bool {
			return p.Cause == string(c.Kind) && (p.Node == c.Node || p.Node == HostNode)
		}); j >= 0 {
			c.PeriodS = ps[j].PeriodS
		}
	}
}
