package analysis

import (
	"cmp"
	"fmt"
	"math"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/rundir"
)

// Where the time went (docs/results.md): every latency excursion of the run, not only the slowest
// probe, with the causes the run folder already records: timeline actions and restarts under
// way, GC pauses and engine log lines near it, and host causes from the OS samples (another
// process's CPU, the rig agents' own CPU, disk writeback). Excursions that repeat at a steady
// gap are reported as a periodic series with its period.

// Excursions is summary.json's "excursions".
type Excursions struct {
	// ThresholdMs: a probe is slow when it waited at least this long (10× the run's p50, ≥ 1 ms).
	ThresholdMs float64 `json:"threshold_ms"`
	Count       int     `json:"count"`       // every excursion found
	Unexplained int     `json:"unexplained"` // of Count, those with no cause
	// List is the excursions in time order, the first excursionMaxRows of them.
	List     []Excursion `json:"list"`
	Periodic []Periodic  `json:"periodic,omitempty"`
	// CausePeriodic: the causes whose onsets repeat at a steady gap, whether or not their
	// excursions do (causes.go).
	CausePeriodic []CausePeriodic `json:"cause_periodic,omitempty"`
}

// Excursion is one stretch of slow probes, merged while each began before the previous ones
// were answered (plus excursionMergeGap).
type Excursion struct {
	StartS float64 `json:"start_s"`   // first slow probe's intended send time, from load start
	EndS   float64 `json:"end_s"`     // last answer (or give-up) of the stretch
	PeakS  float64 `json:"peak_at_s"` // the slowest probe's intended send time
	PeakMs float64 `json:"peak_ms"`
	Probes int     `json:"probes"` // slow probes in it, lost ones included
	Lost   int     `json:"lost"`
	Causes []Cause `json:"causes"` // empty: unexplained
	// CoveredMs is the time of [StartS, EndS] the named causes' spans cover (GC pauses, the
	// engines' stalls, run-queue waits, fsyncs, pressure stalls, the OS samples' agent CPU and
	// writeback); the rest is unexplained even where a cause is named. Timeline actions and
	// restarts cover none of it: they say what was under way, not where the time went.
	CoveredMs float64 `json:"covered_ms"`
	PeriodS   float64 `json:"period_s,omitempty"`
	// LogLines: per node, engine log lines stamped from 100 ms before to 100 ms after (context,
	// not a cause).
	LogLines map[string][]string `json:"log_lines,omitempty"`
	// Where is where its time went, per node and thread, over [StartS, EndS]: the same table as
	// a window's (windows.go), with the time no cause covers.
	Where *WhereTime `json:"where,omitempty"`
}

// Cause is one thing the run recorded as under way during an excursion.
type Cause struct {
	Kind     CauseKind `json:"kind"`
	Node     string    `json:"node,omitempty"`
	AtS      float64   `json:"at_s"` // when it started, from load start
	Evidence string    `json:"evidence"`
	// PeriodS: the cause's onsets over the run repeat at this period (Excursions.CausePeriodic).
	PeriodS float64 `json:"period_s,omitempty"`
}

// CauseKind names a cause; the names are summary.json's and stable. Besides the kinds below, an
// engine's own stall (a span of the cause stream, spans.go, from its recording or its pause
// records) is named by its rundir.InsideKind (force, safepoint, sched_delay), except that the GC
// kinds (gc_pause, stw, gc_assist) are `gc` (insideStall); the disk model's fsyncs
// (<node>/disk-syncs.ndjson) are `force` too, their evidence starting "disk_model:".
type CauseKind string

