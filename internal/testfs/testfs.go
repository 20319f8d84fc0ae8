// Package testfs gives tests a real filesystem that can run out of space: a small tmpfs,
// mounted for the test and unmounted when it ends (root only), and a filler that uses it up.
package testfs

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"github.com/rig-dev/rig/internal/tools"

	"golang.org/x/sys/unix"
)

// Tmpfs mounts a tmpfs of size bytes on a new folder and returns the folder; it is unmounted
// when the test ends. The test is skipped when it does not run as root.
func Tmpfs(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	tools.Require(t, "mount")
	dir, err := os.MkdirTemp("", "rig-tmpfs-")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.FormatInt(size, 10)+",mode=0755", "tmpfs", dir).CombinedOutput(); err != nil {
		os.Remove(dir)
		t.Fatalf("mount a tmpfs of %d bytes on %s: %v: %s", size, dir, err, out)
	}
	t.Cleanup(func() {
		// Lazily: a process the test started may still hold a file open there.
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("unmount %s: %v: %s", dir, err, out)
		}
		os.Remove(dir)
	})
	return dir
}

// Free is the bytes an unprivileged writer may still use on the filesystem holding path.
func Free(t testing.TB, path string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		t.Fatalf("statfs %s: %v", path, err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// Fill writes the file path until the filesystem holding it has at most leave bytes free (leave
// 0: until the filesystem says ENOSPC). It returns how many bytes it wrote.
func Fill(t testing.TB, path string, leave int64) int64 {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("filler %s: %v", path, err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var wrote int64
	for {
		want := Free(t, path) - leave
		if want <= 0 {
			return wrote
		}
		n, err := f.Write(buf[:min(int64(len(buf)), want)])
		wrote += int64(n)
		if errors.Is(err, syscall.ENOSPC) {
			return wrote
		}
		if err != nil {
			t.Fatalf("fill %s: %v", path, err)
		}
	}
}
