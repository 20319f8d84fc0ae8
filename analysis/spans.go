package analysis

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/rig-dev/rig/rundir"
)

// One stream of cause spans per run: every source that can say where a node's time went — the
// engines' recordings (inside.ndjson), their always-on pause records (pauses.ndjson, the JVM's
// GC and safepoint log), the gc action's answers, the disk model's fsyncs, the scheduler
// samples' run-queue waits and pressure stalls, the OS samples — is read once into causeSpans,
// and one judge (judge) says for any interval, an excursion's or a window's, what each cause
// took of it, which causes cover enough of it to be named, and what is left unexplained.

// causeSpan is one span of a node's cause stream.
type causeSpan struct {
	at, dur int64 // unix ns; dur 0 is an instant (a sample counted, not timed)
	// w is the share of each moment of the span its cause held, for the row's total: a sampled
	// wait's share of its interval, a process's share of a core (above 1 for more than a core).
	w float64
	// cover is the share of each moment it explains (coverNs); 0 for a thread waiting (noCover),
	// other processes' CPU (it explains an engine's time only as the run-queue wait it caused),
	// and samples under the excursions' thresholds.
	cover float64
	// cause is the row's cause: a rundir.InsideKind, or a host or pressure CauseKind.
	cause  string
	source string
	thread string
	role   string
	detail string // what the row's detail counts: a force's or write's file, a GC's name, a frame
	// names is the cause an interval is named by when spans of it cover causeCoverShare of the
	// interval; "" for spans that are no stall of their own (insideStall).
	names CauseKind
	x     *spanExtra
	// counted: the span counts in its row's count (every span but the OS samples under the
	// excursions' thresholds).
	counted bool
	// level: a sampled level (scheduler, pressure, OS samples), not events with onsets; the
	// kernel's placed run-queue waits too: hundreds a second on a busy host, a level as much as
	// the samples of them are, and no event a period could be read from.
	level bool
	// blocks is an engine phase's InsideSpan.Blocks (isPhase): a phase covers and names only the
	// intervals whose scope says it blocks what they measure.
	blocks string
}

// isPhase says whether the span is one of an engine's phases (rundir.PhaseKinds).
func (c causeSpan) isPhase() bool { return c.source == rundir.SourceEnginePhases }

// spanExtra is what a few sources say beyond a span; an OS sample's spans share one, and its
// words are made only where a cause is named.
type spanExtra struct {
	evidence string // the span's own words for a named cause's evidence (a GC with its safepoint)
	// os is an OS sample's spans' sample, sampled on osNode (the span's node is the machine's on
	// the local target): their evidence and a writeback's busy disks.
	os     *rundir.Sample
	osNode string
	psi    *rundir.SchedSample // a pressure stall's sample: its full stall
}

// held is the time its cause held: the span's length at its weight.
func (c causeSpan) held() int64 { return int64(float64(c.dur) * c.w) }

// what names the span in a named cause's evidence.
func (st *spanStream) what(c causeSpan) string {
	switch {
	case c.x == nil:
	case c.x.os != nil:
		return st.host.evidence(CauseKind(c.cause), c.x.osNode, *c.x.os)
	case c.x.evidence != "":
		return c.x.evidence
	}
	return cmp.Or(c.detail, c.cause)
}

// moreDetails are a span's row details beside its detail: a writeback sample's busy disks.
func (c causeSpan) moreDetails() []string {
	if c.x == nil || c.x.os == nil || c.cause != string(CauseWriteback) {
		return nil
	}
	return busyDisksOf(*c.x.os)
}

// fullShare is a pressure stall's share of each moment every task was stalled.
func (c causeSpan) fullShare() float64 {
	if c.x == nil || c.x.psi == nil {
		return 0
	}
	for _, r := range psiResources {
		if string(r.cause) == c.cause {
			return stallSpan(*c.x.psi, r.full(*c.x.psi.PSI)).w
		}
	}
	return 0
}