const (
	CauseAction    CauseKind = "action"    // a timeline action (snapshot, kill, failover, …)
	CauseRestart   CauseKind = "restart"   // a node between kill and ready again
	CauseGC        CauseKind = "gc"        // a GC pause overlapping it: a JVM's GC log, an inside span, a gc action's answer
	CauseHostCPU   CauseKind = "host_cpu"  // CPU taken by processes other than the engines and agents
	CauseAgentCPU  CauseKind = "agent_cpu" // the rig agent's own CPU
	CauseWriteback CauseKind = "writeback" // the kernel writing back dirty pages, or a saturated disk
	// Pressure stalls (psi.go): some task stalled on the node's CPUs, I/O or memory.
	CausePSICPU    CauseKind = "psi_cpu"
	CausePSIIO     CauseKind = "psi_io"
	CausePSIMemory CauseKind = "psi_memory"
)

// Periodic is a series of excursions at a steady gap.
type Periodic struct {
	PeriodS  float64 `json:"period_s"`
	Count    int     `json:"count"`   // excursions in the series
	FirstS   float64 `json:"first_s"` // the first of them, from load start
	MedianMs float64 `json:"median_peak_ms"`
	// Unexplained: how many of the series have no cause.
	Unexplained int `json:"unexplained"`
}

const (
	excursionMinMs    = spikeMinMs
	excursionOverP50  = spikeOverP50
	excursionMergeGap = 50 * time.Millisecond
	excursionMaxRows  = 200
	excursionLogRows  = 4
	// report.md shows the tables of where the time went of this many excursions, the largest
	// peaks, with this many rows each.
	excursionReportTables = 5
	excursionReportRows   = 8

	// Host causes, in percent of one core over a sample interval.
	hostOthersMinPct = 50.0 // other processes took at least half a core …
	hostBusyFrac     = 0.9  // … on a machine at least this busy, or …
	hostOthersJump   = 50.0 // … at least half a core more than their run median
	agentMinPct      = 50.0
	writebackMin     = 256 // pages (1 MiB at 4 KiB) under writeback in an interval
	diskBusyPct      = 90.0

	// Periodicity: a gap matches the period within max(periodTolFrac × period, periodTolMin); a
	// series has at least periodMinRun excursions and at least periodMinCover of the beats that
	// fit in the measured window, so chance alignments of random excursions are not one.
	periodTolFrac  = 0.015
	periodTolMin   = 20 * time.Millisecond
	periodMinRun   = 5
	periodMinCover = 0.5
)

// excursions finds, merges and attributes every excursion of the run.
func (d *runData) excursions(s *Summary, st *spanStream) *Excursions {
	if !d.hasProbe || s.Probes.P50Us == nil {
		return nil
	}
	thr := int64(math.Max(excursionMinMs*1e6, excursionOverP50**s.Probes.P50Us*1e3))
	ex := &Excursions{ThresholdMs: nsToMs(thr), List: []Excursion{}}
	type stretch struct {
		from, to, peakAt, peak int64
		n, lost                int
	}
	var all []stretch
	for i := d.firstPost; i < len(d.probes); i++ {
		p := d.probes[i]
		if p.LatencyNs < thr {
			continue
		}
		end := p.IntendedNs + p.LatencyNs
		if k := len(all) - 1; k >= 0 && p.IntendedNs <= all[k].to+int64(excursionMergeGap) {
			c := &all[k]
			c.to = max(c.to, end)
			c.n++
			if p.Outcome != rundir.ProbeOK {
				c.lost++
			}
			if p.LatencyNs > c.peak {
				c.peak, c.peakAt = p.LatencyNs, p.IntendedNs
			}
			continue
		}
		x := stretch{from: p.IntendedNs, to: end, peakAt: p.IntendedNs, peak: p.LatencyNs, n: 1}
		if p.Outcome != rundir.ProbeOK {
			x.lost = 1
		}
		all = append(all, x)
	}
	ex.Count = len(all)
	starts := make([]int64, 0, len(all))
	causes := make([][]Cause, len(all))
	judged := make([]judgement, len(all))
	scope := d.excursionScope(s)
	for i, x := range all {
		judged[i] = d.whereTime(st, x.from, x.to, scope)
		causes[i] = append(d.causesIn(x.from, x.to, s), judged[i].causes...)
		if len(causes[i]) == 0 {
			ex.Unexplained++
		}
		starts = append(starts, x.from)
	}
	var periodOf []float64
	ex.Periodic, periodOf = d.periodic(starts, func(i int) (float64, bool) { return nsToMs(all[i].peak), len(causes[i]) == 0 })
	ex.CausePeriodic = d.causePeriodic(st)
	for i := range causes {
		markPeriodic(causes[i], ex.CausePeriodic)
	}
	for i, x := range all {
		if i == excursionMaxRows {
			break
		}
		e := Excursion{StartS: d.off(x.from), EndS: d.off(x.to), PeakS: d.off(x.peakAt), PeakMs: nsToMs(x.peak),
			Probes: x.n, Lost: x.lost, Causes: causes[i], CoveredMs: nsToMs(judged[i].coveredNs)}
		if e.Causes == nil {
			e.Causes = []Cause{}
		}
		e.PeriodS = periodOf[i]
		e.Where = &judged[i].where
		for _, node := range d.nodes {
			lines := d.engineLogLines(node, x.from-int64(spikeLogMargin), x.to+int64(spikeLogMargin))
			if len(lines) > excursionLogRows {
				lines = lines[:excursionLogRows]
			}
			if len(lines) > 0 {
				if e.LogLines == nil {
					e.LogLines = map[string][]string{}
				}
				e.LogLines[node] = lines
			}
		}
		ex.List = append(ex.List, e)
	}
	return ex
}

