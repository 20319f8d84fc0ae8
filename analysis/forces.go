package analysis

import (
	"cmp"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/stats"
)

// Forces are the disk model's fsyncs of each server (rundir.DiskSyncsFile) counted in the run's
// windows: per snapshot and node, those from the snapshot action to the node's report of the
// snapshot (its take and persist), beside the take and persisted time the engine reported; per
// node over the load, those in snapshot windows and the rest, with the files that took most.
// Absent when no node ran on a disk model that records them (the local target's).
type Forces struct {
	Snapshots []SnapshotForces      `json:"snapshots"`
	Nodes     map[string]NodeForces `json:"nodes"`
}

// ForceCount is a number of fsyncs, the bytes they flushed and the time their callers were held.
type ForceCount struct {
	Syncs  int64   `json:"syncs"`
	Bytes  int64   `json:"bytes"`
	TimeMs float64 `json:"time_ms"`
}

func (c *ForceCount) add(s rundir.DiskSync) {
	c.Syncs++
	c.Bytes += s.Bytes
	c.TimeMs += float64(s.DurNs) / 1e6
}

// SnapshotForces is one node's forces in one snapshot's window.
type SnapshotForces struct {
	Snapshot    int     `json:"snapshot"` // 1-based row of Summary.Snapshots
	Node        string  `json:"node"`
	FromS       float64 `json:"from_s"` // the snapshot action
	ToS         float64 `json:"to_s"`   // the node reported the snapshot
	TakeMs      float64 `json:"take_ms"`
	PersistedMs float64 `json:"persisted_ms"`
	ForceCount
	// Engine is the engine's own count of its writes from the take to the persist, where it
	// reports one (engine.Snapshot.EngineWrites): shown beside the model's forces.
	Engine *engine.EngineWrites `json:"engine_writes,omitempty"`
	// Files are the files forced in the window, most bytes first (at most forceFiles).
	Files []FileForces `json:"files,omitempty"`
	// SnapFile is the snapshot's own file: of the files first written or forced in the window,
	// the one forced (else written) most; for the Aeron engine the Archive's recording of the
	// snapshot (<recording id>-<base>.rec). By base name, which the disk model's and the
	// engine's paths share. Empty when nothing new was written or forced.
	SnapFile string `json:"snapshot_file,omitempty"`
	// SnapModel is the disk model's fsyncs of SnapFile in the window.
	SnapModel *ForceCount `json:"snapshot_file_model,omitempty"`
	// Inside is the engine's own recording of its forces in the window (rundir.InsideFile: JFR
	// on a JVM engine), when it has one.
	Inside *InsideForces `json:"inside,omitempty"`
}

// InsideForces are the forces an engine recorded itself (jdk.FileForce, a Go trace's fsyncs)
// in a snapshot window: all of them, and those of the snapshot's file. Bytes are not known.
type InsideForces struct {
	Source string     `json:"source"` // rundir.InsideSpan.Source: jfr, go_trace
	All    ForceCount `json:"all"`
	Snap   ForceCount `json:"snapshot_file"`
	// Step is the stretch from the end of the take to the persisted point, placed on the
	// engine's clock by the snapshot file's first write or force (the take's start, give or
	// take the moment the engine opened the file): the forces that overlap it, their overlap
	// and its share of persisted − take. Absent without a persisted time above the take.
	Step *StepForces `json:"step,omitempty"`
}

// StepForces attributes a snapshot's step from take to persisted to forces.
type StepForces struct {
	FromS  float64      `json:"from_s"` // take end, from load start
	ToS    float64      `json:"to_s"`   // persisted
	StepMs float64      `json:"step_ms"`
	Forces ForceCount   `json:"forces"` // TimeMs: their overlap with the step
	Share  float64      `json:"share"`  // Forces.TimeMs / StepMs
	Files  []FileForces `json:"files,omitempty"`
	// Writes are the file writes under way in the step (jdk.FileWrite), timed the same way: on
	// the disk model each is a copy through FUSE, which a real volume's page cache makes
	// cheap, so a step the forces leave unexplained is often these.
	Writes SpanCount `json:"writes"`
	// IOShare is the step's time under a force or a write (their union, so a write on one
	// thread beside a force on another counts once) over StepMs.
	IOShare float64 `json:"io_share"`
}

