package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/diskmodel/fusefs"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/target"
)

var (
	_ target.DiskModeler = (*Cluster)(nil)
	_ target.DiskWatcher = (*Cluster)(nil)
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

// ModelDisk mounts a disk model (with passthrough when o asks) over <base>/disk.backing on <base>/disk, where base is the
// server's --local-data folder or else its node folder, and probes it. The engine data lands
// in disk.backing, which keeps it after the model is unmounted (--keep-data). The mountpoint is
// the run's while mounted (its lock, <base>/disk.lock, records the run): another run on the
// same --local-data is refused naming this one, and a dead run's mount there is detached first.
// A model lost mid-run is delivered by DiskLost.
func (c *Cluster) ModelDisk(ctx context.Context, n inventory.Node, l diskmodel.Limits, o target.DiskModelOptions) (string, diskmodel.Achieved, error) {
	base := c.DataRoot(n)
	if base == "" {
		base = n.Dir
	}
	backing, mp := filepath.Join(base, "disk.backing"), filepath.Join(base, "disk")
	if err := os.MkdirAll(backing, 0o755); err != nil {
		return "", diskmodel.Achieved{}, fmt.Errorf("disk model for %s: %w", n.Name, err)
	}
	// Every fsync the model completes goes to the node folder, for the forces per window.
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return "", diskmodel.Achieved{}, fmt.Errorf("disk model for %s: %w", n.Name, err)
	}
	syncs, err := rundir.CreateDiskSyncs(filepath.Join(n.Dir, rundir.DiskSyncsFile))
	if err != nil {
		return "", diskmodel.Achieved{}, fmt.Errorf("disk model for %s: %w", n.Name, err)
	}
	onSync := func(s fusefs.Sync) {
		syncs.Write(rundir.DiskSync{AtNs: s.Start.UnixNano(), File: s.File, Bytes: s.Bytes, DurNs: int64(s.Dur)})
	}
	// Mounted for the cluster's life, not the request's: Stop unmounts it.
	mo := fusefs.Options{Backing: backing, Mountpoint: mp, Limits: l,
		Logger: c.log.With("node", n.Name), Owner: diskOwner(c.run), OnSync: onSync, Passthrough: o.Passthrough}
	d, err := fusefs.Mount(context.WithoutCancel(ctx), mo)
	if errors.Is(err, fusefs.ErrNoPassthrough) {
		// Passthrough only makes the model cheaper; the model's own path holds the same limits.
		c.say("%s: this kernel's FUSE has no passthrough; the disk model sees every write", n.Name)
		mo.Passthrough = false
		d, err = fusefs.Mount(context.WithoutCancel(ctx), mo)
	}
	if err != nil {
		syncs.Close()
	}
	if errors.Is(err, fusefs.ErrBusy) {
		return "", diskmodel.Achieved{}, fmt.Errorf("disk model for %s: %w; wait for that run, or give this one another --local-data", n.Name, err)
	}
	if err != nil {
		return "", diskmodel.Achieved{}, fmt.Errorf("disk model for %s: %w", n.Name, err)
	}
	for _, l := range d.Reclaimed() {
		c.say("%s: %s", n.Name, Detached(l))
	}
	lost, stopped := c.diskChans()
	go func() { // keep the file current for a run that is killed
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				syncs.Flush()
			case <-stopped:
				return
			}
		}
	}()
	go func() {
		select {
		case <-d.Lost():
			select {
			case lost <- fmt.Errorf("disk model of %s: %w", n.Name, d.Err()):
			default: // the first is the run's cause; the others are logged by the model
			}
		case <-stopped:
		}
	}()
	c.mu.Lock()
	c.disks = append(c.disks, d)
	c.syncLogs = append(c.syncLogs, syncs)
	if c.diskOf == nil {
		c.diskOf = map[string]*fusefs.Disk{}
	}
	c.diskOf[n.Name] = d
	c.mu.Unlock()
	got, err := diskmodel.Probe(ctx, mp, l, diskmodel.ProbeOptions{Repeats: probeRepeats})
	if err != nil {
		return "", diskmodel.Achieved{}, fmt.Errorf("disk model for %s: %w", n.Name, err)
	}
	got.Passthrough = mo.Passthrough
	return mp, got, nil
}

// DiskLost delivers the first disk model lost mid-run, naming its node.
func (c *Cluster) DiskLost() <-chan error {
	lost, _ := c.diskChans()
	return lost
}

func (c *Cluster) diskChans() (lost chan error, stopped chan struct{}) {
	c.chOnce.Do(func() { c.lost, c.stopped = make(chan error, 1), make(chan struct{}) })
	return c.lost, c.stopped
}

// Detached is what a dead model's mount detached is called in progress lines and reports.
func Detached(l fusefs.Leftover) string {
	return fmt.Sprintf("detached the dead disk model mount %s (mounted by %s, which is gone)", l.Mountpoint, l.LeftBy)
}

func (c *Cluster) say(format string, args ...any) {
	if c.progress != nil {
		c.progress(format, args...)
	}
}

// diskOwner is how a run's disk model mounts name it in their locks.
func diskOwner(run string) string { return "run " + run }

// ReclaimDisks detaches the mounts that the dead controller of run left in its run folder, or
// at --local-data folders (their locks name the run), and returns them: `rig report` of an
// abandoned run. A mount whose holder is alive is left alone.
func ReclaimDisks(runDir, run string) ([]fusefs.Leftover, error) {
	abs, err := filepath.Abs(runDir)
	if err != nil {
		return nil, err
	}
	left, _, err := fusefs.Reclaim(func(mp string, by fusefs.Holder) bool {
		return strings.HasPrefix(mp, abs+string(filepath.Separator)) || run != "" && by.Owner == diskOwner(run)
	})
	return left, err
}

// reclaimDisks detaches the mounts that dead runs' disk models left where this run keeps its
// own: under its --local-data folder and in its results folder (their locks free: a SIGKILLed
// controller takes its FUSE servers with it), and names them. Other folders' are left to their
// own next run or rig report: a run elsewhere may still want to look at its dead run's folder.
func (c *Cluster) reclaimDisks() {
	var roots []string
	for _, d := range []string{c.t.opts.DataDir, filepath.Dir(c.dir)} {
		if abs, err := filepath.Abs(d); err == nil && d != "" && d != "." {
			roots = append(roots, abs+string(filepath.Separator))
		}
	}
	if len(roots) == 0 {
		return
	}
	left, _, err := fusefs.Reclaim(func(mp string, _ fusefs.Holder) bool {
		for _, r := range roots {
			if strings.HasPrefix(mp, r) {
				return true
			}
		}
		return false
	})
	for _, l := range left {
		c.log.Warn("detached a dead disk model's mount", "mountpoint", l.Mountpoint, "left_by", l.LeftBy.String())
		c.say("%s", Detached(l))
	}
	if err != nil {
		c.log.Warn("detach dead disk models' mounts", "err", err)
	}
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
	for _, w := range c.syncLogs {
		if err := w.Close(); err != nil {
			c.log.Warn("write the disk model's fsyncs", "file", rundir.DiskSyncsFile, "err", err)
		}
	}
	c.disks, c.diskOf, c.syncLogs = nil, nil, nil
}