// actionEnds are, per event of d.events, when the effect of an action event ends: at the same
// node's next event that ends it (actions.EndEvent), never while none came, or at the event
// itself for an action with no lasting effect. Computed once, in one pass, for every excursion.
func (d *runData) actionEnds() []int64 {
	if d.ends != nil {
		return d.ends
	}
	d.ends = make([]int64, len(d.events))
	type key struct {
		node string
		end  rundir.ActionName
	}
	open := map[key][]int{} // actions under way, by the event that ends them
	for i, e := range d.events {
		if e.Action == nil {
			continue
		}
		t := e.T.UnixNano()
		d.ends[i] = t
		k := key{e.Node, e.Action.Name}
		for _, j := range open[k] {
			d.ends[j] = t
		}
		delete(open, k)
		if end, ok := actions.EndEvent(e.Action.Name); ok {
			d.ends[i] = math.MaxInt64 - int64(actionExplains)
			open[key{e.Node, end}] = append(open[key{e.Node, end}], i)
		}
	}
	return d.ends
}

// causesIn is what the timeline says was under way over [from, to]:
// actions up to actionExplains before it (an action whose effect lasts, actions.Spanner, up to
// actionExplains after the event that ends it), snapshot windows and restarts from kill to
// ready. It is the one owner of that judgement, for the slowest probe's spike and for every
// excursion.
func (d *runData) causesIn(from, to int64, s *Summary) []Cause {
	var out []Cause
	ends := d.actionEnds()
	for i, e := range d.events {
		if e.Action == nil {
			continue
		}
		if t := e.T.UnixNano(); t <= to && ends[i]+int64(actionExplains) >= from {
			out = append(out, Cause{Kind: CauseAction, Node: e.Node, AtS: d.off(t), Evidence: string(e.Action.Name) + " action"})
		}
	}
	for _, w := range d.snapWins {
		if w.from <= to && w.to >= from && !slices.ContainsFunc(out, func(c Cause) bool { return c.Kind == CauseAction }) {
			out = append(out, Cause{Kind: CauseAction, AtS: d.off(w.from), Evidence: "snapshot window"})
		}
	}
	at := d.off(from)
	for _, r := range s.Restarts {
		end := math.Inf(1)
		if r.ReadyS != nil {
			end = *r.ReadyS
		}
		if d.off(to) >= r.KillS && at <= end {
			out = append(out, Cause{Kind: CauseRestart, Node: r.Node, AtS: r.KillS, Evidence: "between kill and ready"})
		}
	}
	return out
}

