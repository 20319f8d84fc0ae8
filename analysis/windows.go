package analysis

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/rig-dev/rig/rundir"
)

// Where the time went, window by window (docs/results.md): every snapshot, restart, failover and burst
// window gets a table of causes per node and thread — the engine's own time from its recording
// (<node>/inside.ndjson: forces with their file's role, GC pauses, safepoints, stop-the-world,
// GC assists, scheduler delay, parks, monitor waits, CPU samples), the disk model's fsyncs
// (<node>/disk-syncs.ndjson) and the host causes of the OS samples (another process's CPU, the
// rig agents' own, disk writeback) — with the time no cause covers.

// WindowKind names a kind of window; the names are summary.json's and stable.
type WindowKind string

const (
	WindowSnapshot WindowKind = "snapshot" // the snapshot action → the last node ready at it reported the snapshot
	WindowRestart  WindowKind = "restart"  // kill → the node ready again (restore, replay, catch-up)
	WindowFailover WindowKind = "failover" // the fault → back to normal (else the new leader)
	WindowBurst    WindowKind = "burst"    // the burst's due time → absorbed
)

// WindowKinds lists every kind, in the order report.md shows them.
var WindowKinds = []WindowKind{WindowSnapshot, WindowRestart, WindowFailover, WindowBurst}

// Sources of a row besides an inside span's own (rundir.InsideSpan.Source: "jfr", "go_trace").
const (
	SourceDiskModel = "disk_model" // <node>/disk-syncs.ndjson
	SourceOSSamples = "os_samples" // <node>/samples
)

// HostNode is the node of a host row on the local target, where every node is this machine.
const HostNode = "host"

// TimeWindow is one window's "where the time went" table (summary.json's "windows").
type TimeWindow struct {
	Kind  WindowKind `json:"kind"`
	Index int        `json:"index"`          // 1-based row of its list: snapshots, restarts, failovers, bursts
	Node  string     `json:"node,omitempty"` // restart: the node killed; failover: the leader at the fault
	FromS float64    `json:"from_s"`
	ToS   float64    `json:"to_s"`
	// Open: the window never closed (never ready, never back to normal); ToS is where it was cut.
	Open bool `json:"open,omitempty"`
	WhereTime
}

// WhereTime is one interval's "where the time went" table: a window's (its fields inlined in
// summary.json's windows) and a latency excursion's (excursions.list[].where). One shape, one
// tally (runData.whereTime), so the two read alike.
type WhereTime struct {
	// Sources are what the run had to explain time with: inside spans' sources, disk_model,
	// os_samples. A cause of a source not listed was not measured, not absent.
	Sources []string   `json:"sources"`
	Rows    []CauseRow `json:"rows"` // most time first
	// Totals are every cause of every source over all nodes and threads, none left out: what the
	// sweep report and rig compare pool.
	Totals  []CauseTotal `json:"totals"`
	LeftOut int          `json:"left_out,omitempty"`
	// UnexplainedMs is the interval's time during which no row's span, on any node, was under way
	// (parks, monitor and socket waits do not count: noCover; host rows count for the samples over
	// excursions' thresholds).
	UnexplainedMs float64 `json:"unexplained_ms"`
}

// LengthMs is the window's length.
func (w TimeWindow) LengthMs() float64 { return math.Round((w.ToS-w.FromS)*1e6) / 1e3 }

// CauseTotal is one cause of one source in a window, over every node and thread.
type CauseTotal struct {
	Cause   string  `json:"cause"`
	Source  string  `json:"source"`
	Count   int     `json:"count"`
	TotalMs float64 `json:"total_ms"`
}

// CauseRow is one cause on one node and thread in a window.
type CauseRow struct {
	Node   string `json:"node"`
	Thread string `json:"thread,omitempty"`
	// Cause is a rundir.InsideKind (an engine's own time) or a host CauseKind (host_cpu,
	// agent_cpu, writeback); the disk model's fsyncs are "force" from source disk_model.
	Cause  string `json:"cause"`
	Source string `json:"source"`
	Role   string `json:"role,omitempty"` // forces and writes: the file's role (rundir.Role*)
	Count  int    `json:"count"`
	// TotalMs is the time inside the window: spans clipped to it; CPU samples their period; for
	// host_cpu and agent_cpu the CPU time taken (ms of one core), for writeback the time of the
	// samples it was under way in.
	TotalMs  float64 `json:"total_ms"`
	SharePct float64 `json:"share_pct"` // TotalMs over the window's length
	Detail   string  `json:"detail,omitempty"`
}

