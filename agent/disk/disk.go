// Package disk prepares a node's data volume: find it (by EBS volume id through its NVMe serial,
// or by device path), make a filesystem only on a device that has none, and mount it, so the
// engine's log and snapshots land on the volume the experiment provisioned, not on the root disk.
package disk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/rig-dev/rig/agent/facts"
)

// Errors callers act on.
var (
	ErrNotFound  = errors.New("data volume not found")
	ErrInUse     = errors.New("device is mounted elsewhere")
	ErrOtherFS   = errors.New("device holds another filesystem")
	ErrNoFS      = errors.New("device has no filesystem")
	ErrBadOption = errors.New("bad disk options")
)

// Options say which volume and where it goes.
type Options struct {
	VolumeID   string `json:"volume_id,omitempty"` // EBS volume (vol-…), found by its NVMe serial
	Device     string `json:"device,omitempty"`    // or an explicit block device, e.g. /dev/nvme1n1
	FS         string `json:"fs,omitempty"`        // ext4 (default) or xfs
	MountPoint string `json:"mount_point"`         // absolute, e.g. /data
	// Format allows mkfs on a device with no filesystem. A device with a filesystem is never
	// formatted: a mismatch is ErrOtherFS, so no data is ever destroyed by a typo.
	Format bool   `json:"format,omitempty"`
	Root   string `json:"-"` // filesystem root for /sys lookups ("/")
}

// Result is what was found and done.
type Result struct {
	Device     string `json:"device"`
	Volume     string `json:"volume,omitempty"` // the volume's name in the inventory (the runner's)
	VolumeID   string `json:"volume_id,omitempty"`
	FS         string `json:"fs"`
	MountPoint string `json:"mount_point"`
	Formatted  bool   `json:"formatted"`
	Mounted    bool   `json:"mounted"` // false when it already was
	SizeBytes  uint64 `json:"size_bytes,omitempty"`
	Options    string `json:"mount_options,omitempty"` // as the kernel reports them (findmnt)
}

// Prepare makes the volume usable at MountPoint. It is idempotent: a volume already mounted there
// is left as it is.
func Prepare(ctx context.Context, o Options) (Result, error) {
	if o.FS == "" {
		o.FS = "ext4"
	}
	if o.FS != "ext4" && o.FS != "xfs" {
		return Result{}, fmt.Errorf("%w: fs %q: want ext4 or xfs", ErrBadOption, o.FS)
	}
	if !filepath.IsAbs(o.MountPoint) || filepath.Clean(o.MountPoint) == "/" {
		return Result{}, fmt.Errorf("%w: mount_point %q: want an absolute path other than /", ErrBadOption, o.MountPoint)
	}
	if (o.VolumeID == "") == (o.Device == "") {
		return Result{}, fmt.Errorf("%w: give exactly one of volume_id and device", ErrBadOption)
	}
	res := Result{VolumeID: o.VolumeID, FS: o.FS, MountPoint: filepath.Clean(o.MountPoint), Device: o.Device}
	if o.VolumeID != "" {
		dev, size, err := FindVolume(o.Root, o.VolumeID)
		if err != nil {
			return res, err
		}
		res.Device, res.SizeBytes = dev, size
	}
	if src, ok := mountedAt(ctx, res.MountPoint); ok {
		if !sameDevice(src, res.Device) {
			return res, fmt.Errorf("%w: %s is already a mount of %s, not %s", ErrInUse, res.MountPoint, src, res.Device)
		}
		res.Options = mountOptions(ctx, res.MountPoint)
		return res, nil
	}
	if target := mountTarget(ctx, res.Device); target != "" {
		return res, fmt.Errorf("%w: %s is mounted at %s", ErrInUse, res.Device, target)
	}
	have := fsType(ctx, res.Device)
	switch {
	case have == "" && !o.Format:
		return res, fmt.Errorf("%w: %s (allow format to make %s on it)", ErrNoFS, res.Device, o.FS)
	case have == "":
		if err := mkfs(ctx, o.FS, res.Device); err != nil {
			return res, err
		}
		res.Formatted = true
	case have != o.FS:
		return res, fmt.Errorf("%w: %s holds %s, asked for %s; it is left untouched", ErrOtherFS, res.Device, have, o.FS)
	}
	if err := os.MkdirAll(res.MountPoint, 0o755); err != nil {
		return res, fmt.Errorf("create mount point: %w", err)
	}
	// noatime: reads must not turn into metadata writes during a measurement.
	if out, err := exec.CommandContext(ctx, "mount", "-o", "noatime", res.Device, res.MountPoint).CombinedOutput(); err != nil {
		return res, fmt.Errorf("mount %s on %s: %v: %s", res.Device, res.MountPoint, err, strings.TrimSpace(string(out)))
	}
	res.Mounted = true
	res.Options = mountOptions(ctx, res.MountPoint)
	return res, nil
}

// mkfs makes the filesystem with every structure initialised now: ext4's lazy inode-table and
// journal initialisation would otherwise write in the background for minutes after mount, on
// the very disk whose latency is being measured.
func mkfs(ctx context.Context, fs, dev string) error {
	args := []string{"-F", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev}
	if fs == "xfs" {
		args = []string{"-f", "-q", dev}
	}
	out, err := exec.CommandContext(ctx, "mkfs."+fs, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.%s %s: %v: %s", fs, dev, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// FindVolume maps an EBS volume id to its NVMe device (and its size) through the device serials
// in /sys under root ("/" or "": this machine).
func FindVolume(root, volumeID string) (string, uint64, error) {
	devs, err := facts.BlockDevices(root)
	if err != nil && len(devs) == 0 {
		return "", 0, fmt.Errorf("list block devices: %w", err)
	}
	var seen []string
	for _, d := range devs {
		if d.VolumeID == volumeID {
			return "/dev/" + d.Name, d.SizeBytes, nil
		}
		seen = append(seen, d.Name+"="+orNone(d.VolumeID))
	}
	return "", 0, fmt.Errorf("%w: no block device has serial %s (devices: %s)", ErrNotFound, volumeID, strings.Join(seen, ", "))
}

func orNone(s string) string {
	if s == "" {
		return "no volume id"
	}
	return s
}

// fsType probes the device itself (-p): blkid's cache can still describe what an earlier device
// of the same name held.
func fsType(ctx context.Context, dev string) string {
	out, _ := exec.CommandContext(ctx, "blkid", "-p", "-o", "value", "-s", "TYPE", dev).Output()
	return strings.TrimSpace(string(out))
}

func findmnt(ctx context.Context, args ...string) string {
	out, _ := exec.CommandContext(ctx, "findmnt", append([]string{"-n"}, args...)...).Output()
	return strings.TrimSpace(string(out))
}

func mountedAt(ctx context.Context, mp string) (string, bool) {
	src := findmnt(ctx, "-o", "SOURCE", "--mountpoint", mp)
	return src, src != ""
}

func mountTarget(ctx context.Context, dev string) string {
	t := findmnt(ctx, "-o", "TARGET", "--source", dev)
	if i := strings.IndexByte(t, '\n'); i >= 0 {
		t = t[:i]
	}
	return t
}

func mountOptions(ctx context.Context, mp string) string {
	return findmnt(ctx, "-o", "OPTIONS", "--mountpoint", mp)
}

func sameDevice(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return a == b || (err1 == nil && err2 == nil && ra == rb)
}