// hostSeries is every node's OS samples, for host causes (readHostSource) and their onsets
// (causes.go).
type hostSeries struct {
	byNode map[string][]rundir.Sample
	// othersMedian: per node, the median over the run of CPU outside the engines and agents.
	othersMedian map[string]float64
	local        bool // every node is this machine: the run's own processes are all nodes'
}

func (d *runData) hostSamples() *hostSeries {
	h := &hostSeries{byNode: map[string][]rundir.Sample{}, othersMedian: map[string]float64{}, local: d.man.Target == "local"}
	for _, f := range d.glob(rundir.SamplesGlob) {
		node := path.Base(path.Dir(path.Dir(f)))
		ss := d.samples(f)
		h.byNode[node] = append(h.byNode[node], ss...)
	}
	for node, ss := range h.byNode {
		sort.Slice(ss, func(i, j int) bool { return ss[i].Time.Before(ss[j].Time) })
		var o []float64
		for _, smp := range ss {
			if smp.Host != nil {
				o = append(o, h.others(smp))
			}
		}
		if len(o) > 0 {
			slices.Sort(o)
			h.othersMedian[node] = o[len(o)/2]
		}
	}
	return h
}

// own is the CPU of the run's own processes in the interval ending at t: the sample's engines
// and agent, and on the local target every node's (the same machine).
func (h *hostSeries) own(smp rundir.Sample) float64 {
	sum := func(x rundir.Sample) float64 {
		v := x.Agent.CPUPct
		for _, p := range x.Procs {
			v += p.CPUPct
		}
		return v
	}
	if !h.local {
		return sum(smp)
	}
	var v float64
	for _, ss := range h.byNode {
		i := sort.Search(len(ss), func(i int) bool { return !ss[i].Time.Before(smp.Time) })
		// the other node's sample closest in time to this one
		best := -1
		for _, j := range []int{i - 1, i} {
			if j >= 0 && j < len(ss) && (best < 0 || absDur(ss[j].Time.Sub(smp.Time)) < absDur(ss[best].Time.Sub(smp.Time))) {
				best = j
			}
		}
		if best >= 0 && absDur(ss[best].Time.Sub(smp.Time)) <= time.Duration(smp.Interval*float64(time.Second)) {
			v += sum(ss[best])
		}
	}
	return v
}

func absDur(d time.Duration) time.Duration { return max(d, -d) }

func (h *hostSeries) others(smp rundir.Sample) float64 {
	return math.Max(0, smp.Host.BusyPct-h.own(smp))
}

// readHostSource adds the OS samples' causes: per node the rig agent's CPU, and per machine (one
// on the local target, HostNode, from the first node's samples) other processes' CPU and
// writeback. Each is judged here, once: the agent's CPU counts and covers where it took
// agentMinPct of a core, other processes' CPU counts where it passes the host thresholds
// (othersCause) and never covers — it explains an engine's time only as the run-queue wait it
// caused the engine's threads (judge) — and writeback counts and covers where writebackCause.
func readHostSource(d *runData, st *spanStream) {
	h := d.hostSamples()
	st.host = h
	if len(h.byNode) > 0 {
		st.has(SourceOSSamples)
	}
	for i, node := range sortedKeys(h.byNode) {
		machine := node
		if h.local {
			machine = HostNode
		}
		countMachine := !h.local || i == 0
		var own, mach []causeSpan
		ss := h.byNode[node]
		for k := range ss {
			smp := &ss[k]
			end := smp.Time.UnixNano()
			start := end - int64(smp.Interval*1e9)
			if end <= start {
				continue
			}
			var x *spanExtra // the sample's spans share it; none for a sample with none
			base := func() causeSpan {
				if x == nil {
					x = &spanExtra{os: smp, osNode: node}
				}
				return causeSpan{at: start, dur: end - start, source: SourceOSSamples, level: true, x: x}
			}
			if pct := smp.Agent.CPUPct; pct > 0 {
				c := base()
				c.cause, c.thread, c.w = string(CauseAgentCPU), "rig agent", pct/100
				if pct >= agentMinPct {
					c.counted, c.cover, c.names = true, 1, CauseAgentCPU
				}
				own = append(own, c)
			}
			if !countMachine {
				continue
			}
			if smp.Host != nil {
				if o := h.others(*smp); o > 0 {
					c := base()
					c.cause, c.thread, c.w = string(CauseHostCPU), "other processes", o/100
					if h.othersCause(node, *smp) {
						c.counted, c.names = true, CauseHostCPU
					}
					mach = append(mach, c)
				}
			}
			if writebackCause(*smp) {
				c := base()
				c.cause, c.detail, c.w, c.cover, c.counted, c.names = string(CauseWriteback), fmt.Sprintf("%d pages under writeback", smp.VM.NrWriteback), 1, 1, true, CauseWriteback
				mach = append(mach, c)
			}
		}
		st.add(node, own...)
		st.add(machine, mach...)
	}
}

