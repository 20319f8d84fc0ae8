package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/infra/local"
	"github.com/rig-dev/rig/results"
	"github.com/rig-dev/rig/transport"
	localtr "github.com/rig-dev/rig/transport/local"
)

// Engine ports on every server node; the admin port is bound to loopback.
const (
	raftPort    = 7000
	clientPort  = 7001
	adminPort   = 7002
	controlPort = 7500 // load generator's control API on the client node's loopback
)

// execute runs the run's stages; it returns a cleanup to run whatever happened.
func (r *run) execute(ctx context.Context) (func(context.Context), error) {
	var cleanup func(context.Context)
	var err error
	if r.opts.Remote != nil {
		cleanup, err = r.startRemote(ctx)
	} else {
		cleanup, err = r.startLocal(ctx)
	}
	if err != nil {
		return cleanup, err
	}
	if len(r.inv.Servers()) != r.pb.Cluster.Servers || len(r.inv.Clients()) < r.pb.Cluster.Clients {
		return cleanup, fmt.Errorf("the playbook wants %d servers and %d clients; %s has %d and %d",
			r.pb.Cluster.Servers, r.pb.Cluster.Clients, r.inv.Target, len(r.inv.Servers()), len(r.inv.Clients()))
	}
	r.servers, r.client = r.inv.Servers(), r.inv.Clients()[0]
	r.dataRoot = map[string]string{}
	r.mark("start")
	inv := r.inv
	r.progress("agents up on %d nodes", len(inv.Nodes))
	r.measureClocks(ctx)
	r.recordFacts(ctx)
	if err := r.applyTuning(ctx); err != nil {
		return cleanup, err
	}
	if r.opts.Remote != nil {
		if err := r.prepareDisks(ctx); err != nil {
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
	if err := r.waitReady(ctx, "", 60*time.Second); err != nil {
		return cleanup, fmt.Errorf("cluster did not become ready: %w", err)
	}
	if err := r.verifyEngineConfig(); err != nil {
		return cleanup, err
	}
	r.progress("cluster ready: leader %s", r.leader())
	if err := r.preload(ctx); err != nil {
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
	e := r.pb.Engine
	host := n.PrivateAddress
	cfg := engine.Config{
		Node: n.Name, Dir: r.dataDir(n),
		RaftAddr:      net.JoinHostPort(host, strconv.Itoa(raftPort)),
		ClientAddr:    net.JoinHostPort(host, strconv.Itoa(clientPort)),
		AdminAddr:     net.JoinHostPort(loopbackHost(n), strconv.Itoa(adminPort)),
		Bootstrap:     true,
		SyncLevel:     e.SyncLevel,
		SnapshotBlock: int(e.SnapshotBlock),
		EncodeThreads: e.EncodeThreads,
	}
	if e.HeartbeatTimeout > 0 {
		cfg.HeartbeatTimeout = e.HeartbeatTimeout.String()
	}
	if e.ElectionTimeout > 0 {
		cfg.ElectionTimeout = e.ElectionTimeout.String()
	}
	for _, s := range r.servers {
		cfg.Peers = append(cfg.Peers, engine.Peer{
			Node:       s.Name,
			RaftAddr:   net.JoinHostPort(s.PrivateAddress, strconv.Itoa(raftPort)),
			ClientAddr: net.JoinHostPort(s.PrivateAddress, strconv.Itoa(clientPort)),
		})
	}
	return cfg
}

func (r *run) clientAddrs() []string {
	var out []string
	for _, s := range r.servers {
		out = append(out, net.JoinHostPort(s.PrivateAddress, strconv.Itoa(clientPort)))
	}
	return out
}

// startLocal builds the local target's inventory and starts one agent process per node.
func (r *run) startLocal(ctx context.Context) (func(context.Context), error) {
	pb := r.pb
	tgt := local.New(local.Options{
		Servers: pb.Cluster.Servers, Clients: pb.Cluster.Clients, Dir: r.dir,
		Binary: r.opts.Binary, FirstAddress: r.opts.FirstAddress, Logger: r.log,
	})
	inv, err := tgt.Inventory(ctx)
	if err != nil {
		return nil, fmt.Errorf("build inventory: %w", err)
	}
	r.inv, r.man.Inventory = inv, inv
	r.tr = localtr.New()
	agents, clients, err := tgt.StartAgents(ctx, inv, func(n inventory.Node) agent.DialFunc {
		addr := tgt.AgentAddr(n)
		return func(ctx context.Context) (net.Conn, error) { return r.tr.Dial(ctx, n, addr) }
	})
	if err != nil {
		return nil, fmt.Errorf("start agents: %w", err)
	}
	r.agents = clients
	return func(ctx context.Context) {
		r.revertTuning(ctx)
		agents.Stop()
		r.tr.Close()
	}, nil
}

func (r *run) startEngines(ctx context.Context) error {
	r.cfgs = map[string]engine.Config{}
	r.since = map[string]uint64{}
	for _, n := range r.servers {
		// An agent that ran earlier runs keeps its journal: watch only what this run adds.
		if st, err := r.agents[n.Name].EngineStatus(ctx); err == nil {
			r.since[n.Name] = st.LastSeq
		}
		cfg := r.engineConfig(n)
		r.cfgs[n.Name] = cfg
		if err := r.agents[n.Name].StartEngine(ctx, agent.StartRequest{Config: cfg}); err != nil {
			return fmt.Errorf("start engine on %s: %w", n.Name, err)
		}
	}
	r.mark("engines_started")
	return nil
}

// verifyEngineConfig reads every node's effective config back from /status and fails the run
// when a setting did not arrive (measurement rule: read settings back where they take effect).
func (r *run) verifyEngineConfig() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	eff := map[string]any{}
	var errs []error
	for _, n := range r.servers {
		st, ok := r.status[n.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: no status", n.Name))
			continue
		}
		eff[n.Name] = st.Config
		want := r.cfgs[n.Name]
		got := st.Config
		// Zero and "" mean the engine's default, except sync_level, which the playbook always sets.
		check := func(field string, w, g any) {
			if fmt.Sprint(w) != fmt.Sprint(g) && fmt.Sprint(w) != "0" && fmt.Sprint(w) != "" {
				errs = append(errs, fmt.Errorf("%s: engine.%s is %v, playbook asked for %v", n.Name, field, g, w))
			}
		}
		if want.SyncLevel != got.SyncLevel {
			errs = append(errs, fmt.Errorf("%s: engine.sync_level is %d, playbook asked for %d", n.Name, got.SyncLevel, want.SyncLevel))
		}
		check("snapshot_block", want.SnapshotBlock, got.SnapshotBlock)
		check("encode_threads", want.EncodeThreads, got.EncodeThreads)
		check("heartbeat_timeout", want.HeartbeatTimeout, got.HeartbeatTimeout)
		check("election_timeout", want.ElectionTimeout, got.ElectionTimeout)
	}
	r.man.Engines = eff
	r.saveManifest()
	return errors.Join(errs...)
}

func (r *run) stopEngines(ctx context.Context) {
	for _, n := range r.servers {
		if c := r.agents[n.Name]; c != nil {
			if err := c.StopEngine(ctx); err != nil {
				r.log.Warn("stop engine", "node", n.Name, "err", err)
			}
		}
	}
}

// measureClocks records each node's clock offset (best of several round trips); node-side
// timestamps are moved onto the controller's clock with it.
func (r *run) measureClocks(ctx context.Context) {
	r.offsets = map[string]time.Duration{}
	rec := map[string]any{}
	if r.inv.Target == "local" {
		return // one machine, one clock: a measured "offset" would only be round-trip noise
	}
	for _, n := range r.inv.Nodes {
		cs, err := r.agents[n.Name].ClockOffset(ctx, 8)
		if err != nil {
			r.warn("clock offset of %s: %v", n.Name, err)
			continue
		}
		r.offsets[n.Name] = cs.Offset
		rec[n.Name] = map[string]any{"offset_us": cs.Offset.Microseconds(), "rtt_us": cs.RTT.Microseconds()}
	}
	r.manMu.Lock()
	r.man.ClockOffsets = rec
	r.manMu.Unlock()
}

// writeJSONFile writes v as indented JSON.
func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return results.WriteFileAtomic(path, b)
}

// dataDir is the engine's data folder: on the node's data volume when it has one, else relative
// to the agent's folder; one per run, so a run on a cluster that already ran something never
// starts from an earlier run's log.
func (r *run) dataDir(n inventory.Node) string {
	if root := r.dataRoot[n.Name]; root != "" {
		return path.Join(root, "rig", r.id)
	}
	return path.Join("data", r.id)
}

// removeData deletes the engines' data folders (raft log, snapshots) unless asked to keep them.
func (r *run) removeData(ctx context.Context) {
	if r.opts.KeepData || r.inv == nil {
		return
	}
	for _, n := range r.servers {
		if r.inv.Target == "local" {
			os.RemoveAll(filepath.Join(n.Dir, "data"))
			continue
		}
		dir := r.dataDir(n)
		if !path.IsAbs(dir) {
			dir = r.nodePath(n, dir)
		}
		if _, err := r.tr.Exec(ctx, n, transport.Cmd{Args: []string{"rm", "-rf", "--", dir}, Sudo: r.opts.Remote.Sudo}); err != nil {
			r.warn("remove engine data on %s: %v", n.Name, err)
		}
	}
}
