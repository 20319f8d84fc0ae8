package disk

import (
	"context"
	"errors"
	"github.com/rig-dev/rig/internal/looptest"
	"github.com/rig-dev/rig/internal/tools"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// loop attaches an empty file as a real block device (root only).
func loop(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for loop devices and mount")
	}
	tools.Require(t, "mkfs.ext4")
	tools.Require(t, "blkid")
	tools.Require(t, "findmnt")
	tools.Require(t, "mount")
	dev := looptest.Device(t, 64<<20)
	if dev == "" {
		t.Skip("no loop device here")
	}
	return dev
}

func TestPrepareFormatsMountsAndIsIdempotent(t *testing.T) {
	ctx := context.Background()
	dev := loop(t)
	mp := filepath.Join(t.TempDir(), "data")
	t.Cleanup(func() { exec.Command("umount", mp).Run() })

	if _, err := Prepare(ctx, Options{Device: dev, MountPoint: mp}); !errors.Is(err, ErrNoFS) {
		t.Fatalf("empty device without format: %v, want ErrNoFS", err)
	}
	res, err := Prepare(ctx, Options{Device: dev, MountPoint: mp, Format: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Formatted || !res.Mounted || !strings.Contains(res.Options, "noatime") {
		t.Fatalf("first prepare %+v: want formatted, mounted, noatime", res)
	}
	if got := fsType(ctx, dev); got != "ext4" {
		t.Fatalf("blkid says %q", got)
	}
	if err := os.WriteFile(filepath.Join(mp, "kept"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Again: nothing formatted, nothing lost.
	res, err = Prepare(ctx, Options{Device: dev, MountPoint: mp, Format: true})
	if err != nil || res.Formatted || res.Mounted {
		t.Fatalf("second prepare %+v, %v: want a no-op", res, err)
	}
	if _, err := os.Stat(filepath.Join(mp, "kept")); err != nil {
		t.Fatalf("data lost: %v", err)
	}
	// The device is in use: another mount point is refused.
	if _, err := Prepare(ctx, Options{Device: dev, MountPoint: filepath.Join(t.TempDir(), "other"), Format: true}); !errors.Is(err, ErrInUse) {
		t.Fatalf("second mount point: %v, want ErrInUse", err)
	}
	// Unmounted, a request for another filesystem never reformats it.
	if out, err := exec.Command("umount", mp).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}
	if _, err := Prepare(ctx, Options{Device: dev, MountPoint: mp, FS: "xfs", Format: true}); !errors.Is(err, ErrOtherFS) {
		t.Fatalf("xfs over ext4: %v, want ErrOtherFS", err)
	}
	if got := fsType(ctx, dev); got != "ext4" {
		t.Fatalf("device was touched: blkid says %q", got)
	}
}

func TestPrepareBadOptions(t *testing.T) {
	for _, o := range []Options{
		{Device: "/dev/x", MountPoint: "relative"},
		{Device: "/dev/x", MountPoint: "/"},
		{MountPoint: "/data"},
		{Device: "/dev/x", VolumeID: "vol-1", MountPoint: "/data"},
		{Device: "/dev/x", MountPoint: "/data", FS: "btrfs"},
	} {
		if _, err := Prepare(context.Background(), o); !errors.Is(err, ErrBadOption) {
			t.Errorf("%+v: %v, want ErrBadOption", o, err)
		}
	}
}

func TestVolumeNotFound(t *testing.T) {
	_, err := Prepare(context.Background(), Options{VolumeID: "vol-0doesnotexist", MountPoint: "/data-none"})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "vol-0doesnotexist") {
		t.Fatalf("%v: want ErrNotFound naming the volume", err)
	}
}

func TestUnmountSyncsAndIsIdempotent(t *testing.T) {
	ctx := context.Background()
	dev := loop(t)
	mp := filepath.Join(t.TempDir(), "data")
	t.Cleanup(func() { exec.Command("umount", mp).Run() })
	if _, err := Unmount(ctx, UnmountOptions{MountPoint: "relative"}); !errors.Is(err, ErrBadOption) {
		t.Fatalf("relative mount point: %v, want ErrBadOption", err)
	}
	if _, err := Prepare(ctx, Options{Device: dev, MountPoint: mp, Format: true}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mp, "written"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A file held open keeps the mount busy: refused, not forced.
	f, err := os.Open(filepath.Join(mp, "written"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Unmount(ctx, UnmountOptions{MountPoint: mp}); !errors.Is(err, ErrInUse) {
		t.Fatalf("busy mount: %v, want ErrInUse", err)
	}
	f.Close()
	res, err := Unmount(ctx, UnmountOptions{MountPoint: mp})
	if err != nil || !res.Synced || !res.Unmounted || !sameDevice(res.Device, dev) {
		t.Fatalf("unmount %+v, %v", res, err)
	}
	if src, ok := mountedAt(ctx, mp); ok {
		t.Fatalf("still mounted from %s", src)
	}
	// Again: nothing to do.
	if res, err := Unmount(ctx, UnmountOptions{MountPoint: mp}); err != nil || res.Unmounted {
		t.Fatalf("second unmount %+v, %v", res, err)
	}
	// What was written reached the device: mounted again, the file is there.
	if _, err := Prepare(ctx, Options{Device: dev, MountPoint: mp}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(mp, "written")); err != nil || string(b) != "kept" {
		t.Fatalf("after remount: %q %v", b, err)
	}
}