const (
	windowMaxRows    = 24  // rows kept per window in summary.json
	windowReportRows = 12  // rows report.md shows per window
	windowMax        = 100 // windows of one kind
	windowDetails    = 3   // details (frames, files, GC names) named per row
)

// noCover are the inside kinds of a thread waiting, which do not explain time
// (TimeWindow.UnexplainedMs) and are listed after the rest: an idle thread parks or waits on a
// monitor, and one waiting on the network waits on whatever held the others up.
var noCover = map[string]bool{string(rundir.InsidePark): true, string(rundir.InsideMonitor): true, string(rundir.InsideSocket): true}

// insideSpans reads every server's inside file once, sorted by start.
func (d *runData) insideSpans() map[string][]rundir.InsideSpan {
	if d.inside != nil {
		return d.inside
	}
	d.inside = map[string][]rundir.InsideSpan{}
	for _, n := range d.nodes {
		ss, err := d.run.Inside(n)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			d.warnf("inside spans of %s: %v", n, err)
		}
		slices.SortFunc(ss, func(a, b rundir.InsideSpan) int { return cmp.Compare(a.AtNs, b.AtNs) })
		d.inside[n] = ss
	}
	return d.inside
}

// schedSpans reads every node's scheduler samples (<node>/sched/*.ndjson) as sched_delay spans
// per thread (rundir.SchedSample.Spans), and returns the samples per node for their pressure
// stall figures (psi.go).
func (d *runData) schedSpans() (map[string][]rundir.InsideSpan, map[string][]rundir.SchedSample) {
	out := map[string][]rundir.InsideSpan{}
	samples := map[string][]rundir.SchedSample{}
	for _, f := range d.glob(rundir.SchedGlob) {
		node := path.Base(path.Dir(path.Dir(f)))
		ss, err := d.run.Sched(f)
		if err != nil {
			d.warnf("scheduler samples %s: %v", f, err)
		}
		for _, smp := range ss {
			out[node] = append(out[node], smp.Spans()...)
		}
		samples[node] = append(samples[node], ss...)
	}
	return out, samples
}

// spansOver is the part of ss (sorted by start) that may overlap [from, to]: none starts after
// to, and none ends before from unless a longer one starts before it (the search goes back by
// the longest span, bounded by insideMaxBack).
func spansOver(ss []rundir.InsideSpan, from, to int64) []rundir.InsideSpan {
	hi := sort.Search(len(ss), func(i int) bool { return ss[i].AtNs > to })
	lo := sort.Search(hi, func(i int) bool { return ss[i].AtNs >= from-insideMaxBack })
	return ss[lo:hi]
}

// insideMaxBack is how long before a window a span may start and still be looked at: one that
// began earlier (an idle thread's wait of minutes) is left out, so each window reads the spans
// near it, not the whole file.
const insideMaxBack = int64(60e9)

// diskSyncs reads every server's disk syncs file once (nil map entries: none).
func (d *runData) diskSyncs() (map[string][]rundir.DiskSync, []string) {
	if d.syncs != nil {
		return d.syncs, nil
	}
	var warn []string
	d.syncs = map[string][]rundir.DiskSync{}
	for _, n := range d.nodes {
		ss, err := d.run.DiskSyncs(n)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			warn = append(warn, fmt.Sprintf("disk forces of %s: %v", n, err))
			continue
		}
		d.syncs[n] = ss
	}
	return d.syncs, warn
}