// SpanCount is a count of an engine's own spans and their time (bytes are not recorded).
type SpanCount struct {
	Count  int64   `json:"count"`
	TimeMs float64 `json:"time_ms"`
}

// NodeForces are one node's forces over the load [load start, load end].
type NodeForces struct {
	Load        ForceCount   `json:"load"`
	InSnapshots ForceCount   `json:"in_snapshots"` // in its snapshot windows (SnapshotForces)
	Rest        ForceCount   `json:"rest"`         // outside them: the log's forces, mostly
	RestFiles   []FileForces `json:"rest_files,omitempty"`
}

// FileForces is one file's share.
type FileForces struct {
	File string `json:"file"`
	ForceCount
}

// forceFiles bounds the files listed per window.
const forceFiles = 3

// snapTake is a node's report of a snapshot matched to its action (snapshotRows).
type snapTake struct {
	row                 int // index in Summary.Snapshots
	node                string
	from, to            int64
	takeMs, persistedMs float64
	engine              *engine.EngineWrites
}

// forces reads every server's disk syncs file and windows it, beside the forces and writes
// the engine recorded itself (rundir.InsideFile); nil when no node has either.
func (d *runData) forces() (*Forces, []string) {
	syncs, warn := d.diskSyncs()
	inside := map[string][]rundir.InsideSpan{}
	for n, in := range d.insideSpans() {
		var fw []rundir.InsideSpan // sorted by start, as insideSpans keeps them
		for _, sp := range in {
			if sp.Kind == rundir.InsideForce || sp.Kind == rundir.InsideWrite {
				fw = append(fw, sp)
			}
		}
		if len(fw) > 0 {
			inside[n] = fw
		}
	}
	if len(syncs) == 0 && len(inside) == 0 {
		return nil, warn
	}
	f := &Forces{Snapshots: []SnapshotForces{}, Nodes: map[string]NodeForces{}}
	wins := map[string][]span{}
	for _, t := range d.snapTakes {
		ss, ok := syncs[t.node]
		in, okIn := inside[t.node]
		if !ok && !okIn {
			continue
		}
		sf := SnapshotForces{Snapshot: t.row + 1, Node: t.node, FromS: d.off(t.from), ToS: d.off(t.to), TakeMs: t.takeMs, PersistedMs: t.persistedMs, Engine: t.engine}
		files := map[string]*ForceCount{}
		for _, x := range ss {
			if x.AtNs >= t.from && x.AtNs <= t.to {
				sf.add(x)
				addFile(files, x)
			}
		}
		sf.Files = topFiles(files, func(c ForceCount) int64 { return c.Bytes })
		snapFileForces(&sf, t, ss, in)
		f.Snapshots = append(f.Snapshots, sf)
		wins[t.node] = append(wins[t.node], span{t.from, t.to})
	}
	for n, ss := range syncs {
		var nf NodeForces
		files := map[string]*ForceCount{}
		for _, x := range ss {
			if x.AtNs < d.origin || x.AtNs > d.loadEnd {
				continue
			}
			nf.Load.add(x)
			if inAny(x.AtNs, wins[n]) {
				nf.InSnapshots.add(x)
			} else {
				nf.Rest.add(x)
				addFile(files, x)
			}
		}
		nf.RestFiles = topFiles(files, func(c ForceCount) int64 { return c.Syncs })
		f.Nodes[n] = nf
	}
	if len(syncs) == 0 && len(f.Snapshots) == 0 {
		return nil, warn // an engine's own forces, and no snapshot to set them in
	}
	return f, warn
}

