// Package quiesce readies a stack's nodes for destruction: on every node with a data volume, the
// rig's agent stops the engine, syncs the volume's filesystem and unmounts it, and then the agent
// is stopped. `rig down` runs it after archiving and before `pulumi destroy` (infra/automation), so a
// volume is never torn away from a running engine with writes still in the page cache.
package quiesce

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/agent/disk"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/rundir"
	sshtarget "github.com/rig-dev/rig/target/ssh"
	"github.com/rig-dev/rig/transport"
	"github.com/rig-dev/rig/transport/sshx"
)

// Options say how to reach the nodes; they mirror `rig run`'s remote flags.
type Options struct {
	KeyFiles []string // SSH private keys
	Sudo     bool     // the agent runs as root through sudo -n (unmount needs root)
	// Dir is the base folder on the nodes, as `rig run --remote-dir`; each node's rig folder is
	// Dir/rig-<node>, as the SSH target lays it out (target/ssh).
	Dir       string
	DataMount string // where the data volume is mounted (default /data, as rig run)
	// Binary is a linux rig binary to stage when a node has none (rig passes its own executable).
	Binary    string
	SourceDir string // the rig module, for a cross build when Binary does not fit the node
	// Transport reaches the nodes; nil means SSH with KeyFiles and the inventory's host keys.
	Transport transport.Transport
	Out       io.Writer // one line per node; nil means io.Discard
	Logger    *slog.Logger
}

// Result is what happened on one node.
type Result struct {
	Node     string
	Skipped  string             // why nothing was done, e.g. no data volume
	Engine   *rundir.ExitStatus // how the engine ended; nil when none ran
	Unmount  disk.UnmountResult
	Err      error
	Duration time.Duration
}

// Nodes quiesces every node of inv that has a data volume, in parallel, and returns one result per
// node in inventory order; the error joins the nodes' failures.
func Nodes(ctx context.Context, inv *inventory.Inventory, o Options) ([]Result, error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.DataMount == "" {
		o.DataMount = "/data"
	}
	tr := o.Transport
	if tr == nil {
		ssh, err := sshx.New(sshx.Options{KeyFiles: o.KeyFiles, Logger: o.Logger})
		if err != nil {
			return nil, fmt.Errorf("ssh transport: %w", err)
		}
		defer ssh.Close()
		tr = ssh
	}
	so := sshtarget.Options{Sudo: o.Sudo, SourceDir: o.SourceDir, Base: o.Dir, Logger: o.Logger}
	if o.Binary != "" {
		so.Binaries = map[string]string{"amd64": o.Binary}
	}
	out := make([]Result, len(inv.Nodes))
	err := sshtarget.Parallel(ctx, inv.Nodes, 8, func(ctx context.Context, i int, n inventory.Node) error {
		out[i] = node(ctx, tr, n, so, o)
		return out[i].Err
	})
	return out, err
}

func node(ctx context.Context, tr transport.Transport, n inventory.Node, so sshtarget.Options, o Options) Result {
	res := Result{Node: n.Name}
	if len(n.DataVolumes()) == 0 {
		res.Skipped = "no data volume"
		return res
	}
	start := time.Now()
	err := sshtarget.WithAgent(ctx, tr, n, so, func(c *agent.Client) error {
		exit, err := c.StopEngineWithin(ctx, 20*time.Second)
		if err != nil {
			return fmt.Errorf("stop engine: %w", err)
		}
		res.Engine = exit
		for _, v := range n.DataVolumes() { // each at its own mount point (inventory.Node.MountPoint)
			mp := n.MountPoint(o.DataMount, v)
			u, err := c.Unmount(ctx, disk.UnmountOptions{MountPoint: mp})
			if err != nil {
				return fmt.Errorf("sync and unmount %s: %w", mp, err)
			}
			res.Unmount, res.Duration = u, time.Since(start)
			switch {
			case u.Unmounted:
				fmt.Fprintf(o.Out, "rig: %s: engine stopped, %s synced (%d ms) and unmounted\n", n.Name, mp, u.SyncMS)
			default:
				fmt.Fprintf(o.Out, "rig: %s: engine stopped, nothing mounted at %s\n", n.Name, mp)
			}
		}
		return nil
	})
	if err != nil {
		res.Err = fmt.Errorf("%s: %w", n.Name, err)
		fmt.Fprintf(o.Out, "rig: %s: failed: %v\n", n.Name, err)
	}
	return res
}