// windowSpans are the run's windows, before their tables.
func (d *runData) windowSpans(s *Summary) []TimeWindow {
	var out []TimeWindow
	add := func(w TimeWindow) {
		if w.ToS > w.FromS {
			out = append(out, w)
		}
	}
	for i, r := range s.Snapshots {
		if i == windowMax {
			break
		}
		w := TimeWindow{Kind: WindowSnapshot, Index: i + 1, Node: r.Leader, FromS: r.AtS, ToS: r.WindowToS, Open: r.FinishedS == nil}
		if r.FinishedS != nil {
			w.ToS = *r.FinishedS
		}
		add(w)
	}
	for i, r := range s.Restarts {
		if i == windowMax {
			break
		}
		w := TimeWindow{Kind: WindowRestart, Index: i + 1, Node: r.Node, FromS: r.KillS}
		switch {
		case r.ReadyS != nil:
			w.ToS = *r.ReadyS
		case r.Windows.Rejoining != nil:
			w.ToS, w.Open = r.Windows.Rejoining.ToS, true
		default:
			w.ToS, w.Open = r.Windows.OneDown.ToS, true
		}
		add(w)
	}
	for i, r := range s.Failovers {
		if i == windowMax {
			break
		}
		w := TimeWindow{Kind: WindowFailover, Index: i + 1, Node: r.From, FromS: r.AtS}
		switch {
		case r.NormalMs != nil:
			w.ToS = r.AtS + *r.NormalMs/1e3
		case r.ElectMs != nil:
			w.ToS, w.Open = r.AtS+*r.ElectMs/1e3, true
		default:
			w.ToS, w.Open = d.off(d.loadEnd), true
			if i+1 < len(s.Failovers) {
				w.ToS = s.Failovers[i+1].AtS
			}
		}
		add(w)
	}
	for i, r := range s.Bursts {
		if i == windowMax {
			break
		}
		w := TimeWindow{Kind: WindowBurst, Index: i + 1, FromS: r.AtS, ToS: r.AtS + max(r.AbsorbMs, r.SendMs)/1e3}
		if r.UDP != nil {
			w.Node = r.UDP.Receiver
		}
		add(w)
	}
	return out
}

// timeSources is what the run has to explain time with, read once for every window and
// excursion.
type timeSources struct {
	names  []string // WhereTime.Sources
	inside map[string][]rundir.InsideSpan
	syncs  map[string][]rundir.DiskSync
	host   *hostSeries
	psi    []psiSeries // the nodes' pressure stalls (one series for the machine on the local target)
	// phases are the engines' own phases, judged per interval (phases.go), not as stalls.
	phases map[string][]rundir.InsideSpan
	// nodes are the servers and the client nodes with scheduler samples (the load generator's
	// threads' run-queue waits).
	nodes []string
}

// timeSources reads the inside spans, the scheduler samples' run-queue waits (as sched_delay
// spans beside them), the disk model's fsyncs and the OS samples.
func (d *runData) timeSources() (*timeSources, []string) {
	ts := &timeSources{inside: map[string][]rundir.InsideSpan{}, host: d.hostSamples()}
	for n, ss := range d.insideSpans() {
		ts.inside[n] = ss
	}
	spans, samples := d.schedSpans()
	for n, ss := range d.pauseSpans() {
		spans[n] = append(spans[n], ss...)
	}
	ts.takePhases(spans)
	ts.psi = psiOf(samples, ts.host.local)
	ts.nodes = slices.Clone(d.nodes)
	for n, ss := range spans {
		if !slices.Contains(ts.nodes, n) {
			ts.nodes = append(ts.nodes, n)
		}
		all := append(slices.Clone(ts.inside[n]), ss...)
		slices.SortStableFunc(all, func(a, b rundir.InsideSpan) int { return cmp.Compare(a.AtNs, b.AtNs) })
		ts.inside[n] = all
	}
	slices.Sort(ts.nodes)
	var warn []string
	ts.syncs, warn = d.diskSyncs()
	for _, n := range ts.nodes {
		for _, sp := range ts.inside[n] {
			if sp.Source != "" && !slices.Contains(ts.names, sp.Source) {
				ts.names = append(ts.names, sp.Source)
			}
		}
	}
	slices.Sort(ts.names)
	if len(ts.syncs) > 0 {
		ts.names = append(ts.names, SourceDiskModel)
	}
	if len(ts.host.byNode) > 0 {
		ts.names = append(ts.names, SourceOSSamples)
	}
	return ts, warn
}

