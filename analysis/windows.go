package analysis

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"slices"
	"strings"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/rundir"
)

// Where the time went, window by window (docs/results.md): every snapshot, restart, failover and burst
// window gets a table of causes per node and thread — the engine's own time from its recording
// (<node>/inside.ndjson: forces with their file's role, GC pauses, safepoints, stop-the-world,
// GC assists, scheduler delay, parks, monitor waits, CPU samples), the always-on pause records,
// the disk model's fsyncs (<node>/disk-syncs.ndjson), the pressure stalls and the host causes of
// the OS samples (another process's CPU, the rig agents' own, disk writeback) — with the time no
// cause covers, from the run's one stream of cause spans and its judge (spans.go).

// WindowKind names a kind of window, each the window of a row kind's rows and named as it; the
// names are summary.json's and stable.
type WindowKind string

const (
	WindowSnapshot WindowKind = WindowKind(actions.ShapeSnapshot) // the snapshot's request → the last node ready at it reported the snapshot
	WindowRestart  WindowKind = WindowKind(actions.ShapeRestart)  // the node put down → ready again (restore, replay, catch-up)
	WindowFailover WindowKind = WindowKind(actions.ShapeFailover) // the fault → back to normal (else the new leader)
	WindowBurst    WindowKind = WindowKind(actions.ShapeBurst)    // the burst's due time → absorbed
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
	// Causes are the causes named for the window by the excursions' rule (judge): those whose
	// spans cover causeCoverShare of it; CoveredMs the time their spans cover.
	Causes    []Cause `json:"causes,omitempty"`
	CoveredMs float64 `json:"covered_ms,omitempty"`
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

// readInsideSource adds the engines' recordings.
func readInsideSource(d *runData, st *spanStream) {
	for n, ss := range d.insideSpans() {
		cs := make([]causeSpan, len(ss))
		for i, sp := range ss {
			cs[i] = fromInside(sp)
		}
		st.add(n, cs...)
	}
}

// readSchedSource adds every node's scheduler samples (<node>/sched/*.ndjson): the run-queue
// waits as sched_delay spans per thread (rundir.SchedSample.Spans), and the pressure stalls
// (psi.go).
func readSchedSource(d *runData, st *spanStream) {
	samples := map[string][]rundir.SchedSample{}
	for _, f := range d.glob(rundir.SchedGlob) {
		node := path.Base(path.Dir(path.Dir(f)))
		ss, err := d.run.Sched(f)
		if err != nil {
			d.warnf("scheduler samples %s: %v", f, err)
		}
		var cs []causeSpan
		for _, smp := range ss {
			for _, sp := range smp.Spans() {
				cs = append(cs, fromInside(sp))
			}
		}
		st.add(node, cs...)
		samples[node] = append(samples[node], ss...)
	}
	st.psi = psiOf(samples, d.man.Target == "local")
	st.pressure = d.hostPressure(st.psi)
	st.psiUsual = map[string][]float64{}
	for _, s := range st.psi {
		u := s.usual(d.warmupEnd, d.loadEnd)
		st.psiUsual[s.node] = u
		st.add(s.node, s.spans(u)...)
	}
}

// readDiskSyncSource adds the disk model's fsyncs, as force from disk_model. A sync of a file in
// the engine's log store (rundir.InRaftDir) is the one engine_syncs records too: it is judged on
// the commit path like that one.
func readDiskSyncSource(d *runData, st *spanStream) {
	syncs, warn := d.diskSyncs()
	for _, w := range warn {
		d.warnf("%s", w)
	}
	for n, ss := range syncs {
		st.has(SourceDiskModel)
		for _, x := range ss {
			c := causeSpan{at: x.AtNs, dur: x.DurNs, cause: string(rundir.InsideForce), source: SourceDiskModel, detail: modelFile(x.File, d.man.RunID),
				w: 1, cover: 1, counted: true, names: CauseKind(rundir.InsideForce)}
			if rundir.InRaftDir(c.detail) {
				c.onCommitPath()
			}
			st.add(n, c)
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

// whereTime is the judgement of [from, to] (unix ns) with its table's sources. Windows and
// excursions both call it, each with what it measures (sc: which engine phases cover it).
func (d *runData) whereTime(st *spanStream, from, to int64, sc phaseScope) judgement {
	j := d.judge(st, from, to, sc)
	j.where.Sources = sc.sources(d.sourcesOver(st.srcNames, from, to))
	return j
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
func (d *runData) windows(s *Summary, st *spanStream) []TimeWindow {
	ws := d.windowSpans(s)
	for i := range ws {
		w := &ws[i]
		j := d.whereTime(st, d.origin+int64(math.Round(w.FromS*1e9)), d.origin+int64(math.Round(w.ToS*1e9)), d.windowScope(s, *w))
		w.WhereTime, w.Causes, w.CoveredMs = j.where, j.causes, nsToMs(j.coveredNs)
	}
	return ws
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

func fmtMsBare(ns int64) string { return fmt.Sprintf("%.3f", float64(ns)/1e6) }

// windowsSection is report.md's tables of where each window's time went.
func windowsSection(s *Summary) string {
	if len(s.Windows) == 0 {
		return ""
	}
	var b strings.Builder
	pf := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	pf("## Where the time went, by window\n\n")
	pf("%s%s\n\n", sourcesNote(s.Windows[0].Sources, "windows"), causeSourcesOffNote(s))
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
		"time from its recording (spans clipped to the window; a CPU sample counts its sampling period), its GC log's pauses (gc_pause, source gc_log, " +
		"each over the safepoint it ran in), its pause records (a Go engine's GC pauses; an Aeron agent's long cycles, duty_cycle), " +
		"its own phases (snapshot_capture, snapshot_persist, restore, join, replay, catch_up; source engine_phases), which cover only where they block what the window measures " +
		"(a snapshot window: every node's snapshot phases; a restart window: the relaunched node's until ready, with the timeline's down and start), the disk model's fsyncs (force, source disk_model), the pressure stalls (psi_cpu, psi_io, psi_memory, source psi) and, from the OS samples, other processes' CPU (host_cpu, on the local target once for the machine) " +
		"and the rig agent's (agent_cpu) as CPU time taken, and the time of the samples with dirty pages under writeback or a saturated " +
		"disk (writeback). Count: spans, fsyncs, or samples over the excursions' thresholds. Share: total over the window's length " +
		"(several threads may add up to more than 100 %). Waits (park, monitor, socket) are listed after the rest: a thread waiting is not a cause of its own. " +
		"Unexplained: the window's time no row covers on any node (waits, other processes' CPU, phases beside what the window measures, log syncs that held no commit, a JVM's housekeeping threads' waits and pressure stalls at or below the run's usual level do not cover, nor other host samples under the thresholds).\n\n")
	return b.String()
}

// causeSourcesOffNote says, where the run turned the always-on cause sources off, that their
// causes are missing by design.
func causeSourcesOffNote(s *Summary) string {
	if !s.CauseSourcesOff {
		return ""
	}
	return " **The always-on cause sources were off** (`cause_sources: off`: no scheduler or pressure samples, no engine pause or phase records), to price them: what they would explain is unexplained here."
}
