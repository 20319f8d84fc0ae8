package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/agent/disk"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/target"
)

// ErrDiskVolume marks a playbook's disk.volume that the target's servers do not have.
var ErrDiskVolume = errors.New("disk.volume")

// VolumesAsked lists the data volumes a plan's runs ask for by disk.volume, in plan order.
func VolumesAsked(plan *playbooks.Plan) []string {
	var out []string
	for _, pr := range plan.Runs {
		if v := pr.Playbook.DiskVolume; v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// CheckVolumes refuses, before anything starts, a plan whose disk.volume names a volume some
// server of the target does not have, or any disk.volume on a target without data volumes (the
// local target: its engine data is on this machine's disk or on a disk model).
func CheckVolumes(ctx context.Context, plan *playbooks.Plan, t target.Target) error {
	asked := VolumesAsked(plan)
	if len(asked) == 0 {
		return nil
	}
	vt, ok := t.(target.Volumed)
	if !ok {
		return fmt.Errorf("%w: %s: the %s target has no data volumes to choose among: its engine data is on this machine's disk, "+
			"or on a disk model, which the local target has instead (disk: {throughput: 125MB/s, sync_latency: 4ms}, docs/disks.md); "+
			"leave disk.volume out, or run on a stack (--stack)", ErrDiskVolume, strings.Join(asked, ", "), t.Name())
	}
	servers, err := vt.Servers(ctx)
	if err != nil {
		return fmt.Errorf("%w: read the servers' data volumes: %w", ErrDiskVolume, err)
	}
	have := map[string][]string{}
	for _, n := range servers {
		have[n.Name] = n.VolumeNames()
	}
	return CheckVolumeNames(asked, have, t.Name())
}

// CheckVolumeNames says which asked volume which server lacks, and what it has.
func CheckVolumeNames(asked []string, have map[string][]string, where string) error {
	var errs []string
	names := make([]string, 0, len(have))
	for n := range have {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, v := range asked {
		var lack []string
		for _, n := range names {
			if !slices.Contains(have[n], v) {
				lack = append(lack, n)
			}
		}
		if len(lack) == 0 {
			continue
		}
		valid := "none: its engine data goes to the agent folder"
		if vs := have[lack[0]]; len(vs) > 0 {
			valid = strings.Join(vs, ", ")
		}
		errs = append(errs, fmt.Sprintf("%q: %s of %s %s no such data volume; valid: %s", v, strings.Join(lack, ", "), where,
			map[bool]string{true: "has", false: "have"}[len(lack) == 1], valid))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s (a stack's volumes are its rig:dataVolumes)", ErrDiskVolume, strings.Join(errs, "; "))
}

// mountVolume mounts the data volume server n keeps its engine data on (the playbook's
// disk.volume, else its first), checks with fio that it delivers what was provisioned (measured
// before the first run on it and kept on the volume; rig disk-check measures again), and
// returns where it is mounted.
func (r *run) mountVolume(ctx context.Context, n inventory.Node) (disk.Result, disk.VolumeCheck, error) {
	v, err := r.dataVolume(n)
	if err != nil {
		return disk.Result{}, disk.VolumeCheck{}, err
	}
	mp := n.MountPoint(r.opts.DataMount, v)
	res, err := MountVolume(ctx, r.agent(n.Name), v, mp, r.opts.DataFS)
	if err != nil {
		return res, disk.VolumeCheck{}, fmt.Errorf("prepare data volume %s (%s) on %s: %w", v.Name, v.VolumeID, n.Name, err)
	}
	res.Volume = v.Name
	r.progress("%s: data volume %s (%s, %s) on %s, %s", n.Name, v.Name, v.VolumeID, res.Device, mp, res.FS)
	vc, err := CheckVolume(ctx, r.agent(n.Name), n.Name, v, disk.CheckOptions{Dir: mp, Reuse: true})
	if vc.Measured.FioVersion != "" {
		how := "measured"
		if vc.Measured.Reused {
			how = "kept from " + vc.Measured.MeasuredAt.Format("2006-01-02 15:04 UTC")
		}
		r.progress("%s: %s: fio (%s): %.1f MB/s sequential write, %.0f IOPS 4 KiB random write, fdatasync %.0f us mean, %.0f us p99",
			n.Name, v.Name, how, vc.Measured.SeqWriteMBps, vc.Measured.RandWriteIOPS, vc.Measured.SyncMeanUs, vc.Measured.SyncP99Us)
	}
	return res, vc, err
}

// dataVolume is the data volume server n keeps its engine data on: the playbook's disk.volume,
// else its first.
func (r *run) dataVolume(n inventory.Node) (inventory.Volume, error) {
	v := n.DataVolumes()[0]
	if name := r.pb.DiskVolume; name != "" {
		var ok bool
		if v, ok = n.Volume(name); !ok {
			return v, CheckVolumeNames([]string{name}, map[string][]string{n.Name: n.VolumeNames()}, "the inventory")
		}
	}
	return v, nil
}

// MountVolume has a node's agent find volume v (by the EBS volume id in its NVMe serial, or its
// device path on a machine not provisioned by rig), make a filesystem fs on it if it has none,
// and mount it at mp.
func MountVolume(ctx context.Context, c *agent.Client, v inventory.Volume, mp, fs string) (disk.Result, error) {
	o := disk.Options{VolumeID: v.VolumeID, FS: fs, MountPoint: mp, Format: true}
	if strings.HasPrefix(v.VolumeID, "/dev/") {
		o.VolumeID, o.Device = "", v.VolumeID
	}
	return c.Disk(ctx, o)
}

// CheckVolume measures volume v of node, mounted at o.Dir, through its agent (o.Reuse: the
// result kept from an earlier check, if any), and holds it to what was provisioned.
func CheckVolume(ctx context.Context, c disk.Checker, node string, v inventory.Volume, o disk.CheckOptions) (disk.VolumeCheck, error) {
	vc := disk.VolumeCheck{Volume: v.Name, Provisioned: disk.Provisioned{Type: v.Type, ThroughputMiBps: v.ThroughputMiBps, IOPS: v.IOPS}}
	m, err := c.DiskCheck(ctx, o)
	if err != nil {
		return vc, fmt.Errorf("disk check of %s's data volume %s at %s: %w", node, v.Name, o.Dir, err)
	}
	vc.Measured = m
	vc.Compared = v.IOPS > 0 || v.ThroughputMiBps > 0
	if !vc.Compared {
		return vc, nil // an inventory that does not say what was provisioned: recorded only
	}
	if err := disk.Compare(vc.Provisioned, m, disk.CheckFloor); err != nil {
		vc.Error = err.Error()
		return vc, fmt.Errorf("%s's data volume %s (%s %s), before load: %w", node, v.Name, v.Type, v.VolumeID, err)
	}
	return vc, nil
}

// recordVolumes writes what prepareDisks found and measured into the manifest.
func (r *run) recordVolumes(found map[string]disk.Result, checks map[string]disk.VolumeCheck) {
	if len(found) == 0 && len(checks) == 0 {
		return
	}
	r.updateManifest(func(m *rundir.Manifest) {
		m.Disks = found
		if len(checks) > 0 {
			m.DiskChecks = checks
		}
	})
}
