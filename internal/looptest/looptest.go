// Package looptest gives tests a real block device of their own: an empty file attached as a
// loop device, so disk figures see only the test's own I/O and a filesystem can be made and
// mounted without touching the machine's disks.
package looptest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/internal/tools"
)

// Device attaches an empty file of size bytes as a loop device and detaches it when the test
// ends. It returns "" where that is not possible (not root, or losetup finds no free loop
// device); a missing losetup skips the test, or fails it under CI=true (tools.Require).
func Device(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		return ""
	}
	tools.Require(t, "losetup")
	img := filepath.Join(t.TempDir(), "loop.img")
	if os.WriteFile(img, nil, 0o600) != nil || os.Truncate(img, size) != nil {
		return ""
	}
	out, err := exec.Command("losetup", "--find", "--show", img).Output()
	if err != nil {
		return ""
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	return dev
}