// snapFileForces finds the snapshot's own file in a window (the new file forced, else written,
// most) and counts its forces by the disk model and by the engine's recording.
func snapFileForces(sf *SnapshotForces, t snapTake, ss []rundir.DiskSync, in []rundir.InsideSpan) {
	before := map[string]bool{}                           // base names written or forced before the window
	forced, written := map[string]int{}, map[string]int{} // new files in the window
	for _, x := range ss {
		b := filepath.Base(x.File)
		switch {
		case x.AtNs < t.from:
			before[b] = true
		case x.AtNs <= t.to:
			forced[b]++
		}
	}
	for _, x := range in {
		if x.File == "" {
			continue
		}
		b := filepath.Base(x.File)
		switch {
		case x.AtNs < t.from:
			before[b] = true
		case x.AtNs <= t.to && x.Kind == rundir.InsideForce:
			forced[b]++
		case x.AtNs <= t.to:
			written[b]++
		}
	}
	best := func(m map[string]int) string {
		var name string
		for b, n := range m {
			if before[b] {
				continue
			}
			if name == "" || n > m[name] || n == m[name] && b < name {
				name = b
			}
		}
		return name
	}
	if sf.SnapFile = best(forced); sf.SnapFile == "" {
		sf.SnapFile = best(written)
	}
	if len(ss) > 0 && sf.SnapFile != "" {
		var c ForceCount
		for _, x := range ss {
			if x.AtNs >= t.from && x.AtNs <= t.to && filepath.Base(x.File) == sf.SnapFile {
				c.add(x)
			}
		}
		sf.SnapModel = &c
	}
	if len(in) == 0 {
		return
	}
	ins := &InsideForces{Source: in[0].Source}
	for _, x := range in {
		if x.Kind != rundir.InsideForce || x.AtNs < t.from || x.AtNs > t.to {
			continue
		}
		ms := float64(x.DurNs) / 1e6
		ins.All.Syncs++
		ins.All.TimeMs += ms
		if sf.SnapFile != "" && filepath.Base(x.File) == sf.SnapFile {
			ins.Snap.Syncs++
			ins.Snap.TimeMs += ms
		}
	}
	sf.Inside = ins
	var first int64
	for _, x := range in {
		if x.File != "" && x.AtNs >= t.from && x.AtNs <= t.to && filepath.Base(x.File) == sf.SnapFile {
			first = x.AtNs
			break // in is sorted by time
		}
	}
	if first == 0 || t.persistedMs <= t.takeMs {
		return
	}
	lo, hi := first+int64(t.takeMs*1e6), first+int64(t.persistedMs*1e6)
	st := &StepForces{FromS: sf.FromS + float64(lo-t.from)/1e9, ToS: sf.FromS + float64(hi-t.from)/1e9, StepMs: t.persistedMs - t.takeMs}
	files := map[string]*ForceCount{}
	var busy []span // forces' and writes' overlaps with the step, for IOShare
	for _, x := range in {
		if x.Kind != rundir.InsideForce && x.Kind != rundir.InsideWrite {
			continue
		}
		ov := min(x.AtNs+x.DurNs, hi) - max(x.AtNs, lo)
		if ov <= 0 {
			continue
		}
		busy = append(busy, span{max(x.AtNs, lo), min(x.AtNs+x.DurNs, hi)})
		if x.Kind == rundir.InsideWrite {
			st.Writes.Count++
			st.Writes.TimeMs += float64(ov) / 1e6
			continue
		}
		st.Forces.Syncs++
		st.Forces.TimeMs += float64(ov) / 1e6
		name := filepath.Base(x.File)
		if files[name] == nil {
			files[name] = &ForceCount{}
		}
		files[name].Syncs++
		files[name].TimeMs += float64(ov) / 1e6
	}
	st.Share = st.Forces.TimeMs / st.StepMs
	st.IOShare = float64(unionNs(busy)) / 1e6 / st.StepMs
	st.Files = topFiles(files, func(c ForceCount) int64 { return int64(c.TimeMs * 1e3) })
	ins.Step = st
}

