package playbooks

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/inventory"
)

// diskKeys are the fields of the disk: block, the disk model a run puts under every server's
// engine data (diskmodel.Limits; on the local target a FUSE mount, docs/disks.md).
// volume instead names the stack's data volume the engine data lives on (an SSH target's).
var diskKeys = []string{"volume", "throughput", "iops", "io_size", "burst", "sync_latency", "sync_per_mib"}

// diskFields are the disk: block's fields, each a matrix axis (disk.throughput: [125MB/s, 1GB/s]);
// the block is a section like load (sections), its fields among the static ones (staticFields).
var diskFields = map[string]field{
	"disk.volume": {
		set: func(p *Playbook, s string) error {
			if err := inventory.CheckName("disk.volume", s); err != nil {
				return fmt.Errorf("%w: the name of one of the stack's data volumes (rig:dataVolumes), e.g. gp3-1000", err)
			}
			p.DiskVolume = s
			return nil
		},
		get: func(p *Playbook) string { return p.DiskVolume },
	},
	"disk.throughput": quantityField(units.ParseByteRate, units.FormatByteRate, 1e5, 100e9, true,
		"100kB/s..100GB/s, e.g. 125MB/s (0/s: no cap)", func(p *Playbook) *int64 { return &p.Disk.Throughput }),
	"disk.iops": quantityField(units.ParseCount, units.FormatCount, 10, 10_000_000, true,
		"10..10M operations per second, e.g. 3000 (0: no cap)", func(p *Playbook) *int64 { return &p.Disk.IOPS }),
	"disk.io_size": {
		set: quantityField(units.ParseSize, units.FormatSize, 4<<10, 16<<20, false,
			"4KiB..16MiB, e.g. 256KiB (EBS's SSD I/O unit, the default)", func(p *Playbook) *int64 { return &p.Disk.IOSize }).set,
		get: func(p *Playbook) string { return units.FormatSize(p.Disk.EffectiveIOSize()) },
	},
	"disk.burst": durationField(0, time.Hour, "a duration from 0 to 1h: how long the disk may run uncapped after it was idle, e.g. 2s",
		func(p *Playbook) *time.Duration { return &p.Disk.Burst }),
	"disk.sync_latency": durationField(0, 10*time.Second, "a duration from 0 to 10s: the least time an fsync takes, e.g. 4ms",
		func(p *Playbook) *time.Duration { return &p.Disk.SyncLatency }),
	"disk.sync_per_mib": durationField(0, 10*time.Second, "a duration from 0 to 10s: added to an fsync per MiB the file had unsynced, e.g. 1ms",
		func(p *Playbook) *time.Duration { return &p.Disk.SyncPerMiB }),
}

// checkDisk is the disk: block's rule across fields.
func checkDisk(d diskmodel.Limits, add func(path, rule string, deps []string, format string, args ...any)) {
	if d.Burst > 0 && d.Throughput == 0 && d.IOPS == 0 {
		add("disk.burst", "disk-burst", []string{"disk.throughput", "disk.iops"},
			"%s of burst, but no disk.throughput or disk.iops cap to burst above; set one, or leave burst out", units.FormatDuration(d.Burst))
	}
	checkDiskProbe(d, add)
}

// probeFixes are the disk: fields a probe too long for its model can be fixed by, each with the
// way it must go (a cap up, a cost down), its range's end that way, and its form in messages.
var probeFixes = []struct {
	key    string
	ptr    func(*diskmodel.Limits) *int64
	up     bool
	end    int64
	format func(int64) string
}{
	{"sync_latency", func(l *diskmodel.Limits) *int64 { return (*int64)(&l.SyncLatency) }, false, 0, formatAtMost},
	{"sync_per_mib", func(l *diskmodel.Limits) *int64 { return (*int64)(&l.SyncPerMiB) }, false, 0, formatAtMost},
	{"throughput", func(l *diskmodel.Limits) *int64 { return &l.Throughput }, true, 100e9, func(v int64) string { return units.FormatByteRate(roundUp(v)) }},
	{"iops", func(l *diskmodel.Limits) *int64 { return &l.IOPS }, true, 10_000_000, func(v int64) string { return units.FormatCount(roundUp(v)) }},
}

// roundUp rounds a least value up to two significant figures, as a person would write it.
func roundUp(v int64) int64 {
	unit := int64(1)
	for v/unit >= 100 {
		unit *= 10
	}
	return (v + unit - 1) / unit * unit
}

// formatAtMost writes a duration bound rounded down to three significant figures' unit.
func formatAtMost(v int64) string {
	d := time.Duration(v)
	for _, u := range []time.Duration{time.Second, time.Millisecond, time.Microsecond} {
		if d >= 10*u {
			return units.FormatDuration(d.Truncate(u / 10))
		}
	}
	return units.FormatDuration(d)
}