// evidence is what an OS sample of node says of the cause it names: the agent's CPU, other
// processes' (the tail of host_cpu's evidence, after the run-queue wait), or writeback.
func (h *hostSeries) evidence(cause CauseKind, node string, smp rundir.Sample) string {
	switch cause {
	case CauseAgentCPU:
		return fmt.Sprintf("rig agent (pid %d) took %.0f %% of a core", smp.Agent.PID, smp.Agent.CPUPct)
	case CauseHostCPU:
		what := "processes other than the engines and rig agents"
		if h.local {
			what += " (on the local target the controller counts here, and the load generator where the samples did not follow it)"
		}
		return fmt.Sprintf("%s took %.0f %% of a core (run median %.0f %%); the host was %.0f %% busy of %.0f %%, load %.2f",
			what, h.others(smp), h.othersMedian[node], smp.Host.BusyPct, float64(max(smp.CPUs, 1))*100, smp.Load.Load1)
	}
	ev := fmt.Sprintf("%d pages under writeback, %d dirty", smp.VM.NrWriteback, smp.VM.NrDirty)
	if busy := busyDisksOf(smp); len(busy) > 0 {
		ev += "; " + strings.Join(busy, "; ")
	}
	return ev
}

// othersCause says whether, in smp, processes other than the run's own took enough CPU to count
// as a cause: at least hostOthersMinPct of a core on a machine at least hostBusyFrac busy, or
// hostOthersJump above their run median.
func (h *hostSeries) othersCause(node string, smp rundir.Sample) bool {
	if smp.Host == nil {
		return false
	}
	o, busy := h.others(smp), smp.Host.BusyPct
	capacity := float64(max(smp.CPUs, 1)) * 100
	return o >= hostOthersMinPct && (busy >= hostBusyFrac*capacity || o >= h.othersMedian[node]+hostOthersJump)
}

// busyDisksOf describes the sample's disks at least diskBusyPct busy.
func busyDisksOf(smp rundir.Sample) []string {
	var out []string
	for _, dk := range smp.Disks {
		if dk.Util >= diskBusyPct {
			out = append(out, fmt.Sprintf("%s %.0f %% busy, %.1f MB/s written, flush await %.1f ms", dk.Name, dk.Util, dk.WriteMBPer, dk.FlushAwait))
		}
	}
	return out
}

// writebackCause says whether the kernel was writing back dirty pages, or a disk was saturated,
// in smp.
func writebackCause(smp rundir.Sample) bool {
	return smp.VM.NrWriteback >= writebackMin || len(busyDisksOf(smp)) > 0
}

// periodic finds series of excursions whose starts repeat at a steady gap: for each gap between
// successive starts taken as a candidate period, the longest chain of starts each one period
// (within tolerance) after the previous. A chain of at least periodMinRun starts is reported;
// its period is the mean of its gaps, and it must cover periodMinCover of the beats that fit in
// the measured window. Starts already in a reported series are not reused.
// periodOf[i] is the period of the series start i is in, 0 for none.
func (d *runData) periodic(starts []int64, info func(i int) (peakMs float64, unexplained bool)) (out []Periodic, periodOf []float64) {
	return d.periodicTol(starts, int64(periodTolMin), info)
}

