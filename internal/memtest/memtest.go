// Package memtest reads this process's memory figures for tests that measure what a piece of
// the rig costs per item (the memory constants behind rig validate's and rig report's checks).
package memtest

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// StatusBytes reads a kB line of /proc/self/status (VmRSS, VmHWM) in bytes; a machine without
// /proc skips the test.
func StatusBytes(t testing.TB, key string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			f := strings.Fields(v)
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil || len(f) != 2 || f[1] != "kB" {
				t.Fatalf("/proc/self/status %s: %q", key, l)
			}
			return n << 10
		}
	}
	t.Fatalf("/proc/self/status has no %s", key)
	return 0
}