func addFile(m map[string]*ForceCount, x rundir.DiskSync) {
	c := m[x.File]
	if c == nil {
		c = &ForceCount{}
		m[x.File] = c
	}
	c.add(x)
}

func topFiles(m map[string]*ForceCount, key func(ForceCount) int64) []FileForces {
	out := make([]FileForces, 0, len(m))
	for name, c := range m {
		out = append(out, FileForces{File: name, ForceCount: *c})
	}
	slices.SortFunc(out, func(a, b FileForces) int {
		return cmp.Or(cmp.Compare(key(b.ForceCount), key(a.ForceCount)), strings.Compare(a.File, b.File))
	})
	return out[:min(len(out), forceFiles)]
}

// SnapshotForceFigures are a snapshot window's forces on one node (SnapshotForces): the disk
// model's, in report.md's table of them, and the engine's own where it recorded them, in the
// table set beside it; summary.json pools them (pooled.forces), the sweep has a table of them.
var SnapshotForceFigures = []RowFigure[SnapshotForces]{
	{Figure: Figure{Key: "forces", Label: "forces", Unit: "fsyncs", Dir: stats.LowerIsBetter}, Plain: true, Get: func(r SnapshotForces) (float64, bool) { return float64(r.Syncs), true }},
	{Figure: Figure{Key: "flushed", Label: "flushed", Unit: "MiB", Dir: stats.Neutral}, Show: showMiB, Get: func(r SnapshotForces) (float64, bool) { return mib(r.Bytes), true }},
	{Figure: Figure{Key: "force_time", Label: "force time", Unit: "ms", Dir: stats.LowerIsBetter}, Get: func(r SnapshotForces) (float64, bool) { return r.TimeMs, true }},
	// The engine's own recording (SnapshotForces.Inside).
	{Figure: Figure{Key: "engine_snapshot_forces", Label: "engine's forces of the snapshot's file", Unit: "forces", Dir: stats.LowerIsBetter}, Plain: true,
		Get: insideFig(func(in *InsideForces) (float64, bool) { return float64(in.Snap.Syncs), true })},
	{Figure: Figure{Key: "engine_snapshot_force_time", Label: "engine's force time on the snapshot's file", Unit: "ms", Dir: stats.LowerIsBetter},
		Get: insideFig(func(in *InsideForces) (float64, bool) { return in.Snap.TimeMs, true })},
	{Figure: Figure{Key: "engine_forces", Label: "engine's forces in the window", Unit: "forces", Dir: stats.LowerIsBetter}, Plain: true,
		Get: insideFig(func(in *InsideForces) (float64, bool) { return float64(in.All.Syncs), true })},
	{Figure: Figure{Key: "step", Label: "persisted − take", Unit: "ms", Dir: stats.LowerIsBetter},
		Get: stepFig(func(st *StepForces) float64 { return st.StepMs })},
	{Figure: Figure{Key: "step_force_share", Label: "forces' share of persisted − take", Unit: "%", Dir: stats.Neutral}, Show: wholePct,
		Get: stepFig(func(st *StepForces) float64 { return 100 * st.Share })},
	{Figure: Figure{Key: "step_io_share", Label: "forces' and writes' share of persisted − take", Unit: "%", Dir: stats.Neutral}, Show: wholePct,
		Get: stepFig(func(st *StepForces) float64 { return 100 * st.IOShare })},
}

// insideFigures are the keys of SnapshotForceFigures read from the engine's own recording: the
// disk model's table leaves them to the engine's.
var insideFigures = []string{"engine_snapshot_forces", "engine_snapshot_force_time", "engine_forces", "step", "step_force_share", "step_io_share"}