// periodicTol is periodic with minTol as the least tolerance of a gap: a series known only to a
// sample interval (an onset in the OS samples) matches within that interval.
func (d *runData) periodicTol(starts []int64, minTol int64, info func(i int) (peakMs float64, unexplained bool)) (out []Periodic, periodOf []float64) {
	periodOf = make([]float64, len(starts))
	used := make([]bool, len(starts))
	if len(starts) == 0 {
		return nil, periodOf
	}
	from, to := d.warmupEnd, d.loadEnd
	if from == 0 || from > starts[0] {
		from = starts[0]
	}
	if to < starts[len(starts)-1] {
		to = starts[len(starts)-1]
	}
	covers := func(chain []int, p int64) bool {
		return len(chain) >= periodMinRun && float64(len(chain)) >= periodMinCover*float64(to-from)/float64(p)
	}
	for {
		var best []int
		for i := 1; i < len(starts); i++ {
			p := starts[i] - starts[i-1]
			if p <= 0 {
				continue
			}
			for s0 := range starts {
				if used[s0] {
					continue
				}
				chain := chainFrom(starts, used, s0, p, minTol)
				if covers(chain, p) && len(chain) > len(best) {
					best = chain
				}
			}
		}
		if len(best) == 0 {
			return out, periodOf
		}
		first, last := starts[best[0]], starts[best[len(best)-1]]
		pr := Periodic{PeriodS: math.Round(float64(last-first)/float64(len(best)-1)/1e6) / 1e3, Count: len(best), FirstS: d.off(first)}
		var peaks []float64
		for _, i := range best {
			used[i] = true
			periodOf[i] = pr.PeriodS
			pk, un := info(i)
			peaks = append(peaks, pk)
			if un {
				pr.Unexplained++
			}
		}
		slices.Sort(peaks)
		pr.MedianMs = peaks[len(peaks)/2]
		out = append(out, pr)
	}
}

// chainFrom follows starts from s0, each next start one period p after the previous within
// tolerance, skipping starts in between (other excursions may interleave).
func chainFrom(starts []int64, used []bool, s0 int, p, minTol int64) []int {
	tol := max(int64(float64(p)*periodTolFrac), minTol)
	chain := []int{s0}
	cur := s0
	for {
		want := starts[cur] + p
		next := -1
		for j := cur + 1; j < len(starts) && starts[j] <= want+tol; j++ {
			if !used[j] && starts[j] >= want-tol && (next < 0 || absDur(time.Duration(starts[j]-want)) < absDur(time.Duration(starts[next]-want))) {
				next = j
			}
		}
		if next < 0 {
			return chain
		}
		chain = append(chain, next)
		cur = next
	}
}

