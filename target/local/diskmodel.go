package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/diskmodel/fusefs"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/target"
)

var (
	_ target.DiskModeler = (*Cluster)(nil)
	_ target.PowerLosser = (*Cluster)(nil)
	_ target.PowerCutter = (*Target)(nil)
)

// PowerCuts: a server loses power as its disk model, which drops every unsynced write; the
// machine the rig runs on is never rebooted (its agents get no SysRq trigger).
func (t *Target) PowerCuts() target.PowerCuts {
	return target.PowerCuts{How: "drops every write since each file's last fsync from the servers' disk models", DiskModel: true}
}

// probeRepeats: a probe on a machine other work shares keeps the best of a few (ProbeOptions).
const probeRepeats = diskmodel.ProbePasses

// ModelDisk mounts a disk model over <base>/disk.backing on <base>/disk, where base is the
// server's --local-data folder or else its node folder, and probes it. The engine data lands
// in disk.backing, which keeps it after the model is unmounted (--keep-data).
func (c *Cluster) ModelDisk(ctx context.Context, n inventory.Node, l diskmodel.Limits) (string, diskmodel.Achieved, error) {
	base := c.DataRoot(n)
	if base == "" {
		base = n.Dir
	}
	backing, mp := filepath.Join(base, "disk.backing"), filepath.Join(base, "disk")
	if err := os.MkdirAll(backing, 0o755); err != nil {
		return "", diskmodel.Achieved{}, fmt.Errorf("disk model for %s: %w", n.Name, err)
	}
	// Mounted for the cluster's life, not the request's: Stop unmounts it.
	d, err := fusefs.Mount(context.WithoutCancel(ctx), fusefs.Options{Backing: backing, Mountpoint: mp, Limits: l, Logger: c.log.With("node", n.Name)})
	if err != nil {
		return "", diskmodel.Achieved{}, fmt.Errorf("disk model for %s: %w", n.Name, err)
	}
	c.mu.Lock()
	c.disks = append(c.disks, d)
	if c.diskOf == nil {
		c.diskOf = map[string]*fusefs.Disk{}
	}
	c.diskOf[n.Name] = d
	c.mu.Unlock()
	got, err := diskmodel.Probe(ctx, mp, l, diskmodel.ProbeOptions{Repeats: probeRepeats})
	if err != nil {
		return "", diskmodel.Achieved{}, fmt.Errorf("disk model for %s: %w", n.Name, err)
	}
	return mp, got, nil
}

// DropUnsynced is a power loss of server n's disk model: every file reverts to its content at
// its last fsync.
func (c *Cluster) DropUnsynced(_ context.Context, n inventory.Node) (diskmodel.Dropped, error) {
	c.mu.Lock()
	d := c.diskOf[n.Name]
	c.mu.Unlock()
	if d == nil {
		return diskmodel.Dropped{}, fmt.Errorf("power loss of %s: its data is on no disk model (a power loss needs the playbook's disk: block)", n.Name)
	}
	return d.DropUnsynced()
}

// unmountDisks unmounts every disk model (lazily where a file is still open); c.mu is held.
func (c *Cluster) unmountDisks() {
	for _, d := range c.disks {
		if err := d.Close(); err != nil {
			lvl := "unmount disk model"
			if errors.Is(err, fusefs.ErrDetached) {
				lvl = "disk model detached lazily"
			}
			c.log.Warn(lvl, "mountpoint", d.Dir(), "err", err)
		}
	}
	c.disks, c.diskOf = nil, nil
}