// fromInside is an inside span (a recording's, a pause record's, a scheduler sample's) in the
// stream.
func fromInside(sp rundir.InsideSpan) causeSpan {
	c := causeSpan{at: sp.AtNs, dur: sp.DurNs, cause: string(sp.Kind), source: sp.Source, thread: sp.Thread, role: sp.Role,
		detail: cmp.Or(sp.File, sp.Detail), w: sp.Weight(), counted: true, names: insideStall[sp.Kind], level: rundir.IsSchedSource(sp.Source)}
	if !noCover[string(sp.Kind)] {
		c.cover = c.w
	}
	if c.level && jvmHousekeepingThread(sp.Thread) {
		c.cover, c.names, c.detail = 0, "", threadBeside
	}
	if c.isPhase() {
		c.blocks, c.names = sp.Blocks, CauseKind(sp.Kind)
		if sp.Blocks == rundir.BlocksApply {
			c.thread = "apply path"
		}
	}
	if sp.Blocks == rundir.BlocksCommit {
		c.onCommitPath()
	}
	if sp.File != "" && sp.Detail != "" {
		c.x = &spanExtra{evidence: sp.Detail} // the row counts the file; the evidence names the detail
	}
	return c
}

// spanSource reads one source of cause spans for the whole run into st (st.add), and says where
// it had nothing to read by not adding (st.has marks a source that was there with no spans).
// Warnings go to d.warnf.
type spanSource struct {
	name string
	read func(d *runData, st *spanStream)
}

// spanSources are the run's sources, read in this order (the gc action's answers after the GC
// records they stand in for).
var spanSources = []spanSource{
	{"GC logs", readGCLogSource},
	{"OS samples", readHostSource},
	{"engine recordings", readInsideSource},
	{"scheduler samples", readSchedSource},
	{"pause records", readPausesSource},
	{"gc actions", readGCActionSource},
	{"disk syncs", readDiskSyncSource},
	{"late sends", readLateSendSource},
}

// spanStream is the run's cause spans, per node, sorted by start, with what the judge and the
// run-level figures need beside them.
type spanStream struct {
	byNode map[string][]causeSpan
	// chunks are, per node, where each source's spans begin in byNode while it is read.
	chunks map[string][]int
	reader int // the source reading now
	// nodes are the servers and every node with spans (a client node's run-queue waits, the
	// machine's HostNode on the local target), sorted.
	nodes   []string
	sources map[string]bool // every source present, spans or not
	// srcNames are the sources the run had to explain time with (WhereTime.Sources): the
	// recordings' and the always-on records', then the disk model and the OS samples.
	srcNames []string
	host     *hostSeries
	psi      []psiSeries          // the nodes' pressure stalls (one series for the machine on the local target)
	psiUsual map[string][]float64 // per series' node, each resource's usual stall share (psiSeries.usual)
	gc       map[string][]GCPause // per node the GC logs' pauses over the measured window and the gc action's answers: gc_pauses rows, the spike
	gcRows   []GCRow
	// pressure is the run's stall shares (HostPressure), quoted in a pressure cause's evidence.
	pressure []HostPressure
}

// add adds spans of node from the source reading now; ss is the stream's from here.
func (st *spanStream) add(node string, ss ...causeSpan) {
	if len(ss) == 0 {
		return
	}
	if c := st.chunks[node]; len(c) == 0 || c[len(c)-1] != -st.reader-1 {
		// a new chunk: its start, then its reader (negated, so it is no start)
		st.chunks[node] = append(c, len(st.byNode[node]), -st.reader-1)
	}
	if st.byNode[node] == nil {
		st.byNode[node] = ss // the first spans of the node: kept, not copied
	} else {
		st.byNode[node] = append(st.byNode[node], ss...)
	}
	for _, s := range ss {
		st.sources[s.source] = true
	}
}

// has marks source as present where it added no span.
func (st *spanStream) has(source string) { st.sources[source] = true }

// spanStream reads every source once. summarize holds it only while it needs it: the OS samples
// and spans are garbage before the plots are drawn.
func (d *runData) spanStream() *spanStream {
	st := &spanStream{byNode: map[string][]causeSpan{}, chunks: map[string][]int{}, sources: map[string]bool{}, gc: map[string][]GCPause{}}
	for i, src := range spanSources {
		st.reader = i
		src.read(d, st)
	}
	st.nodes = slices.Clone(d.nodes)
	for n, ss := range st.byNode {
		if !slices.Contains(st.nodes, n) {
			st.nodes = append(st.nodes, n)
		}
		var starts []int
		for i := 0; i < len(st.chunks[n]); i += 2 {
			starts = append(starts, st.chunks[n][i])
		}
		st.byNode[n] = mergeByStart(ss, starts)
	}
	st.chunks = nil
	slices.Sort(st.nodes)
	st.srcNames = st.names()
	return st
}

