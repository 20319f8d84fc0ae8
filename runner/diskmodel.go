package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/agent/disk"
	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/internal/loadavg"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/target"
)

// modelDisks puts every server's engine data on the playbook's disk model, probes each, records
// asked beside achieved in the manifest, and stops the run before load when one falls short.
func (r *run) modelDisks(ctx context.Context) error {
	dm, ok := r.cl.(target.DiskModeler)
	if !ok {
		return fmt.Errorf("disk: (%s) is a disk model, which this target cannot mount; on a stack the disk is its data volume: leave disk: out", r.pb.Disk)
	}
	rec := map[string]diskmodel.Record{}
	defer func() { r.updateManifest(func(m *rundir.Manifest) { m.DiskModels = rec }) }()
	// The probe's bound comes from the model (diskmodel.ProbeBound), as the plan shows it: a disk
	// slower than its model, or a mount that stops answering, fails the run instead of holding it.
	bound := diskmodel.ProbeBound(r.pb.Disk, diskmodel.ProbeOptions{Repeats: diskmodel.ProbePasses})
	opts := target.DiskModelOptions{Passthrough: passthroughFits(r.pb)}
	for _, n := range r.servers {
		pctx, cancel := context.WithTimeout(ctx, bound)
		root, got, err := dm.ModelDisk(pctx, n, r.pb.Disk, opts)
		late := errors.Is(pctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
		cancel()
		if err != nil && late {
			return fmt.Errorf("disk model on %s: its probe did not finish within its bound of %s (the model's own arithmetic: %s a pass, %d passes): %w",
				n.Name, bound, diskmodel.ProbeTime(r.pb.Disk, diskmodel.ProbeOptions{}), diskmodel.ProbePasses, err)
		}
		if err != nil {
			return err
		}
		rec[n.Name] = diskmodel.Record{Asked: r.pb.Disk, Achieved: got, LoadAvg: loadavg.Now()}
		r.srv(n.Name).dataRoot = root
		how := ""
		if got.Passthrough {
			how = " (passthrough)"
		}
		r.progress("%s: disk model %s%s; probe: %.1f MB/s, %.0f IOPS, sync %v (+%v/MiB)", n.Name, r.pb.Disk,
			how, got.ThroughputBps/1e6, got.IOPS, got.SyncLatency.Round(10_000), got.SyncPerMiB.Round(10_000))
		if err := diskmodel.Check(r.pb.Disk, got, disk.CheckFloor); err != nil {
			return fmt.Errorf("disk model on %s, before load: %w", n.Name, err)
		}
	}
	if w, ok := r.cl.(target.DiskWatcher); ok {
		go r.watchDisks(ctx, w.DiskLost())
	}
	return nil
}

// passthroughFits: the model may let the kernel make the engines' writes (so it costs what the
// bare folder does) when no cap of pb's disk needs to see each write and no power loss of its
// timeline drops unsynced writes, which the model can revert only from writes it saw.
func passthroughFits(pb *playbooks.Playbook) bool {
	if len(pb.Disk.PassthroughCaps()) > 0 {
		return false
	}
	for _, a := range pb.Timeline {
		if pc, ok := a.Spec.(actions.PowerCutter); ok {
			if _, cuts := pc.CutsPower(); cuts {
				return false
			}
		}
	}
	return true
}

// watchDisks fails the run at once when a disk model is lost under it (unmounted, detached or
// covered by someone else): what the engines write from then on does not go through the model,
// or fails, and a run that went on would report ok on another disk.
func (r *run) watchDisks(ctx context.Context, lost <-chan error) {
	select {
	case <-ctx.Done():
	case err := <-lost:
		r.stopOn(err)
	}
}

// stopOn makes err the run's fault and stops the run, when it is the first fault and the run is
// not stopping already; otherwise err is a warning on the run's record.
func (r *run) stopOn(err error) {
	r.mu.Lock()
	first := r.fault == nil && !r.stopping
	if first {
		r.fault = err
	}
	r.notifyLocked()
	r.mu.Unlock()
	if !first {
		r.warn("%v", err)
		return
	}
	r.progress("%v", err)
	if r.abort != nil {
		r.abort(err)
	}
}
