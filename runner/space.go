package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/agent/facts"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
)

// ErrDiskSpace classifies a run refused before any engine started because its engines' data
// would not fit on their filesystems.
var ErrDiskSpace = errors.New("not enough disk space for the run's engine data")

// workload is what a run of pb makes each server write, for the driver's estimate; installed
// says a stored book is put in the snapshots folder instead of a preload through the log.
func workload(pb *playbooks.Playbook, clients int, installed bool) driver.Workload {
	w := driver.Workload{Orders: pb.Preload.Orders, BookInstalled: installed, PreloadBatch: loadspec.DefaultBatch,
		Probes: int64(math.Ceil(pb.Load.ProbeRate * pb.Duration.Seconds()))}
	for _, a := range pb.Timeline {
		if wa, ok := a.Spec.(actions.WriteAdder); ok {
			wa.AddWrites(&w, clients)
		}
	}
	return w
}

// checkSpace asks every server's agent how much room the filesystem holding its engine data
// has, and the one holding its engine's recordings when the run records, and refuses the run,
// before any engine starts, when the estimate does not fit. Servers whose data or recordings
// share a filesystem (every node of the local target) are counted together. Only an engine whose
// driver is a driver.WriteEstimator is checked.
func (r *run) checkSpace(ctx context.Context) error {
	est, ok := r.pb.Engine.EngineDriver().(driver.WriteEstimator)
	if !ok {
		r.progress("the %s engine does not say what it writes: free space for its data is not checked", r.pb.Engine.DriverName())
		return nil
	}
	w := est.EstimateWrites(workload(r.pb, len(r.inv.Clients()), r.book != nil && r.book.Reused))
	recs := RecordingBudgetOf(r.pb)
	if !recs.Known {
		r.progress("the %s engine's recordings are not bounded ahead: free space for them is not checked", r.pb.Engine.DriverName())
	}
	type shared struct {
		sp         facts.Space
		data, recs []string // the servers whose data, whose recordings, are on it
	}
	var groups []*shared
	byFS := map[string]*shared{}
	on := func(node, path string) (*shared, facts.Space, error) {
		sp, err := r.agent(node).DiskSpace(ctx, path)
		if err != nil {
			return nil, sp, fmt.Errorf("free space for %s on %s: %w", path, node, err)
		}
		g := byFS[sp.Filesystem]
		if g == nil {
			g = &shared{sp: sp}
			byFS[sp.Filesystem] = g
			groups = append(groups, g)
		}
		return g, sp, nil
	}
	rec := map[string]rundir.DataSpace{}
	for _, n := range r.servers {
		g, sp, err := on(n.Name, r.dataDir(n))
		if err != nil {
			return err
		}
		g.data = append(g.data, n.Name)
		rec[n.Name] = rundir.DataSpace{Space: sp, WritesBytes: w.Total()}
		if recs.DiskBytes > 0 {
			// In the agent's folder (a relative path is), collected with the node's files.
			g, _, err := on(n.Name, rundir.RecordingsDir)
			if err != nil {
				return err
			}
			g.recs = append(g.recs, n.Name)
		}
	}
	var errs []error
	for _, g := range groups {
		for _, n := range g.data {
			d := rec[n]
			d.SharedWith = len(g.data)
			rec[n] = d
		}
		need := w.Total()*int64(len(g.data)) + recs.DiskBytes*int64(len(g.recs))
		if need <= g.sp.FreeBytes {
			continue
		}
		var parts []string
		if len(g.data) > 0 {
			parts = append(parts, dataWrites(w, len(g.data)))
		}
		if len(g.recs) > 0 {
			parts = append(parts, recordingWrites(recs, len(g.recs)))
		}
		who := g.data
		if len(who) == 0 {
			who = g.recs
		}
		errs = append(errs, fmt.Errorf("%s: %s has %s free; this run writes about %s there (%s)",
			nodesOn(who), g.sp.Path, size(g.sp.FreeBytes), size(need), strings.Join(parts, " + ")))
	}
	r.updateManifest(func(m *rundir.Manifest) { m.DataSpace = rec })
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrDiskSpace, errors.Join(errs...))
	}
	return nil
}

// dataWrites says what n servers' engine data on one filesystem are made of.
func dataWrites(w driver.Writes, n int) string {
	what := fmt.Sprintf("~%s of raft log", size(w.LogBytes))
	if w.Snapshots > 0 {
		files := "snapshots"
		if w.Snapshots == 1 {
			files = "snapshot"
		}
		what = fmt.Sprintf("%s orders × %.1f B/order × %d %s at once + %s",
			units.Group(strconv.FormatInt(w.Orders, 10)), float64(w.SnapshotBytes)/float64(max(w.Orders, 1)), w.Snapshots, files, what)
	}
	if n > 1 {
		what = fmt.Sprintf("%d servers × (%s)", n, what)
	}
	return what
}

// recordingWrites says what n servers' recordings on one filesystem are at most.
func recordingWrites(b RecordingBudget, n int) string {
	what := fmt.Sprintf("up to %s of engine recording: %d takes × %s, a flight recorder's most (engine.recording: on)",
		size(b.DiskBytes), b.Takes, size(b.DiskBytes/int64(b.Takes)))
	if n > 1 {
		what = fmt.Sprintf("%d servers × (%s)", n, what)
	}
	return what
}

// nodesOn names the servers sharing a filesystem.
func nodesOn(nodes []string) string {
	if len(nodes) > 1 {
		return strings.Join(nodes, ", ") + " (one filesystem)"
	}
	return nodes[0]
}

// size writes b in KiB, MiB or GiB, one decimal.
func size(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
}

// EstimateLogBytes is the replicated log a run of pb writes on each server, as the free-space
// check estimates it, with the preload through the log (a stored book would skip it: this is the
// upper bound); false when the engine's driver does not say (no driver.WriteEstimator).
func EstimateLogBytes(pb *playbooks.Playbook) (int64, bool) {
	est, ok := pb.Engine.EngineDriver().(driver.WriteEstimator)
	if !ok {
		return 0, false
	}
	return est.EstimateWrites(workload(pb, pb.Cluster.Clients, false)).LogBytes, true
}
