package analysis

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
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

// forces reads every server's disk syncs file and windows it; nil when none has one.
func (d *runData) forces() (*Forces, []string) {
	var warn []string
	syncs := map[string][]rundir.DiskSync{}
	for _, n := range d.nodes {
		ss, err := rundir.ReadDiskSyncs(filepath.Join(d.dir, n, rundir.DiskSyncsFile))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			warn = append(warn, fmt.Sprintf("disk forces of %s: %v", n, err))
			continue
		}
		syncs[n] = ss
	}
	if len(syncs) == 0 {
		return nil, warn
	}
	f := &Forces{Snapshots: []SnapshotForces{}, Nodes: map[string]NodeForces{}}
	wins := map[string][]span{}
	for _, t := range d.snapTakes {
		ss, ok := syncs[t.node]
		if !ok {
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
	return f, warn
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

// writeForces is the report's section on the disk model's forces (nothing without them).
func writeForces(pf func(string, ...any), s *Summary) {
	f := s.Forces
	if f == nil {
		return
	}
	pf("## Disk forces\n\n")
	if len(f.Snapshots) > 0 {
		own := slices.ContainsFunc(f.Snapshots, func(r SnapshotForces) bool { return r.Engine != nil })
		hdr, sep := "| # | node | window | take | persisted | forces | flushed | force time | files (most bytes) |", "|---|---|---|---|---|---|---|---|---|"
		if own {
			hdr, sep = hdr+" engine's own writes: bytes, write time (longest since start) |", sep+"---|"
		}
		pf("%s\n%s\n", hdr, sep)
		for _, r := range f.Snapshots {
			pf("| %d | %s | %s – %s | %s | %s | %d | %s | %s | %s |", r.Snapshot, r.Node, fmtS(r.FromS), fmtS(r.ToS),
				fmtMs(r.TakeMs), fmtMs(r.PersistedMs), r.Syncs, fmtFlushed(r.Bytes), fmtMs(r.TimeMs), filesCell(r.Files))
			if own {
				pf(" %s |", engineWritesCell(r.Engine))
			}
			pf("\n")
		}
		pf("\n")
		if own {
			pf("Engine's own writes: what the engine counted itself from the take's start to its persist (%s), every file it "+
				"wrote in that time; its write time includes the syncs where the engine times a write and its sync together "+
				"(Aeron's Archive does). The model's forces and flushed bytes are the same writes seen from the disk.\n\n",
				engineWritesSources(f.Snapshots))
		}
	}
	pf("| node | forces over the load | in snapshot windows | the rest | the rest's files (most forces) |\n|---|---|---|---|---|\n")
	for _, n := range sortedKeys(f.Nodes) {
		nf := f.Nodes[n]
		pf("| %s | %s | %s | %s | %s |\n", n, countCell(nf.Load), countCell(nf.InSnapshots), countCell(nf.Rest), filesCell(nf.RestFiles))
	}
	pf("\nForces: every fsync the node's disk model completed (%s), the bytes each flushed (written to the file since its "+
		"previous fsync) and the time its caller was held, the model's hold included. A snapshot's window runs from the "+
		"snapshot action to the node's report of that snapshot, so it holds the take and the persist, and whatever the log "+
		"forced meanwhile.\n\n", "`<node>/"+rundir.DiskSyncsFile+"`")
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