// whereTime is the table of where the time went over [from, to] (unix ns): every cause per
// node and thread, and the time none covers. Windows and excursions both call it, each with
// what it measures (sc: which engine phases cover it).
func (d *runData) whereTime(ts *timeSources, from, to int64, sc phaseScope) WhereTime {
	t := newWindowTally(from, to)
	for _, n := range ts.nodes {
		t.inside(n, ts.inside[n])
		t.syncs(n, ts.syncs[n], d.man.RunID)
	}
	t.phases(ts, sc)
	t.host(ts.host)
	w := WhereTime{Sources: sc.sources(d.sourcesOver(ts.names, from, to)), Totals: t.totals()}
	w.Rows, w.LeftOut, w.UnexplainedMs = t.rows()
	return w
}

// sourcesOver are the sources that were looking over [from, to]: an engine recording cut to
// windows (engine.recording: windows) only where one of its stretches holds all of it, so a
// table outside them says no recording was there rather than that it saw nothing.
func (d *runData) sourcesOver(names []string, from, to int64) []string {
	if d.man.Recorded == nil {
		return names
	}
	covered := slices.ContainsFunc(d.man.Recorded, func(s rundir.Stretch) bool { return s.Covers(from, to) })
	if covered {
		return names
	}
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !slices.Contains(alwaysOnSources, n) })
}

// windows builds every window's table.
func (d *runData) windows(s *Summary, ts *timeSources) []TimeWindow {
	ws := d.windowSpans(s)
	for i := range ws {
		w := &ws[i]
		w.WhereTime = d.whereTime(ts, d.origin+int64(math.Round(w.FromS*1e9)), d.origin+int64(math.Round(w.ToS*1e9)), d.windowScope(s, *w))
	}
	return ws
}

// windowTally sums one window's causes.
type windowTally struct {
	from, to int64
	acc      map[rowKey]*rowAcc
	cover    []wspan
}

type rowKey struct{ node, thread, cause, source, role string }

type rowAcc struct {
	count   int
	ns      float64
	details map[string]int
}

func newWindowTally(from, to int64) *windowTally {
	return &windowTally{from: from, to: to, acc: map[rowKey]*rowAcc{}}
}

func (t *windowTally) get(k rowKey) *rowAcc {
	a := t.acc[k]
	if a == nil {
		a = &rowAcc{details: map[string]int{}}
		t.acc[k] = a
	}
	return a
}

// clip is [at, at+dur] cut to the window, and whether it touches it (an instant counts when in it).
func (t *windowTally) clip(at, dur int64) (span, bool) {
	end := at + max(dur, 0)
	if end < t.from || at > t.to {
		return span{}, false
	}
	return span{max(at, t.from), min(end, t.to)}, true
}

func (t *windowTally) inside(node string, ss []rundir.InsideSpan) {
	for _, sp := range spansOver(ss, t.from, t.to) {
		c, ok := t.clip(sp.AtNs, sp.DurNs)
		if !ok {
			continue
		}
		a := t.get(rowKey{node, sp.Thread, string(sp.Kind), sp.Source, sp.Role})
		a.count++
		a.ns += float64(c.to-c.from) * sp.Weight()
		detail := sp.Detail
		if sp.File != "" {
			detail = sp.File
		}
		if detail != "" {
			a.details[detail]++
		}
		if !noCover[string(sp.Kind)] && c.to > c.from {
			t.cover = append(t.cover, insideW(sp, c))
		}
	}
}

// syncs adds the disk model's fsyncs, their files named by modelFile.
func (t *windowTally) syncs(node string, ss []rundir.DiskSync, runID string) {
	for _, x := range ss {
		c, ok := t.clip(x.AtNs, x.DurNs)
		if !ok {
			continue
		}
		a := t.get(rowKey{node: node, cause: string(rundir.InsideForce), source: SourceDiskModel})
		a.count++
		a.ns += float64(c.to - c.from)
		a.details[modelFile(x.File, runID)]++
		if c.to > c.from {
			t.cover = append(t.cover, whole(c))
		}
	}
}