// checkDiskProbe refuses a model whose probe before load (diskmodel.Probe: a few fsyncs and
// writes at the caps) would take longer than diskmodel.MaxProbePass a pass by the model's own
// arithmetic, pointing at the field that costs most and saying, for each field that alone could
// bring it within the bound, the value it would need.
func checkDiskProbe(d diskmodel.Limits, add func(path, rule string, deps []string, format string, args ...any)) {
	pass := diskmodel.ProbeTime(d, diskmodel.ProbeOptions{})
	if pass <= diskmodel.MaxProbePass {
		return
	}
	worst, saved := "", time.Duration(-1)
	var wants []string
	for _, f := range probeFixes {
		v := *f.ptr(&d)
		if v == 0 {
			continue // no cap, no cost: nothing to change
		}
		without := d
		*f.ptr(&without) = 0
		if s := pass - diskmodel.ProbeTime(without, diskmodel.ProbeOptions{}); s > saved {
			worst, saved = f.key, s
		}
		// The value that alone brings a pass within the bound: a probe only gets shorter as a
		// cap rises or a cost falls, so a bisection finds the edge.
		lo, hi := v, f.end
		if !f.up {
			lo, hi = f.end, v
		}
		fits := func(x int64) bool {
			l := d
			*f.ptr(&l) = x
			return diskmodel.ProbeTime(l, diskmodel.ProbeOptions{}) <= diskmodel.MaxProbePass
		}
		edge := lo
		if f.up {
			edge = hi
		}
		if !fits(edge) {
			continue
		}
		for hi-lo > max(hi/1000, 1) {
			mid := lo + (hi-lo)/2
			if fits(mid) == f.up {
				hi = mid
			} else {
				lo = mid
			}
		}
		if f.up {
			wants = append(wants, fmt.Sprintf("%s at least %s", f.key, f.format(hi)))
		} else {
			wants = append(wants, fmt.Sprintf("%s at most %s", f.key, f.format(lo)))
		}
	}
	want := "a faster model: no one field brings it within the bound (raise throughput and iops, lower sync_latency and sync_per_mib)"
	if len(wants) > 0 {
		want = strings.Join(wants, ", or ")
	}
	path := "disk"
	if worst != "" {
		path = "disk." + worst
	}
	add(path, "disk-probe", []string{"disk.throughput", "disk.iops", "disk.io_size", "disk.burst", "disk.sync_latency", "disk.sync_per_mib"},
		"the model makes the disk probe before load (its fsyncs, and its writes at the caps; diskmodel.Probe) take %s a pass by its own arithmetic, more than the %s a pass allows; want %s, with the rest as given",
		units.FormatDuration(pass.Round(100*time.Millisecond)), units.FormatDuration(diskmodel.MaxProbePass), want)
}

// checkDiskModels refuses a disk: block (or a matrix combination of disk.* values) that models
// nothing: no cap, no sync cost and no volume leaves the engine data on the target's own disk, as
// leaving disk: out does, while the playbook reads as if a model were under it.
func checkDiskModels(p *Playbook, add func(path, rule string, deps []string, format string, args ...any)) {
	_, given := p.pos["disk"]
	var axes []string
	for _, ax := range p.Matrix {
		if strings.HasPrefix(ax.Key, "disk.") {
			axes = append(axes, ax.Key)
		}
	}
	if (!given && len(axes) == 0) || !p.Disk.Zero() || p.DiskVolume != "" {
		return
	}
	add("disk", "disk-nothing", append([]string{"disk.throughput", "disk.iops", "disk.sync_latency", "disk.sync_per_mib", "disk.volume"}, axes...),
		"models nothing (no throughput or iops cap, no sync_latency or sync_per_mib; 0 means no cap), so the engine data would sit on the target's own disk; "+
			"want at least one of throughput (100kB/s..100GB/s), iops (10..10M), sync_latency or sync_per_mib (up to 10s), e.g. disk: {throughput: 125MB/s, sync_latency: 4ms}, "+
			"or volume: on a stack, or leave disk: out")
}

// DiskLimits reads a disk model written as the disk: block's fields, FIELD=VALUE joined by
// commas ("throughput=1000MB/s,sync_latency=4ms"), each checked by the playbook's own rule
// for it: the one parser of a model outside a playbook (rig bench disk --model).
func DiskLimits(spec string) (diskmodel.Limits, error) {
	var p Playbook
	model := diskKeys[1:] // volume names a stack's volume, not a model
	for _, kv := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		f, known := diskFields["disk."+k]
		if !ok || !known || k == "volume" {
			return diskmodel.Limits{}, fmt.Errorf("%q: want FIELD=VALUE with FIELD one of %s", kv, strings.Join(model, ", "))
		}
		if err := f.set(&p, strings.TrimSpace(v)); err != nil {
			return diskmodel.Limits{}, fmt.Errorf("%s: %w", k, err)
		}
	}
	var problems []string
	checkDisk(p.Disk, func(path, _ string, _ []string, format string, args ...any) {
		problems = append(problems, path+": "+fmt.Sprintf(format, args...))
	})
	if len(problems) > 0 {
		return diskmodel.Limits{}, errors.New(strings.Join(problems, "; "))
	}
	return p.Disk, p.Disk.Validate()
}