// insideFig reads a figure from the engine's own record of a window's forces, where it has one.
func insideFig(f func(*InsideForces) (float64, bool)) func(SnapshotForces) (float64, bool) {
	return func(r SnapshotForces) (float64, bool) {
		if r.Inside == nil {
			return 0, false
		}
		return f(r.Inside)
	}
}

// stepFig reads a figure of the step from take to persisted, where the engine's record has one.
func stepFig(f func(*StepForces) float64) func(SnapshotForces) (float64, bool) {
	return insideFig(func(in *InsideForces) (float64, bool) {
		if in.Step == nil {
			return 0, false
		}
		return f(in.Step), true
	})
}

// NodeForceRow is one node's forces over the load, a row of report.md's table of them.
type NodeForceRow struct {
	Node string
	NodeForces
}

// NodeForceRows are the run's nodes with a disk model, by name.
func NodeForceRows(s *Summary) []NodeForceRow {
	if s.Forces == nil {
		return nil
	}
	var out []NodeForceRow
	for _, n := range sortedKeys(s.Forces.Nodes) {
		out = append(out, NodeForceRow{n, s.Forces.Nodes[n]})
	}
	return out
}

// SnapshotForceRows are the run's snapshot windows with forces, per node.
func SnapshotForceRows(s *Summary) []SnapshotForces {
	if s.Forces == nil {
		return nil
	}
	return s.Forces.Snapshots
}

// NodeForceFigures are a node's forces over the load, in its snapshot windows and in the rest:
// report.md's table of them (each part's count, bytes and time in one cell), summary.json's
// pooled node_forces and the sweep's table of them.
var NodeForceFigures = slices.Concat(
	forceCountFigures("load", "over the load", func(r NodeForceRow) ForceCount { return r.Load }),
	forceCountFigures("in_snapshots", "in snapshot windows", func(r NodeForceRow) ForceCount { return r.InSnapshots }),
	forceCountFigures("rest", "outside snapshot windows", func(r NodeForceRow) ForceCount { return r.Rest }),
)

// forceCountFigures are a ForceCount's figures, keyed and labelled by what it counts.
func forceCountFigures(key, label string, get func(NodeForceRow) ForceCount) []RowFigure[NodeForceRow] {
	return []RowFigure[NodeForceRow]{
		{Figure: Figure{Key: key + "_forces", Label: "forces " + label, Unit: "fsyncs", Dir: stats.LowerIsBetter}, Plain: true,
			Get: func(r NodeForceRow) (float64, bool) { return float64(get(r).Syncs), true }},
		{Figure: Figure{Key: key + "_flushed", Label: "flushed " + label, Unit: "MiB", Dir: stats.Neutral}, Show: showMiB,
			Get: func(r NodeForceRow) (float64, bool) { return mib(get(r).Bytes), true }},
		{Figure: Figure{Key: key + "_force_time", Label: "force time " + label, Unit: "ms", Dir: stats.LowerIsBetter},
			Get: func(r NodeForceRow) (float64, bool) { return get(r).TimeMs, true }},
	}
}

// countCol is a ForceCount's column of the node table: its three figures in one cell.
func countCol(head, key string, get func(NodeForceRow) ForceCount) Column[NodeForceRow] {
	return showing(col(head, func(r NodeForceRow) string { return countCell(get(r)) }), key+"_forces", key+"_flushed", key+"_force_time")
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }

// showMiB writes a byte count given in MiB as a measured one (fmtFlushed).
func showMiB(v float64) string { return fmtFlushed(int64(math.Round(v * (1 << 20)))) }

func wholePct(v float64) string { return fmt.Sprintf("%.0f %%", v) }