// modelFile names a file the disk model synced from the run's data folder: the model's
// mountpoint holds rig/<run-id>/ on a shared data folder.
func modelFile(file, runID string) string {
	if runID != "" {
		if _, rest, ok := strings.Cut(file, "/"+runID+"/"); ok {
			return rest
		}
	}
	return file
}

// host adds the OS samples' causes: per node the agent's CPU, and per machine (one on the local
// target) other processes' CPU and writeback.
func (t *windowTally) host(h *hostSeries) {
	seenMachine := false
	for _, node := range sortedKeys(h.byNode) {
		machine := node
		if h.local {
			machine = HostNode
		}
		countMachine := !(h.local && seenMachine)
		for _, smp := range h.byNode[node] {
			end := smp.Time.UnixNano()
			start := end - int64(smp.Interval*1e9)
			c, ok := t.clip(start, end-start)
			if !ok || c.to <= c.from {
				continue
			}
			seenMachine = true
			ov := float64(c.to - c.from)
			if smp.Agent.CPUPct > 0 {
				a := t.get(rowKey{node: node, thread: "rig agent", cause: string(CauseAgentCPU), source: SourceOSSamples})
				a.ns += smp.Agent.CPUPct / 100 * ov
				if smp.Agent.CPUPct >= agentMinPct {
					a.count++
					t.cover = append(t.cover, whole(c))
				}
			}
			if !countMachine {
				continue
			}
			if smp.Host != nil {
				if o := h.others(smp); o > 0 {
					// Counted, not covering: other processes' CPU explains an engine's time only
					// as the run-queue wait it caused the engine's threads (sched_delay rows).
					a := t.get(rowKey{node: machine, thread: "other processes", cause: string(CauseHostCPU), source: SourceOSSamples})
					a.ns += o / 100 * ov
					if h.othersCause(node, smp) {
						a.count++
					}
				}
			}
			if writebackCause(smp) {
				a := t.get(rowKey{node: machine, cause: string(CauseWriteback), source: SourceOSSamples})
				a.count++
				a.ns += ov
				a.details[fmt.Sprintf("%d pages under writeback", smp.VM.NrWriteback)]++
				for _, dk := range busyDisksOf(smp) {
					a.details[dk]++
				}
				t.cover = append(t.cover, whole(c))
			}
		}
	}
}

