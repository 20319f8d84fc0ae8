package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/diskmodel/fusefs"
	"github.com/rig-dev/rig/target"
	localtr "github.com/rig-dev/rig/transport/local"
	"golang.org/x/sys/unix"
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
		root, got, err := c.ModelDisk(context.Background(), n, l, target.DiskModelOptions{})
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

// Two runs with one --local-data: the second's disk model is refused naming the first run, which
// keeps its model; once the first stops, the mountpoint is free. A model lost mid-run (detached
// under the run) is delivered by DiskLost, naming the node.
func TestModelDiskOneRunPerLocalData(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting FUSE needs root")
	}
	data := t.TempDir()
	cluster := func(run string) *Cluster {
		inv, err := New(Options{FirstAddress: testFirst}).Inventory(t.TempDir(), 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		c := &Cluster{t: New(Options{DataDir: data}), inv: inv, run: run, log: slog.New(slog.DiscardHandler), tr: localtr.New()}
		t.Cleanup(func() { c.Stop(context.Background()) })
		return c
	}
	a, b := cluster("20260101-000000-a"), cluster("20260101-000001-b")
	n := a.inv.Servers()[0]
	l := diskmodel.Limits{SyncLatency: time.Millisecond}
	root, _, err := a.ModelDisk(context.Background(), n, l, target.DiskModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = b.ModelDisk(context.Background(), b.inv.Servers()[0], l, target.DiskModelOptions{})
	want := fmt.Sprintf("held by a live disk model: run 20260101-000000-a (pid %d)", os.Getpid())
	if !errors.Is(err, fusefs.ErrBusy) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--local-data") {
		t.Fatalf("second run's disk model: %v; want it refused naming %q and --local-data", err, want)
	}
	t.Logf("refused: %v", err)
	if err := os.WriteFile(filepath.Join(root, "log.db"), []byte("raft"), 0o644); err != nil {
		t.Fatalf("the first run's model after the refusal: %v", err)
	}
	select {
	case err := <-a.DiskLost():
		t.Fatalf("the first run's model was lost: %v", err)
	default:
	}

	if err := unix.Unmount(root, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-a.DiskLost():
		if !errors.Is(err, fusefs.ErrLost) || !strings.Contains(err.Error(), "disk model of node-0") {
			t.Errorf("DiskLost: %v; want ErrLost naming node-0", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a model detached under the run was not delivered by DiskLost within 10s")
	}
	a.Stop(context.Background())
	if _, _, err := b.ModelDisk(context.Background(), b.inv.Servers()[0], l, target.DiskModelOptions{}); err != nil {
		t.Fatalf("once the first run stopped: %v", err)
	}
}