// excursionsSection is report.md's "Where the time went".
func excursionsSection(s *Summary) string {
	ex := s.Excursions
	if ex == nil || ex.Count == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "### Where the time went\n\n%d latency excursion(s) of at least %s (10× p50, ≥ 1 ms); %d unexplained.", ex.Count, fmtMs(ex.ThresholdMs), ex.Unexplained)
	b.WriteString(causeSourcesOffNote(s))
	if len(ex.List) < ex.Count {
		fmt.Fprintf(&b, " The first %d are listed; summary.json's excursions has the counts.", len(ex.List))
	}
	b.WriteString("\n\n")
	for _, p := range ex.Periodic {
		fmt.Fprintf(&b, "**Periodic:** %d excursions every %s from %s (median peak %s), %d of them unexplained.\n\n",
			p.Count, fmtS3(p.PeriodS), fmtS(p.FirstS), fmtMs(p.MedianMs), p.Unexplained)
	}
	for _, p := range ex.CausePeriodic {
		fmt.Fprintf(&b, "**Periodic cause:** %s on %s (%s): %d of its %d onsets every %s from %s.\n\n",
			p.Cause, p.Node, p.Series, p.Count, p.Onsets, fmtS3(p.PeriodS), fmtS(p.FirstS))
	}
	writeExcursions(&b, ex.List)
	fmt.Fprintf(&b, "Causes are what the run recorded as under way: timeline actions (up to 2 s before, or while one that lasts, a hog, partition or delay, is under way) and restarts; GC pauses (a GC log's with the safepoint it ran in, as one gc), the engines' own stalls from their recordings and pause records (inside spans: GC as gc, forces, safepoints, scheduler delay, the engine threads' run-queue waits, each placed where the kernel reported it (sched_switch) and the rest of each 20 ms sample spread over it (schedstat), an Aeron agent's long cycles as duty_cycle), the leader's phases that blocked its apply path (snapshot_capture, snapshot_persist; a follower's or a phase beside the apply path covers none), the disk model's fsyncs and the engines' log syncs on the commit path (force), the load generator's own late sends (send_lag), the node's pressure stalls (psi_cpu, psi_io, psi_memory: some task stalled on its CPUs, I/O or memory, counted only above the run's usual level) and from the OS samples the rig agent's CPU, dirty-page writeback and saturated disks over the thresholds, each named only where its spans cover at least %.0f %% of the excursion, as in the window tables; another process's CPU (host_cpu) only where the engine's threads waited on a run queue over that share of it while other processes were busy. Covered: the share of the excursion the named causes' spans cover, and the time left unexplained (actions and restarts cover none). Engine log lines near each are in summary.json.\n\n", 100*causeCoverShare)
	excursionTables(&b, ex)
	return b.String()
}

// excursionTables writes where the time of the excursions with the largest peaks went, as the
// window tables do (windowsSection); summary.json has every listed excursion's.
func excursionTables(b *strings.Builder, ex *Excursions) {
	var top []int
	for i, e := range ex.List {
		if e.Where != nil {
			top = append(top, i)
		}
	}
	if len(top) == 0 {
		return
	}
	slices.SortStableFunc(top, func(i, j int) int { return cmp.Compare(ex.List[j].PeakMs, ex.List[i].PeakMs) })
	shown := min(len(top), excursionReportTables)
	fmt.Fprintf(b, "Where the time of the %d excursion(s) with the largest peak went, per node and thread, over [start, end]", shown)
	if n := len(top) - shown; n > 0 {
		fmt.Fprintf(b, "; %d more left out here: summary.json's excursions.list[].where has every listed excursion's", n)
	}
	fmt.Fprintf(b, ". %s Rows as in the window tables: count is spans, fsyncs, or samples over the thresholds above; share is the total over the excursion's length; "+
		"waits (park, monitor, socket) come last. Unexplained here is the time no row covers on any node (waits, other processes' CPU, log syncs that held no commit, a JVM's housekeeping threads' waits and pressure stalls at or below the run's usual level do not cover, nor other host samples under the thresholds); "+
		"the count of unexplained excursions above is of those with no cause.\n\n", sourcesNote(ex.List[top[0]].Where.Sources, "excursions"))
	for _, i := range top[:shown] {
		e := ex.List[i]
		head := fmt.Sprintf("**excursion #%d**: %s – %s (%s), peak %s", i+1, fmtS3(e.StartS), fmtS3(e.EndS), fmtMs(e.LengthMs()), fmtMs(e.PeakMs))
		if len(e.Causes) == 0 {
			head += ", no cause"
		}
		whereTable(b, head, e.LengthMs(), *e.Where, excursionReportRows, "excursions.list[].where")
	}
}

// LengthMs is the excursion's length, start to end.
func (e Excursion) LengthMs() float64 { return math.Round((e.EndS-e.StartS)*1e6) / 1e3 }

func fmtS3(s float64) string { return fmt.Sprintf("%.3f s", s) }