// rows orders the tally's rows, most time first, and measures what no row covers.
func (t *windowTally) rows() (rows []CauseRow, leftOut int, unexplainedMs float64) {
	length := float64(t.to - t.from)
	for k, a := range t.acc {
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
	return rows, leftOut, nsToMs(int64(length) - coverNs(t.cover))
}

// totals sums the tally per cause and source, in cause order.
func (t *windowTally) totals() []CauseTotal {
	type key struct{ cause, source string }
	m := map[key]*CauseTotal{}
	for k, a := range t.acc {
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

// unionNs is the length of the union of spans (sorted in place).
func unionNs(ss []span) int64 {
	slices.SortFunc(ss, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	var total, curFrom, curTo int64
	open := false
	for _, s := range ss {
		switch {
		case !open:
			curFrom, curTo, open = s.from, s.to, true
		case s.from <= curTo:
			curTo = max(curTo, s.to)
		default:
			total += curTo - curFrom
			curFrom, curTo = s.from, s.to
		}
	}
	if open {
		total += curTo - curFrom
	}
	return total
}

// topDetails names the most frequent details, with their counts.
func topDetails(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), strings.Compare(a, b)) })
	parts := make([]string, 0, windowDetails)
	for _, k := range keys[:min(len(keys), windowDetails)] {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	if len(keys) > windowDetails {
		parts = append(parts, fmt.Sprintf("%d more", len(keys)-windowDetails))
	}
	return strings.Join(parts, "; ")
}

// sourcesNote says what the tables of where the time went (of windows, of excursions) were
// built from, and when no engine recording was among it.
func sourcesNote(src []string, what string) string {
	out := "No source to explain the " + what + " with: no inside spans, disk model or OS samples."
	if len(src) > 0 {
		out = fmt.Sprintf("Sources: %s.", strings.Join(src, ", "))
	}
	if !slices.ContainsFunc(src, func(x string) bool { return !slices.Contains(alwaysOnSources, x) }) {
		out += fmt.Sprintf(" No engine recording (`<node>/%s`): the engines' own time is not in these tables%s.", rundir.InsideFile, phasesNote(src))
	}
	return out
}

// whereTable writes one interval's table of where the time went to report.md: head (its name
// and span), the unexplained time, and the first maxRows rows, saying how many smaller ones
// summary.json's list (windows, excursions) has beyond them.
func whereTable(b *strings.Builder, head string, lengthMs float64, w WhereTime, maxRows int, list string) {
	pf := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	pf("%s", head)
	if w.UnexplainedMs > 0 && lengthMs > 0 {
		pf("; **unexplained %s (%.0f %%)**", fmtMs(w.UnexplainedMs), 100*w.UnexplainedMs/lengthMs)
	}
	pf("\n\n")
	if len(w.Rows) == 0 {
		pf("No cause recorded in it.\n\n")
		return
	}
	writeCauseRows(b, w.Rows[:min(len(w.Rows), maxRows)])
	if n := len(w.Rows) - maxRows + w.LeftOut; n > 0 {
		pf("%d smaller row(s) not shown (summary.json's %s has the first %d).\n\n", n, list, windowMaxRows)
	}
}

// insideStall maps the inside kinds that hold a thread up to the excursion cause they name: GC
// kinds are `gc`, the others their own name. Parks, monitor and socket waits, writes and CPU
// samples are not stalls of their own (an idle thread waits on a monitor for seconds).
var insideStall = map[rundir.InsideKind]CauseKind{
	rundir.InsideGCPause:    CauseGC,
	rundir.InsideSTW:        CauseGC,
	rundir.InsideGCAssist:   CauseGC,
	rundir.InsideSafepoint:  CauseKind(rundir.InsideSafepoint),
	rundir.InsideForce:      CauseKind(rundir.InsideForce),
	rundir.InsideSchedDelay: CauseKind(rundir.InsideSchedDelay),
	rundir.InsideDutyCycle:  CauseKind(rundir.InsideDutyCycle),
}

// causeCoverShare: a source explains an excursion only when its time inside the excursion
// covers at least this share of the excursion's length (the union of its spans clipped to it,
// per node, kind and source). A stall that covers less leaves most of the excursion to something
// else, and naming it would be a guess; half is the least at which the named cause holds the
// larger part of the excursion's time.
const causeCoverShare = 0.5

// stallCauses is what the engines' own stalls explain of one excursion.
type stallCauses struct {
	causes []Cause
	cover  []wspan // the named causes' spans, clipped to the excursion
	// schedCover is, per node, the share of the excursion during which at least one of its
	// threads waited on a run queue (sched_delay of any source): what another process's CPU
	// can have cost the engine.
	schedCover map[string]float64
}

// insideCauses are the engines' own stalls over [from, to] — inside spans (the scheduler
// samples' run-queue waits among them), and the disk model's fsyncs as force from disk_model —
// one cause per node, kind and source, named when its spans cover causeCoverShare of the
// excursion.
func (d *runData) insideCauses(ts *timeSources, from, to int64) stallCauses {
	out := stallCauses{schedCover: map[string]float64{}}
	length := float64(to - from)
	for _, node := range ts.nodes {
		type key struct {
			kind CauseKind
			src  string
		}
		type agg struct {
			n        int
			first    int64
			long     int64
			longWhat string
			threads  []string
			cover    []wspan
			sampled  bool // spans of a sampled total (Share), spread over their intervals
		}
		byKind := map[key]*agg{}
		var order []key
		var sched []wspan
		add := func(sp rundir.InsideSpan) {
			kind, ok := insideStall[sp.Kind]
			if !ok {
				return
			}
			c := span{max(sp.AtNs, from), min(sp.AtNs+sp.DurNs, to)}
			if c.to <= c.from {
				return
			}
			if sp.Kind == rundir.InsideSchedDelay {
				sched = append(sched, insideW(sp, c))
			}
			k := key{kind, sp.Source}
			a := byKind[k]
			if a == nil {
				a = &agg{first: sp.AtNs}
				byKind[k] = a
				order = append(order, k)
			}
			a.n++
			a.cover = append(a.cover, insideW(sp, c))
			a.sampled = a.sampled || sp.Weight() < 1
			if h := sp.Held(); h > a.long {
				a.long, a.longWhat = h, cmp.Or(sp.Detail, sp.File, string(sp.Kind))
			}
			if sp.Thread != "" && !slices.Contains(a.threads, sp.Thread) && len(a.threads) < windowDetails {
				a.threads = append(a.threads, sp.Thread)
			}
		}
		for _, sp := range spansOver(ts.inside[node], from, to) {
			add(sp)
		}
		for _, x := range ts.syncs[node] {
			add(rundir.InsideSpan{AtNs: x.AtNs, DurNs: x.DurNs, Kind: rundir.InsideForce, Source: SourceDiskModel, File: modelFile(x.File, d.man.RunID)})
		}
		if len(sched) > 0 && length > 0 {
			out.schedCover[node] = float64(coverNs(sched)) / length
		}
		for _, k := range order {
			a := byKind[k]
			covered := coverNs(a.cover)
			if length <= 0 || float64(covered) < causeCoverShare*length {
				continue
			}
			what, how, longest := "span(s)", "", "longest"
			switch {
			case k.src == SourceDiskModel:
				what = "fsync(s)"
			case a.sampled:
				what, how, longest = "sample(s)", " (each sample's total spread over its interval)", "most in one sample"
			}
			ev := fmt.Sprintf("%s: %d %s covering %s ms (%.0f %%) of it%s, %s %s ms (%s)", k.src, a.n, what, fmtMsBare(covered), 100*float64(covered)/length, how, longest, fmtMsBare(a.long), a.longWhat)
			if len(a.threads) > 0 {
				ev += " on " + strings.Join(a.threads, ", ")
			}
			out.causes = append(out.causes, Cause{Kind: k.kind, Node: node, AtS: d.off(a.first), Evidence: ev})
			out.cover = append(out.cover, a.cover...)
		}
	}
	return out
}

func fmtMsBare(ns int64) string { return fmt.Sprintf("%.3f", float64(ns)/1e6) }

// windowsSection is report.md's tables of where each window's time went.
func windowsSection(s *Summary) string {
	if len(s.Windows) == 0 {
		return ""
	}
	var b strings.Builder
	pf := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	pf("## Where the time went, by window\n\n")
	pf("%s\n\n", sourcesNote(s.Windows[0].Sources, "windows"))
	for _, w := range s.Windows {
		title := fmt.Sprintf("%s #%d", w.Kind, w.Index)
		if w.Node != "" {
			title += " (" + w.Node + ")"
		}
		open := ""
		if w.Open {
			open = ", open"
		}
		whereTable(&b, fmt.Sprintf("**%s**: %s – %s (%s%s)", title, fmtS3(w.FromS), fmtS3(w.ToS), fmtMs(w.LengthMs()), open),
			w.LengthMs(), w.WhereTime, windowReportRows, "windows")
	}
	b.WriteString("Windows: snapshot = [action, the last node ready at it reported the snapshot]; restart = [kill, ready again]; " +
		"failover = [fault, back to normal] (else the new leader); burst = [due, absorbed]. Per node and thread: the engine's own " +
		"time from its recording (spans clipped to the window; a CPU sample counts its sampling period), the disk model's fsyncs " +
		"(force, source disk_model) and, from the OS samples, other processes' CPU (host_cpu, on the local target once for the machine) " +
		"and the rig agent's (agent_cpu) as CPU time taken, and the time of the samples with dirty pages under writeback or a saturated " +
		"disk (writeback). Count: spans, fsyncs, or samples over the excursions' thresholds. Share: total over the window's length " +
		"(several threads may add up to more than 100 %). Waits (park, monitor, socket) are listed after the rest: a thread waiting is not a cause of its own. " +
		"Unexplained: the window's time no row covers on any node (waits and other processes' CPU do not cover, nor other host samples under the thresholds).\n\n")
	return b.String()
}