// writeForces is the report's section on the disk model's forces (nothing without them): its
// tables' own columns with the declared figures (SnapshotForceFigures, NodeForceFigures) placed
// among them, and any other declared after them.
func writeForces(b *strings.Builder, s *Summary) {
	pf := pfTo(b)
	f := s.Forces
	if f == nil {
		return
	}
	pf("## Disk forces\n\n")
	if len(f.Snapshots) > 0 && len(f.Nodes) > 0 { // the disk model's (Nodes: those with a model)
		var rows []SnapshotForces
		for _, r := range f.Snapshots {
			if _, model := f.Nodes[r.Node]; model {
				rows = append(rows, r)
			}
		}
		own := slices.ContainsFunc(f.Snapshots, func(r SnapshotForces) bool { return r.Engine != nil })
		cs := []Column[SnapshotForces]{
			col("#", func(r SnapshotForces) string { return fmt.Sprint(r.Snapshot) }),
			col("node", func(r SnapshotForces) string { return r.Node }),
			col("window", func(r SnapshotForces) string { return fmtS(r.FromS) + " – " + fmtS(r.ToS) }),
			col("take", func(r SnapshotForces) string { return fmtMs(r.TakeMs) }),
			col("persisted", func(r SnapshotForces) string { return fmtMs(r.PersistedMs) }),
			figCol(SnapshotForceFigures, "forces", ""),
			figCol(SnapshotForceFigures, "flushed", ""),
			figCol(SnapshotForceFigures, "force_time", ""),
			col("files (most bytes)", func(r SnapshotForces) string { return filesCell(r.Files) }),
		}
		if own {
			cs = append(cs, col("engine's own writes: bytes, write time (longest since start)", func(r SnapshotForces) string { return engineWritesCell(r.Engine) }))
		}
		writeTable(b, figureTable(SnapshotForceFigures, rows, cs, insideFigures...), rows)
		if own {
			pf("Engine's own writes: what the engine counted itself from the take's start to its persist (%s), every file it "+
				"wrote in that time; its write time includes the syncs where the engine times a write and its sync together "+
				"(Aeron's Archive does). The model's forces and flushed bytes are the same writes seen from the disk.\n\n",
				engineWritesSources(f.Snapshots))
		}
	}
	writeInsideForces(b, f)
	if len(f.Nodes) == 0 {
		return
	}
	rows := NodeForceRows(s)
	writeTable(b, figureTable(NodeForceFigures, rows, []Column[NodeForceRow]{
		col("node", func(r NodeForceRow) string { return r.Node }),
		countCol("forces over the load", "load", func(r NodeForceRow) ForceCount { return r.Load }),
		countCol("in snapshot windows", "in_snapshots", func(r NodeForceRow) ForceCount { return r.InSnapshots }),
		countCol("the rest", "rest", func(r NodeForceRow) ForceCount { return r.Rest }),
		col("the rest's files (most forces)", func(r NodeForceRow) string { return filesCell(r.RestFiles) }),
	}), rows)
	pf("Forces: every fsync the node's disk model completed (%s), the bytes each flushed (written to the file since its "+
		"previous fsync) and the time its caller was held, the model's hold included. A snapshot's window runs from the "+
		"snapshot action to the node's report of that snapshot, so it holds the take and the persist, and whatever the log "+
		"forced meanwhile.\n\n", "`<node>/"+rundir.DiskSyncsFile+"`")
}

