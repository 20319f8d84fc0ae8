package runner

import (
	"context"
	"fmt"
	"net"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/agent/disk"
	"github.com/rig-dev/rig/agent/stage"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/transport/sshx"
)

// Remote says how to reach a cluster that is not the local target.
type Remote struct {
	Target   inventory.Target // a Pulumi stack, or an inventory file
	Stack    string           // recorded in the manifest (rig down archives a stack's runs)
	KeyFiles []string         // SSH private keys
	Sudo     bool             // run the agent as root through sudo -n (tuning needs root)
	Dir      string           // base folder on the nodes (default: the login user's home)
	// DataMount is where each server's data volume (inventory data_device) is mounted for the
	// engine's log and snapshots (default /data), with a DataFS filesystem made if it has none
	// (default xfs). Servers without a data_device keep engine data in their rig folder.
	DataMount string
	DataFS    string
}

// loopbackHost is where a node's own services (agent, engine admin, load generator control)
// listen: its private address when that is a loopback address (the local target, or several
// nodes sharing one host in tests), else 127.0.0.1. Either way they are reached only through
// the transport.
func loopbackHost(n inventory.Node) string {
	if ip := net.ParseIP(n.PrivateAddress); ip != nil && ip.IsLoopback() {
		return n.PrivateAddress
	}
	return "127.0.0.1"
}

func agentListen(n inventory.Node) string {
	return net.JoinHostPort(loopbackHost(n), strconv.Itoa(agent.DefaultPort))
}

// stageOptions puts every node's rig folder apart, so nodes that share a host stay separate.
func (r *run) stageOptions() stage.Options {
	return stage.Options{
		Sudo:   r.opts.Remote.Sudo,
		Logger: r.log,
		ForNode: func(n inventory.Node, o *stage.Options) {
			o.RemoteDir = path.Join(r.opts.Remote.Dir, "rig-"+n.Name)
			o.Listen = agentListen(n)
		},
	}
}

// nodePath is a path in a node's agent folder, as the node sees it.
func (r *run) nodePath(n inventory.Node, rel string) string {
	if r.inv.Target == "local" {
		return filepath.Join(n.Dir, rel)
	}
	o := r.stageOptions()
	o.ForNode(n, &o)
	return path.Join(o.AgentDir(), rel)
}

// nodeBinary is the rig binary on a node.
func (r *run) nodeBinary(n inventory.Node) string {
	if r.inv.Target == "local" {
		return r.opts.Binary
	}
	o := r.stageOptions()
	o.ForNode(n, &o)
	return o.BinaryPath()
}

// startRemote reaches a remote cluster over SSH: verified host keys, the rig binary staged on
// every node (a no-op when its hash matches), one agent per node started as a daemon.
func (r *run) startRemote(ctx context.Context) (func(context.Context), error) {
	inv, err := r.opts.Remote.Target.Inventory(ctx)
	if err != nil {
		return nil, fmt.Errorf("inventory of %s: %w", r.opts.Remote.Target.Name(), err)
	}
	r.inv, r.man.Inventory = inv, inv
	r.man.Target, r.man.Stack = inv.Target, r.opts.Remote.Stack
	tr, err := sshx.New(sshx.Options{KeyFiles: r.opts.Remote.KeyFiles, Logger: r.log})
	if err != nil {
		return nil, fmt.Errorf("ssh transport: %w", err)
	}
	r.tr = tr
	r.progress("staging rig on %d nodes over SSH", len(inv.Nodes))
	so := r.stageOptions()
	if _, err := stage.All(ctx, tr, inv.Nodes, so); err != nil {
		// Some agents may have started: stop them all, on a context of their own.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for _, n := range inv.Nodes {
			stage.Stop(sctx, tr, n, so)
		}
		tr.Close()
		return nil, fmt.Errorf("stage: %w", err)
	}
	r.agents = map[string]*agent.Client{}
	for _, n := range inv.Nodes {
		r.agents[n.Name] = stage.Client(tr, n, agentListen(n))
	}
	return func(ctx context.Context) {
		r.revertTuning(ctx)
		r.collectRemote(ctx)
		// Agents are stopped on a budget of their own, whatever collecting used up.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for _, n := range inv.Nodes {
			if err := stage.Stop(sctx, tr, n, so); err != nil {
				r.log.Warn("stop agent", "node", n.Name, "err", err)
			}
		}
		tr.Close()
	}, nil
}

// prepareDisks mounts each server's provisioned data volume, so the engine writes to the volume
// whose IOPS and throughput the experiment is about, not to the root disk.
func (r *run) prepareDisks(ctx context.Context) error {
	mount, fs := r.opts.Remote.DataMount, r.opts.Remote.DataFS
	if mount == "" {
		mount = "/data"
	}
	if fs == "" {
		fs = "xfs"
	}
	rec := map[string]any{}
	for _, n := range r.servers {
		if n.DataDevice == "" {
			continue
		}
		o := disk.Options{VolumeID: n.DataDevice, FS: fs, MountPoint: mount, Format: true}
		if strings.HasPrefix(n.DataDevice, "/dev/") { // a device path, for machines not provisioned by rig
			o.VolumeID, o.Device = "", n.DataDevice
		}
		res, err := r.agents[n.Name].Disk(ctx, o)
		if err != nil {
			return fmt.Errorf("prepare data volume %s on %s: %w", n.DataDevice, n.Name, err)
		}
		r.dataRoot[n.Name] = mount
		rec[n.Name] = res
		r.progress("%s: data volume %s (%s) on %s, %s", n.Name, n.DataDevice, res.Device, mount, res.FS)
	}
	r.manMu.Lock()
	r.man.Disks = rec
	r.manMu.Unlock()
	return nil
}

// collectRemote pulls every node's folder (logs, transitions, samples, final status; large
// engine data left out) and the load generator's files into the run folder.
func (r *run) collectRemote(ctx context.Context) {
	for _, n := range r.inv.Nodes {
		if err := r.agents[n.Name].CollectInto(ctx, filepath.Join(r.dir, n.Name), agent.CollectOptions{}); err != nil {
			r.warn("collect %s: %v", n.Name, err)
		}
	}
	for _, f := range []string{"probes.bin", "probes.hlog", "stats.json", "bursts.bin", "preload.json"} {
		remote := r.nodePath(r.client, path.Join("loadgen", f))
		if err := r.tr.Download(ctx, r.client, remote, filepath.Join(r.dir, "loadgen", f)); err != nil {
			r.log.Info("download load generator file", "file", f, "err", err)
		}
	}
}
