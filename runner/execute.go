package runner

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/rig-dev/rig/agent/disk"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/runner/launch"
	"github.com/rig-dev/rig/target"
)

// execute runs the run's stages; it returns a cleanup to run whatever happened.
func (r *run) execute(ctx context.Context) (func(context.Context), error) {
	cl, err := r.opts.Target.Start(ctx, target.StartOptions{
		RunDir: r.dir, Run: r.id, Servers: r.pb.Cluster.Servers, Clients: r.pb.Cluster.Clients,
		Binary: r.opts.Binary, Logger: r.log, Progress: r.progress,
		Links: len(linkers(r.pb)) > 0, Placement: r.pb.Placement, NoRunQueue: r.pb.CauseSourcesOff(),
	})
	if err != nil {
		return nil, err
	}
	r.cl, r.inv = cl, cl.Inventory()
	r.updateManifest(func(m *rundir.Manifest) {
		m.Inventory, m.Target, m.Stack = r.inv, r.inv.Target, cl.Traits().Stack
	})
	cleanup := func(ctx context.Context) {
		r.revertTuning(ctx)
		r.releaseLeases(ctx)
		// The load generator's few files first: a node that stopped answering holds Collect up
		// until ctx ends.
		for _, f := range rundir.LoadgenFiles {
			if err := cl.Gather(ctx, r.client, path.Join(rundir.LoadgenDir, f)); err != nil {
				r.log.Info("gather load generator file", "file", f, "err", err)
			}
		}
		if err := cl.Collect(ctx); err != nil {
			r.warn("%v", err)
		}
		if err := cl.Stop(ctx); err != nil {
			r.log.Warn("stop cluster", "err", err)
		}
	}
	if len(r.inv.Servers()) != r.pb.Cluster.Servers || len(r.inv.Clients()) < r.pb.Cluster.Clients {
		return cleanup, fmt.Errorf("the playbook wants %d servers and %d clients; %s has %d and %d",
			r.pb.Cluster.Servers, r.pb.Cluster.Clients, r.inv.Target, len(r.inv.Servers()), len(r.inv.Clients()))
	}
	r.servers, r.client = r.inv.Servers(), r.inv.Clients()[0]
	r.nodes = map[string]*server{}
	for _, n := range r.inv.Nodes {
		r.nodes[n.Name] = &server{}
	}
	if r.stopLeases, err = r.holdLeases(ctx); err != nil {
		return cleanup, fmt.Errorf("claim the agents for this run: %w", err)
	}
	r.mark("start")
	r.progress("agents up on %d nodes", len(r.inv.Nodes))
	r.measureClocks(ctx)
	nodeFacts := r.recordFacts(ctx)
	if err := r.applyTuning(ctx); err != nil {
		return cleanup, err
	}
	if err := r.prepareDisks(ctx); err != nil {
		return cleanup, err
	}
	if err := r.chooseBook(ctx); err != nil {
		return cleanup, err
	}
	r.recordEstimate()
	if err := r.checkMemory(nodeFacts); err != nil {
		return cleanup, err
	}
	if err := r.checkSpace(ctx); err != nil {
		return cleanup, err
	}
	if r.book != nil && r.book.Reused {
		if err := r.installBook(ctx); err != nil {
			return cleanup, err
		}
	}
	if err := r.startEngines(ctx); err != nil {
		return cleanup, err
	}
	r.startSamples(ctx)
	// Watchers outlive an interrupt: the engines' last transitions (TERM, down) belong in the run.
	watchCtx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	watchDone := r.watch(watchCtx)
	prevCleanup := cleanup
	cleanup = func(ctx context.Context) {
		r.stopSamples(ctx)
		r.drainWatchers(ctx)
		stopWatch()
		<-watchDone
		prevCleanup(ctx)
	}
	if err := r.waitReadyChecking(ctx, "", 60*time.Second, r.effectBeforeReady()); err != nil {
		if errors.Is(err, ErrSettingNotInEffect) {
			return cleanup, err
		}
		return cleanup, fmt.Errorf("cluster did not become ready: %w", err)
	}
	if err := r.verifyEngineConfig(ctx); err != nil {
		return cleanup, err
	}
	r.progress("cluster ready: leader %s", r.leader())
	if r.book != nil && r.book.Reused {
		if err := r.checkInstalledBook(ctx); err != nil {
			return cleanup, err
		}
	} else if err := r.preload(ctx); err != nil {
		return cleanup, err
	}
	if err := r.probeLinks(ctx); err != nil {
		return cleanup, err
	}
	if err := r.load(ctx); err != nil {
		return cleanup, err
	}
	return cleanup, nil
}