// writeInsideForces sets the engine's own count of its forces (JFR's jdk.FileForce) beside the
// disk model's, per snapshot window, on the snapshot's file, and attributes the step from the
// take to the persisted point to the forces under way in it.
func writeInsideForces(b *strings.Builder, f *Forces) {
	var rows []SnapshotForces
	for _, r := range f.Snapshots {
		if r.Inside != nil {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	pf := pfTo(b)
	pf("Forces the engine recorded itself (%s), beside the disk model's:\n\n", rows[0].Inside.Source)
	count := func(n int64, ms float64) string { return fmt.Sprintf("%d, %s", n, fmtMs(ms)) }
	step := func(f func(st *StepForces) string) func(SnapshotForces) string {
		return func(r SnapshotForces) string {
			if st := r.Inside.Step; st != nil {
				return f(st)
			}
			return "—"
		}
	}
	writeTable(b, figureTable(SnapshotForceFigures, rows, []Column[SnapshotForces]{
		col("#", func(r SnapshotForces) string { return fmt.Sprint(r.Snapshot) }),
		col("node", func(r SnapshotForces) string { return r.Node }),
		col("snapshot's file", func(r SnapshotForces) string { return orDash(r.SnapFile) }),
		col("model's fsyncs of it", func(r SnapshotForces) string {
			if r.SnapModel == nil {
				return "—"
			}
			return count(r.SnapModel.Syncs, r.SnapModel.TimeMs)
		}),
		figCol(SnapshotForceFigures, "engine_snapshot_forces", "engine's forces of it"),
		figCol(SnapshotForceFigures, "engine_snapshot_force_time", "their time"),
		showing(col("engine's forces in the window", func(r SnapshotForces) string { return count(r.Inside.All.Syncs, r.Inside.All.TimeMs) }), "engine_forces"),
		figCol(SnapshotForceFigures, "step", ""),
		col("forces in it", step(func(st *StepForces) string { return count(st.Forces.Syncs, st.Forces.TimeMs) })),
		figCol(SnapshotForceFigures, "step_force_share", "share"),
		col("writes in it", step(func(st *StepForces) string { return count(st.Writes.Count, st.Writes.TimeMs) })),
		figCol(SnapshotForceFigures, "step_io_share", "share with writes"),
		col("files (most time)", step(func(st *StepForces) string {
			if len(st.Files) == 0 {
				return "—"
			}
			parts := make([]string, len(st.Files))
			for i, x := range st.Files {
				parts[i] = fmt.Sprintf("%s (%d, %s)", x.File, x.Syncs, fmtMs(x.TimeMs))
			}
			return strings.Join(parts, "; ")
		})),
	}, "forces", "flushed", "force_time"), rows) // the disk model's, in its own table
	pf("The snapshot's file is the file first written or forced in the window that was forced (else written) most: on the " +
		"Aeron engine the Archive's recording of the snapshot. The step from take to persisted is placed on the engine's " +
		"clock by that file's first write (the take's start): its forces are those under way in it, timed by their " +
		"overlap, and share is their time over persisted − take; writes in it are the file writes under way in the step (on " +
		"the disk model each a copy through FUSE), and share with writes the step's time under a force or a write.\n\n")
}

func engineWritesCell(w *engine.EngineWrites) string {
	if w == nil {
		return "—"
	}
	return fmt.Sprintf("%s, %s (%s)", fmtFlushed(w.Bytes), fmtMs(w.TimeMs), fmtMs(w.MaxMs))
}

// engineWritesSources names what counted the engines' own writes, each once.
func engineWritesSources(rs []SnapshotForces) string {
	var out []string
	for _, r := range rs {
		if r.Engine != nil && r.Engine.Source != "" && !slices.Contains(out, r.Engine.Source) {
			out = append(out, r.Engine.Source)
		}
	}
	if len(out) == 0 {
		return "source not given"
	}
	return strings.Join(out, "; ")
}

func countCell(c ForceCount) string {
	return fmt.Sprintf("%d, %s, %s", c.Syncs, fmtFlushed(c.Bytes), fmtMs(c.TimeMs))
}

func filesCell(fs []FileForces) string {
	if len(fs) == 0 {
		return "—"
	}
	parts := make([]string, len(fs))
	for i, x := range fs {
		parts[i] = fmt.Sprintf("%s (%d, %s)", x.File, x.Syncs, fmtFlushed(x.Bytes))
	}
	return strings.Join(parts, "; ")
}

// fmtFlushed is a measured byte count, rounded (fmtBytes is for exact sizes).
func fmtFlushed(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
