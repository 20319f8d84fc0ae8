package local

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/diskmodel"
	localtr "github.com/rig-dev/rig/transport/local"
)

// ModelDisk mounts a real model where the server keeps its data (its node folder, or
// --local-data's folder), probes it, and Stop unmounts it, leaving the data in disk.backing.
func TestModelDiskMountsProbesAndUnmounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting FUSE needs root")
	}
	for _, dataDir := range []string{"", t.TempDir()} {
		inv, err := New(Options{FirstAddress: testFirst}).Inventory(t.TempDir(), 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		c := &Cluster{t: New(Options{DataDir: dataDir}), inv: inv, log: slog.New(slog.DiscardHandler), tr: localtr.New()}
		n := inv.Servers()[0]
		l := diskmodel.Limits{Throughput: 64e6, SyncLatency: 2 * time.Millisecond}
		root, got, err := c.ModelDisk(context.Background(), n, l)
		if err != nil {
			c.Stop(context.Background())
			t.Fatal(err)
		}
		base := n.Dir
		if dataDir != "" {
			base = filepath.Join(dataDir, n.Name)
		}
		if root != filepath.Join(base, "disk") {
			t.Errorf("data root %s, want %s", root, filepath.Join(base, "disk"))
		}
		if !isMounted(root) {
			t.Errorf("%s is not a mount", root)
		}
		if err := diskmodel.Check(l, got, 0.8); err != nil || got.ThroughputBps > 1.1*float64(l.Throughput) || got.SyncLatency < l.SyncLatency {
			t.Errorf("probe %+v of %v: %v", got, l, err)
		}
		if err := os.WriteFile(filepath.Join(root, "log.db"), []byte("raft"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := c.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if isMounted(root) {
			t.Fatalf("%s still mounted after Stop", root)
		}
		if b, err := os.ReadFile(filepath.Join(base, "disk.backing", "log.db")); err != nil || string(b) != "raft" {
			t.Fatalf("data after unmount: %q, %v", b, err)
		}
	}
}

func isMounted(dir string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}