// names lists the sources present, in srcNames' order.
func (st *spanStream) names() []string {
	var out []string
	for s := range st.sources {
		if s != "" && s != SourceDiskModel && s != SourceOSSamples {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	for _, s := range []string{SourceDiskModel, SourceOSSamples} {
		if st.sources[s] {
			out = append(out, s)
		}
	}
	return out
}

// over is the part of a node's spans that may overlap [from, to]: those starting from
// insideMaxBack before it (one that began earlier is not seen) to its end.
func (st *spanStream) over(node string, from, to int64) []causeSpan {
	ss := st.byNode[node]
	hi := sort.Search(len(ss), func(i int) bool { return ss[i].at > to })
	lo := sort.Search(hi, func(i int) bool { return ss[i].at >= from-insideMaxBack })
	return ss[lo:hi]
}

// judgement is what the stream says of one interval.
type judgement struct {
	where WhereTime // without Sources (whereTime adds them)
	// causes are the causes whose spans cover causeCoverShare of the interval, by node and
	// then by their first span, and last other processes' CPU where the engine's threads waited
	// that long on a run queue.
	causes []Cause
	// coveredNs is the time the named causes' spans cover.
	coveredNs int64
}

// judge says where the time of [from, to] went: every cause per node and thread (the table),
// the time no cause covers, and the causes named. Excursions and windows both ask it, each with
// what it measures (sc): an engine's phase covers and names only where sc says it blocks that.
func (d *runData) judge(st *spanStream, from, to int64, sc phaseScope) judgement {
	length := to - from
	acc := map[rowKey]*rowAcc{}
	get := func(k rowKey) *rowAcc {
		a := acc[k]
		if a == nil {
			a = &rowAcc{details: map[string]int{}}
			acc[k] = a
		}
		return a
	}
	byCause := map[causeKey]*causeTally{}
	var order []*causeTally
	var all []wspan
	sched := map[string][]wspan{}
	var hosts []hostCand
	commit := d.commitHeld(st, from, to, sc)
	for _, node := range st.nodes {
		for _, sp := range st.over(node, from, to) {
			end := sp.at + max(sp.dur, 0)
			// An instant counts where it falls in the interval, a span where it overlaps it.
			if end < from || sp.at > to || (sp.dur > 0 && (end == from || sp.at == to)) {
				continue
			}
			c := span{max(sp.at, from), min(end, to)}
			parts := []span{c} // what it may cover: a commit sync only where it held the commit
			if why := sc.beside(node, sp); why != "" {
				sp.cover, sp.names, sp.detail = 0, "", why
			} else if sp.isCommit() {
				if parts = clipTo(commit[node], c); len(parts) == 0 {
					sp.cover, sp.names, sp.detail = 0, "", commitBeside
				}
			}
			a := get(rowKey{node, sp.thread, sp.cause, sp.source, sp.role})
			if sp.counted {
				a.count++
			}
			a.ns += float64(c.to-c.from) * sp.w
			if sp.detail != "" {
				a.details[sp.detail]++
			}
			for _, dt := range sp.moreDetails() {
				a.details[dt]++
			}
			if c.to <= c.from {
				continue
			}
			if sp.cover > 0 {
				for _, p := range parts {
					all = append(all, wspan{p, sp.cover})
				}
			}
			if sp.cause == string(rundir.InsideSchedDelay) {
				sched[node] = append(sched[node], wspan{c, sp.cover})
			}
			switch {
			case sp.names == "":
				continue
			case sp.names == CauseHostCPU:
				if sp.counted {
					hosts = append(hosts, hostCand{node, sp})
				}
				continue
			}
			k := causeKey{node, sp.names, judgedSource(sp.source)}
			g := byCause[k]
			if g == nil {
				g = &causeTally{causeKey: k, first: sp.at}
				byCause[k] = g
				order = append(order, g)
			}
			g.add(st, sp, c, parts)
		}
	}
	all = append(all, d.timelineRows(st, sc, from, to, get)...)
	var j judgement
	j.where.Totals = totalsOf(acc)
	j.where.Rows, j.where.LeftOut, j.where.UnexplainedMs = rowsOf(acc, from, to, all)
	if length <= 0 {
		return j
	}
	var named []wspan
	for _, g := range order {
		covered := coverNs(g.cover)
		if float64(covered) < causeCoverShare*float64(length) {
			continue
		}
		j.causes = append(j.causes, Cause{Kind: g.kind, Node: g.node, AtS: d.off(g.first), Evidence: st.evidence(g, covered, length)})
		named = append(named, g.cover...)
	}
	j.causes = append(j.causes, d.hostCPUCauses(st, hosts, sched, length)...)
	j.coveredNs = coverNs(named)
	return j
}

// causeKey is one cause of one node from one source.
type causeKey struct {
	node string
	kind CauseKind
	src  string
}

// causeTally is what the spans of one cause, node and source hold of an interval, as judge
// reads them.
type causeTally struct {
	causeKey
	n        int
	first    int64 // the first span's start
	long     int64 // the most one span held
	longWhat string
	threads  []string
	cover    []wspan  // the spans clipped to the interval
	sampled  bool     // spans of a sampled total, spread over their intervals
	fullNs   float64  // pressure stalls: every task's
	srcs     []string // the spans' sources, in the order first seen
}

// judgedSource is the source a span's cause is judged under: a thread's run-queue wait is one
// figure whether the kernel placed it or a sample spread it (rundir.SchedSample.Spans), so the
// two name their cause together, as they cover host_cpu's wait together.
func judgedSource(src string) string {
	if rundir.IsSchedSource(src) {
		return rundir.SourceSchedstat
	}
	return src
}

// add tallies span sp, c its part in the interval, parts what of c it covers.
func (g *causeTally) add(st *spanStream, sp causeSpan, c span, parts []span) {
	g.n++
	for _, p := range parts {
		g.cover = append(g.cover, wspan{p, sp.cover})
	}
	g.sampled = g.sampled || sp.w < 1
	if !slices.Contains(g.srcs, sp.source) {
		g.srcs = append(g.srcs, sp.source)
	}
	g.fullNs += float64(c.to-c.from) * sp.fullShare()
	if h := sp.held(); h > g.long || g.longWhat == "" {
		g.long, g.longWhat = max(h, g.long), st.what(sp)
	}
	if sp.thread != "" && !slices.Contains(g.threads, sp.thread) && len(g.threads) < windowDetails {
		g.threads = append(g.threads, sp.thread)
	}
}

// hostCand is an OS sample's other processes' CPU over the host thresholds in an interval.
type hostCand struct {
	node string
	sp   causeSpan
}

// hostCPUCauses names other processes' CPU, once per node (per machine on the local target),
// where the engine's threads waited on a run queue (sched: their sched_delay spans, per node)
// over causeCoverShare of the interval.
func (d *runData) hostCPUCauses(st *spanStream, hosts []hostCand, sched map[string][]wspan, length int64) []Cause {
	var out []Cause
	schedCover := map[string]float64{}
	for n, ws := range sched {
		schedCover[n] = float64(coverNs(ws)) / float64(length)
	}
	seen := map[string]bool{}
	for _, h := range hosts {
		if seen[h.node] {
			continue
		}
		waitNode, wait := h.node, schedCover[h.node]
		if st.host.local { // any node's threads: every node is this machine
			waitNode, wait = "", -1
			for _, n := range sortedKeys(schedCover) {
				if schedCover[n] > wait {
					waitNode, wait = n, schedCover[n]
				}
			}
		}
		if wait < causeCoverShare {
			continue
		}
		seen[h.node] = true
		out = append(out, Cause{Kind: CauseHostCPU, Node: waitNode, AtS: d.off(h.sp.at),
			Evidence: fmt.Sprintf("%s's threads waited on a run queue over %.0f %% of it while %s", waitNode, 100*wait, st.what(h.sp))})
	}
	return out
}

// evidence is a named cause's evidence: how many of its spans cover how much of the interval.
func (st *spanStream) evidence(g *causeTally, covered, length int64) string {
	pct := 100 * float64(covered) / float64(length)
	if r := slices.IndexFunc(psiResources, func(r psiResource) bool { return r.cause == g.kind }); r >= 0 {
		ev := fmt.Sprintf("pressure stall: some task stalled on %s above its usual level over %s ms (%.0f %%) of it, every task %s ms at any level, in %d sample(s)",
			psiResources[r].name, fmtMsBare(covered), pct, fmtMsBare(int64(math.Round(g.fullNs))), g.n)
		if u, ok := st.psiUsual[g.node]; ok {
			ev += fmt.Sprintf("; usual level %.0f %% (the median sample's)", 100*u[r])
		}
		if i := slices.IndexFunc(st.pressure, func(h HostPressure) bool { return h.Node == g.node }); i >= 0 {
			ev += fmt.Sprintf(", %.1f %% of the run", st.pressure[i].share(psiResources[r].name))
		}
		return ev
	}
	what, how, longest := "span(s)", "", "longest"
	switch {
	case g.src == SourceDiskModel:
		what = "fsync(s)"
	case g.src == SourceOSSamples:
		return fmt.Sprintf("%s: %d sample(s) covering %s ms (%.0f %%) of it; the largest: %s", g.src, g.n, fmtMsBare(covered), pct, g.longWhat)
	case len(g.srcs) > 1:
		how = " (the kernel's placed where they were, the samples' rest spread over their intervals)"
	case g.sampled:
		what, how, longest = "sample(s)", " (each sample's total spread over its interval)", "most in one sample"
	}
	ev := fmt.Sprintf("%s: %d %s covering %s ms (%.0f %%) of it%s, %s %s ms (%s)", strings.Join(g.srcs, " and "), g.n, what, fmtMsBare(covered), pct, how, longest, fmtMsBare(g.long), g.longWhat)
	if len(g.threads) > 0 {
		ev += " on " + strings.Join(g.threads, ", ")
	}
	return ev
}

// rowsOf orders the rows, most time first, and measures what no covering span covers.
func rowsOf(acc map[rowKey]*rowAcc, from, to int64, cover []wspan) (rows []CauseRow, leftOut int, unexplainedMs float64) {
	length := float64(to - from)
	for k, a := range acc {
		ms := math.Round(a.ns/1e3) / 1e3
		if a.count == 0 && ms < 0.001 {
			continue
		}
		r := CauseRow{Node: k.node, Thread: k.thread, Cause: k.cause, Source: k.source, Role: k.role, Count: a.count, TotalMs: ms,
			Detail: topDetails(a.details)}
		if length > 0 {
			r.SharePct = math.Round(a.ns/length*1e4) / 100
		}
		rows = append(rows, r)
	}
	waits := func(r CauseRow) int {
		if noCover[r.Cause] && r.Source != SourceOSSamples {
			return 1
		}
		return 0
	}
	slices.SortFunc(rows, func(a, b CauseRow) int {
		return cmp.Or(cmp.Compare(waits(a), waits(b)), cmp.Compare(b.TotalMs, a.TotalMs), cmp.Compare(b.Count, a.Count), strings.Compare(a.Node, b.Node),
			strings.Compare(a.Cause, b.Cause), strings.Compare(a.Thread, b.Thread), strings.Compare(a.Source, b.Source), strings.Compare(a.Role, b.Role))
	})
	if len(rows) > windowMaxRows {
		leftOut = len(rows) - windowMaxRows
		rows = rows[:windowMaxRows]
	}
	if rows == nil {
		rows = []CauseRow{}
	}
	return rows, leftOut, nsToMs(int64(length) - coverNs(cover))
}

// totalsOf sums the rows per cause and source, in cause order.
func totalsOf(acc map[rowKey]*rowAcc) []CauseTotal {
	type key struct{ cause, source string }
	m := map[key]*CauseTotal{}
	for k, a := range acc {
		c := m[key{k.cause, k.source}]
		if c == nil {
			c = &CauseTotal{Cause: k.cause, Source: k.source}
			m[key{k.cause, k.source}] = c
		}
		c.Count += a.count
		c.TotalMs += a.ns / 1e6
	}
	out := make([]CauseTotal, 0, len(m))
	for _, c := range m {
		c.TotalMs = math.Round(c.TotalMs*1e3) / 1e3
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b CauseTotal) int {
		return cmp.Or(strings.Compare(a.Source, b.Source), strings.Compare(a.Cause, b.Cause))
	})
	return out
}

// rowKey is one row of a table of where the time went.
type rowKey struct{ node, thread, cause, source, role string }

type rowAcc struct {
	count   int
	ns      float64
	details map[string]int
}

// mergeByStart sorts ss by start, stably: each chunk (from starts[i] to the next start) is sorted
// in place (a source's spans mostly are already), then the chunks are merged, the earlier chunk
// first on a tie.
func mergeByStart(ss []causeSpan, starts []int) []causeSpan {
	byStart := func(a, b causeSpan) int { return cmp.Compare(a.at, b.at) }
	ends := append(starts[1:len(starts):len(starts)], len(ss))
	for i, from := range starts {
		if c := ss[from:ends[i]]; !slices.IsSortedFunc(c, byStart) {
			slices.SortStableFunc(c, byStart)
		}
	}
	if len(starts) == 1 {
		return ss
	}
	out := make([]causeSpan, 0, len(ss))
	next := slices.Clone(starts)
	for len(out) < len(ss) {
		best := -1
		for i := range next {
			if next[i] < ends[i] && (best < 0 || ss[next[i]].at < ss[next[best]].at) {
				best = i
			}
		}
		out = append(out, ss[next[best]])
		next[best]++
	}
	return out
}
