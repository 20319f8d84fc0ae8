package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/diskmodel/fusefs"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/target/targettest"
)

// diskTarget's clusters can model a disk, reporting probe for every server.
type diskTarget struct {
	*targettest.Target
	probe diskmodel.Achieved
	asked []diskmodel.Limits
	opts  []target.DiskModelOptions
	left  []time.Duration // what was left of each ModelDisk's context (-1: no deadline)
}

type diskCluster struct {
	*targettest.Cluster
	t *diskTarget
}

func (t *diskTarget) Start(ctx context.Context, so target.StartOptions) (target.Cluster, error) {
	c, err := t.Target.Start(ctx, so)
	if err != nil {
		return nil, err
	}
	return diskCluster{c.(*targettest.Cluster), t}, nil
}

func (c diskCluster) ModelDisk(ctx context.Context, n inventory.Node, l diskmodel.Limits, o target.DiskModelOptions) (string, diskmodel.Achieved, error) {
	c.t.asked = append(c.t.asked, l)
	c.t.opts = append(c.t.opts, o)
	if o.Passthrough {
		got := c.t.probe
		got.Passthrough = true
		return "/model/" + n.Name, got, nil
	}
	left := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	c.t.left = append(c.t.left, left)
	return "/model/" + n.Name, c.t.probe, nil
}

const diskBlock = "disk: {throughput: 125MB/s, sync_latency: 4ms}\n"

var diskAsked = diskmodel.Limits{Throughput: 125e6, SyncLatency: 4 * time.Millisecond}

// The playbook's disk: reaches every server's model, the engines keep their data on it, and
// the manifest holds each probe beside what was asked.
func TestDiskModelUnderEveryServer(t *testing.T) {
	c := targettest.NewCluster()
	tgt := &diskTarget{Target: &targettest.Target{Cluster: c}, probe: diskmodel.Achieved{ThroughputBps: 124e6, IOPS: 9000, SyncLatency: 4100 * time.Microsecond}}
	var res result
	res.outs, res.err = Run(context.Background(), plan(t, "1s", diskBlock), Options{Target: tgt, ResultsDir: t.TempDir(), Binary: "rig", Analyze: analysis.AnalyzeRun})
	if res.err != nil {
		t.Fatal(res.err)
	}
	if len(tgt.asked) != 3 {
		t.Fatalf("ModelDisk called for %d servers, want 3", len(tgt.asked))
	}
	for _, l := range tgt.asked {
		if l != diskAsked {
			t.Fatalf("model asked %+v, want %+v", l, diskAsked)
		}
	}
	man := readManifest(t, res.outs[0].Dir)
	if len(man.DiskModels) != 3 {
		t.Fatalf("manifest disk_models %+v", man.DiskModels)
	}
	for node, rec := range man.DiskModels {
		if rec.Asked != diskAsked || rec.Achieved != tgt.probe || len(rec.LoadAvg) != 3 {
			t.Errorf("%s: recorded %+v", node, rec)
		}
	}
	// Each probe is held to the bound the plan shows (diskmodel.ProbeBound).
	bound := diskmodel.ProbeBound(diskAsked, diskmodel.ProbeOptions{Repeats: diskmodel.ProbePasses})
	for i, left := range tgt.left {
		if left > bound || left < bound-10*time.Second {
			t.Errorf("ModelDisk %d had %v left of its context; want the probe's bound %v", i, left, bound)
		}
	}
	// The engine data went under the model's folder (it is removed from there at the end).
	if want := "node-1 remove " + path.Join("/model/node-1", "rig"); !c.Called(want) {
		t.Errorf("no call %q; engine data not on the model", want)
	}
}

// A model that delivers less than 80 % of an asked figure stops the run before the engines
// start, naming the node and both figures.
func TestDiskModelShortfallStopsBeforeLoad(t *testing.T) {
	c := targettest.NewCluster()
	tgt := &diskTarget{Target: &targettest.Target{Cluster: c}, probe: diskmodel.Achieved{ThroughputBps: 50e6, SyncLatency: 4 * time.Millisecond}}
	outs, err := Run(context.Background(), plan(t, "1s", diskBlock), Options{Target: tgt, ResultsDir: t.TempDir(), Binary: "rig", Analyze: analysis.AnalyzeRun})
	want := "disk model on node-0, before load: disk delivers less than asked (floor 80 %): throughput 125.0 MB/s asked, 50.0 MB/s achieved (40 %)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err %v; want %q", err, want)
	}
	if c.Called("node-0 POST /engine/start") || c.Called("node-1 POST /engine/start") {
		t.Fatal("engines started on a disk that fell short")
	}
	if man := readManifest(t, outs[0].Dir); man.DiskModels["node-0"].Achieved.ThroughputBps != 50e6 {
		t.Errorf("the short probe is not in the manifest: %+v", man.DiskModels)
	} else if man.OverheadS != nil {
		// Its timeline never ran: wall time minus the playbook's duration means nothing.
		t.Errorf("a run stopped before load has an overhead of %.1f s", *man.OverheadS)
	}
}

// A target that cannot model a disk refuses disk: before the engines start.
func TestDiskModelNeedsATargetThatHasOne(t *testing.T) {
	c := targettest.NewCluster()
	_, err := Run(context.Background(), plan(t, "1s", diskBlock), Options{Target: &targettest.Target{Cluster: c}, ResultsDir: t.TempDir(), Binary: "rig", Analyze: analysis.AnalyzeRun})
	if err == nil || !strings.Contains(err.Error(), "is a disk model, which this target cannot mount") {
		t.Fatalf("err %v", err)
	}
	if c.Called("node-0 POST /engine/start") {
		t.Fatal("engines started")
	}
}

