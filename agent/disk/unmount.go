package disk

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// UnmountOptions say which mount to take down.
type UnmountOptions struct {
	MountPoint string `json:"mount_point"` // absolute, e.g. /data
}

// UnmountResult says what was found and done.
type UnmountResult struct {
	MountPoint string `json:"mount_point"`
	Device     string `json:"device,omitempty"` // what was mounted there
	Synced     bool   `json:"synced"`
	Unmounted  bool   `json:"unmounted"` // false when nothing was mounted there
	SyncMS     int64  `json:"sync_ms"`
}

// Unmount flushes the filesystem at MountPoint to its device (syncfs) and unmounts it, so that a
// volume can be detached or its instance terminated with every write on the volume. It is
// idempotent: nothing mounted there is not an error. A mount still in use is ErrInUse, with the
// kernel's answer; nothing is forced.
func Unmount(ctx context.Context, o UnmountOptions) (UnmountResult, error) {
	if !filepath.IsAbs(o.MountPoint) || filepath.Clean(o.MountPoint) == "/" {
		return UnmountResult{}, fmt.Errorf("%w: mount_point %q: want an absolute path other than /", ErrBadOption, o.MountPoint)
	}
	res := UnmountResult{MountPoint: filepath.Clean(o.MountPoint)}
	src, ok := mountedAt(ctx, res.MountPoint)
	if !ok {
		return res, nil
	}
	res.Device = src
	start := time.Now()
	if err := syncfs(res.MountPoint); err != nil {
		return res, fmt.Errorf("sync %s: %w", res.MountPoint, err)
	}
	res.Synced, res.SyncMS = true, time.Since(start).Milliseconds()
	if out, err := exec.CommandContext(ctx, "umount", res.MountPoint).CombinedOutput(); err != nil {
		msg := strings.TrimSpace(string(out))
		if strings.Contains(msg, "busy") {
			return res, fmt.Errorf("%w: %s is busy (a process still has files open there): %s", ErrInUse, res.MountPoint, msg)
		}
		return res, fmt.Errorf("umount %s: %v: %s", res.MountPoint, err, msg)
	}
	res.Unmounted = true
	return res, nil
}