// engineConfig is the config every server gets: addresses from the inventory, settings from the
// playbook.
func (r *run) engineConfig(n inventory.Node) engine.Config {
	return launch.EngineConfig(r.servers, n, r.dataDir(n))
}

// prepareDisks mounts each server's provisioned data volume (or takes the folder a target places
// engine data in, target.DataPlacer), so the engine writes to the volume
// whose IOPS and throughput the experiment is about, not to the root disk.
func (r *run) prepareDisks(ctx context.Context) error {
	if !r.pb.Disk.Zero() {
		return r.modelDisks(ctx)
	}
	found, checks := map[string]disk.Result{}, map[string]disk.VolumeCheck{}
	defer func() { r.recordVolumes(found, checks) }()
	for _, n := range r.servers {
		if len(n.DataVolumes()) == 0 {
			if r.pb.DiskVolume != "" {
				return CheckVolumeNames([]string{r.pb.DiskVolume}, map[string][]string{n.Name: nil}, "the inventory")
			}
			if dp, ok := r.cl.(target.DataPlacer); ok {
				r.srv(n.Name).dataRoot = dp.DataRoot(n)
			}
			continue
		}
		res, vc, err := r.mountVolume(ctx, n)
		if res.MountPoint != "" {
			found[n.Name] = res
		}
		if vc.Measured.FioVersion != "" {
			checks[n.Name] = vc
		}
		if err != nil {
			return err
		}
		r.srv(n.Name).dataRoot = res.MountPoint
	}
	return nil
}

func (r *run) startEngines(ctx context.Context) error {
	r.enginesStarting = true
	for _, n := range r.servers {
		// An agent that ran earlier runs keeps its journal: watch only what this run adds.
		if st, err := r.agent(n.Name).EngineStatus(ctx); err == nil {
			r.srv(n.Name).since = st.LastSeq
		}
		cfg := r.engineConfig(n)
		if r.routed {
			var err error
			if cfg, err = r.routeConfig(ctx, cfg); err != nil {
				return err
			}
		}
		r.srv(n.Name).cfg = cfg
		req, err := launch.StartRequest(r.pb, cfg, r.secret)
		if err != nil {
			return fmt.Errorf("start engine on %s: %w", n.Name, err)
		}
		if err := r.agent(n.Name).StartEngine(ctx, req); err != nil {
			return fmt.Errorf("start engine on %s: %w", n.Name, err)
		}
	}
	r.mark("engines_started")
	return nil
}

func (r *run) stopEngines(ctx context.Context) {
	for _, n := range r.liveNodes(r.servers) {
		if err := r.agent(n.Name).StopEngine(ctx); err != nil {
			r.log.Warn("stop engine", "node", n.Name, "err", err)
		}
	}
}

// measureClocks records each node's clock offset (best of several round trips); node-side
// timestamps are moved onto the controller's clock with it.
func (r *run) measureClocks(ctx context.Context) {
	if r.cl.Traits().OneClock {
		return // one clock: a measured "offset" would only be round-trip noise
	}
	rec := map[string]rundir.ClockOffset{}
	for _, n := range r.inv.Nodes {
		cs, err := r.agent(n.Name).ClockOffset(ctx, 8)
		if err != nil {
			r.warn("clock offset of %s: %v", n.Name, err)
			continue
		}
		r.srv(n.Name).offset = cs.Offset
		rec[n.Name] = rundir.ClockOffset{OffsetUs: cs.Offset.Microseconds(), RTTUs: cs.RTT.Microseconds()}
	}
	r.updateManifest(func(m *rundir.Manifest) { m.ClockOffsets = rec })
}

// dataDir is the engine's data folder: on the node's data volume when it has one, else relative
// to the agent's folder; one per run, so a run on a cluster that already ran something never
// starts from an earlier run's log.
func (r *run) dataDir(n inventory.Node) string {
	if root := r.srv(n.Name).dataRoot; root != "" {
		return path.Join(root, "rig", r.id)
	}
	return path.Join("data", r.id)
}

// removeData deletes the engines' data folders (raft log, snapshots) unless asked to keep them.
func (r *run) removeData(ctx context.Context) {
	if r.opts.KeepData {
		return
	}
	for _, n := range r.servers {
		if r.lapsed(n.Name) {
			r.warn("engine data left on %s (%s): its lease lapsed", n.Name, r.dataDir(n))
			continue
		}
		if err := r.cl.Remove(ctx, n, r.dataDir(n)); err != nil {
			r.warn("remove engine data on %s: %v", n.Name, err)
		}
	}
}