func readManifest(t *testing.T, dir string) rundir.Manifest {
	t.Helper()
	var m rundir.Manifest
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// lostDiskCluster's models can be lost mid-run (DiskWatcher).
type lostDiskCluster struct {
	diskCluster
	lost chan error
}

func (c lostDiskCluster) DiskLost() <-chan error { return c.lost }

type lostDiskTarget struct {
	*diskTarget
	lost chan error
}

func (t *lostDiskTarget) Start(ctx context.Context, so target.StartOptions) (target.Cluster, error) {
	c, err := t.diskTarget.Start(ctx, so)
	if err != nil {
		return nil, err
	}
	return lostDiskCluster{c.(diskCluster), t.lost}, nil
}

// A disk model lost under a running load (unmounted by someone else, as a second run on the
// same --local-data once did) fails the run at once, naming the node and how, instead of
// letting it report ok on whatever disk is left.
func TestLostDiskModelFailsTheRun(t *testing.T) {
	c := targettest.NewCluster()
	tgt := &lostDiskTarget{diskTarget: &diskTarget{Target: &targettest.Target{Cluster: c}, probe: diskmodel.Achieved{ThroughputBps: 125e6, SyncLatency: 4 * time.Millisecond}},
		lost: make(chan error, 1)}
	lostErr := fmt.Errorf("disk model of node-1: %w: /x/node-1/disk: its mount is gone from the mountpoint", fusefs.ErrLost)
	c.OnCall = func(node, call string) {
		if strings.HasPrefix(call, "POST /engine/proxy /snapshot") {
			select {
			case tgt.lost <- lostErr:
			default:
			}
		}
	}
	start := time.Now()
	outs, err := Run(context.Background(), plan(t, "30s", diskBlock+"timeline:\n  - {at: 200ms, snapshot: {}}\n"),
		Options{Target: tgt, ResultsDir: t.TempDir(), Binary: "rig"})
	if !errors.Is(err, fusefs.ErrLost) || strings.Count(err.Error(), "disk model lost") != 1 {
		t.Fatalf("err %v; want the lost model, named once", err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the run went on %s after its disk model was lost (load 30 s)", took)
	}
	man := readManifest(t, outs[0].Dir)
	if man.Status != rundir.StatusFailed || !strings.Contains(man.Error, "disk model of node-1: disk model lost") {
		t.Errorf("manifest status %q error %q", man.Status, man.Error)
	}
	t.Logf("run error: %v", err)
}

// The model lets the kernel make the writes (passthrough) only where nothing the run asks needs
// the model to see them: no throughput, IOPS or per-MiB sync cap, and no power loss that drops
// unsynced writes (unsynced: keep only kills the engines). The choice reaches the target and the
// manifest.
func TestPassthroughOnlyWhereNoWriteMustBeSeen(t *testing.T) {
	parse := func(y string) *playbooks.Playbook {
		t.Helper()
		pb, err := playbooks.Parse("p.yaml", []byte(y), testDrivers)
		if err != nil {
			t.Fatal(err)
		}
		return pb
	}
	withDisk := func(disk string) string {
		return strings.Replace(powerLossYAML, "duration: 20s", "duration: 20s\ndisk: "+disk, 1)
	}
	noLoss := func(y string) string { return y[:strings.Index(y, "timeline:")] }
	for _, tc := range []struct {
		name, yaml string
		want       bool
	}{
		{"sync latency only", noLoss(withDisk("{sync_latency: 2ms}")), true},
		{"throughput cap", noLoss(withDisk("{throughput: 125MB/s, sync_latency: 2ms}")), false},
		{"iops cap", noLoss(withDisk("{iops: 3000}")), false},
		{"per-MiB sync", noLoss(withDisk("{sync_latency: 2ms, sync_per_mib: 1ms}")), false},
		{"power loss drops unsynced", withDisk("{sync_latency: 2ms}"), false},
		{"power loss keeps unsynced", strings.Replace(withDisk("{sync_latency: 2ms}"), "relaunch_after: 1s", "relaunch_after: 1s, unsynced: keep", 1), true},
	} {
		if got := passthroughFits(parse(tc.yaml)); got != tc.want {
			t.Errorf("%s: passthrough %v, want %v", tc.name, got, tc.want)
		}
	}

	c := targettest.NewCluster()
	tgt := &diskTarget{Target: &targettest.Target{Cluster: c}, probe: diskmodel.Achieved{ThroughputBps: 900e6, IOPS: 9000, SyncLatency: 4100 * time.Microsecond}}
	outs, err := Run(context.Background(), plan(t, "1s", "disk: {sync_latency: 4ms}\n"), Options{Target: tgt, ResultsDir: t.TempDir(), Binary: "rig", Analyze: analysis.AnalyzeRun})
	if err != nil {
		t.Fatal(err)
	}
	if len(tgt.opts) != 3 {
		t.Fatalf("ModelDisk called %d times, want once per server (3)", len(tgt.opts))
	}
	for i, o := range tgt.opts {
		if !o.Passthrough {
			t.Errorf("ModelDisk %d not asked for passthrough", i)
		}
	}
	models := readManifest(t, outs[0].Dir).DiskModels
	if len(models) != 3 {
		t.Fatalf("manifest disk_models %+v, want one per server", models)
	}
	for node, rec := range models {
		if !rec.Achieved.Passthrough {
			t.Errorf("%s: manifest does not say the model was passthrough: %+v", node, rec)
		}
	}
}
