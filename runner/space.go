package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/rig-dev/rig/agent/facts"
	"github.com/rig-dev/rig/engine/replica"
	"github.com/rig-dev/rig/engine/replica/store"
	snapfile "github.com/rig-dev/rig/engine/snapshot"
	"github.com/rig-dev/rig/engine/wire"
	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/loadgen"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
)

// ErrDiskSpace classifies a run refused before any engine started because its engines' data
// would not fit on their filesystems.
var ErrDiskSpace = errors.New("not enough disk space for the run's engine data")

// dataWrites is what one server of a reference-engine run writes into its data folder
// (docs/architecture.md, "Free space before a run"). It errs high where it is not exact.
type dataWrites struct {
	Orders        int64 // resting orders: the preload (probes and burst orders are IOC and rest nowhere)
	SnapshotBytes int64 // one snapshot of them (engine/snapshot.Size)
	Snapshots     int   // snapshot files on disk at once, at most
	LogBytes      int64 // raft log: preload batches, probes, burst messages, snapshot markers
}

func (w dataWrites) total() int64 { return w.SnapshotBytes*int64(w.Snapshots) + w.LogBytes }

// raftOwnBytes allows for what raft writes of its own: the bootstrap configuration entry, a
// no-op entry per election, and the stable store (107 B, rewritten through a temp file). A run
// of 200k orders, 6,000 probes and 3 snapshots wrote 314 B of log more than its commands.
const raftOwnBytes = 4 << 10

// estimateWrites estimates one server's writes for pb; installed says a stored book is put in
// the snapshots folder instead of a preload through the log.
func estimateWrites(pb *playbooks.Playbook, clients int, installed bool) dataWrites {
	// Entry sizes from the codecs themselves: data as the server hands it to raft (the frame
	// without its length prefix) plus the log record around it.
	frame := func(r wire.Request) int64 { return int64(len(wire.AppendRequest(nil, &r)) - 4) }
	orderEntry := frame(wire.Request{Type: wire.TypeOrder}) + store.RecordOverhead
	batchFixed := frame(wire.Request{Type: wire.TypeBatch}) + store.RecordOverhead
	perOrder := frame(wire.Request{Type: wire.TypeBatch, Batch: make([]wire.Order, 1)}) + store.RecordOverhead - batchFixed

	w := dataWrites{Orders: pb.Preload.Orders, SnapshotBytes: snapfile.Size(pb.Preload.Orders), LogBytes: raftOwnBytes}
	files := 0
	if installed {
		files++ // the stored book, restored at launch
	} else if n := pb.Preload.Orders; n > 0 {
		batches := (n + loadgen.DefaultBatch - 1) / loadgen.DefaultBatch
		w.LogBytes += batches*batchFixed + n*perOrder
	}
	w.LogBytes += int64(math.Ceil(pb.Load.ProbeRate*pb.Duration.Seconds())) * orderEntry
	for _, a := range pb.Timeline {
		switch {
		case a.Kind == playbooks.ActSnapshot:
			files++
			w.LogBytes += frame(wire.Request{}) + store.RecordOverhead // the marker, at most this
		case a.Kind == playbooks.ActBurst && a.Burst != nil:
			senders := a.Burst.Senders
			if senders == 0 {
				senders = clients
			}
			// UDP orders are batched into log entries; one entry per order bounds them.
			w.LogBytes += int64(a.Burst.Count) * int64(a.Burst.Messages) * int64(senders) * orderEntry
		}
	}
	// A take writes the next file before the oldest kept one is removed.
	w.Snapshots = min(files, replica.SnapshotsKept+1)
	if w.Snapshots == 0 {
		w.SnapshotBytes = 0
	}
	return w
}

// checkSpace asks every server's agent how much room the filesystem holding its engine data
// has and refuses the run, before any engine starts, when the estimate does not fit. Servers
// whose data share a filesystem (every node of the local target) are counted together. Only
// the reference engine's writes are known; a command-driven engine is not checked.
func (r *run) checkSpace(ctx context.Context) error {
	if r.pb.Engine.Driver == playbooks.DriverCommand {
		return nil
	}
	w := estimateWrites(r.pb, len(r.inv.Clients()), r.book != nil && r.book.Reused)
	type shared struct {
		sp    facts.Space
		nodes []string
	}
	var groups []*shared
	byFS := map[string]*shared{}
	rec := map[string]rundir.DataSpace{}
	for _, n := range r.servers {
		sp, err := r.agent(n.Name).DiskSpace(ctx, r.dataDir(n))
		if err != nil {
			return fmt.Errorf("free space for engine data on %s: %w", n.Name, err)
		}
		g := byFS[sp.Filesystem]
		if g == nil {
			g = &shared{sp: sp}
			byFS[sp.Filesystem] = g
			groups = append(groups, g)
		}
		g.nodes = append(g.nodes, n.Name)
		rec[n.Name] = rundir.DataSpace{Space: sp, WritesBytes: w.total()}
	}
	var errs []error
	for _, g := range groups {
		for _, n := range g.nodes {
			d := rec[n]
			d.SharedWith = len(g.nodes)
			rec[n] = d
		}
		need := w.total() * int64(len(g.nodes))
		if need <= g.sp.FreeBytes {
			continue
		}
		what := fmt.Sprintf("~%s of raft log", size(w.LogBytes))
		if w.Snapshots > 0 {
			files := "snapshots"
			if w.Snapshots == 1 {
				files = "snapshot"
			}
			what = fmt.Sprintf("%s orders × %.1f B/order × %d %s at once + %s",
				units.Group(strconv.FormatInt(w.Orders, 10)), float64(w.SnapshotBytes)/float64(max(w.Orders, 1)), w.Snapshots, files, what)
		}
		who := g.nodes[0]
		if len(g.nodes) > 1 {
			who = strings.Join(g.nodes, ", ") + " (one filesystem)"
			what = fmt.Sprintf("%d servers × (%s)", len(g.nodes), what)
		}
		errs = append(errs, fmt.Errorf("%s: %s has %s free; this run writes about %s there (%s)",
			who, g.sp.Path, size(g.sp.FreeBytes), size(need), what))
	}
	r.updateManifest(func(m *rundir.Manifest) { m.DataSpace = rec })
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrDiskSpace, errors.Join(errs...))
	}
	return nil
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
