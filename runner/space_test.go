package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rig-dev/rig/engine/driver/reference"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/target/targettest"
)

// The estimate, worked by hand from the formats: 2 preload batches of 32,768 orders (each one
// log entry of 13 + 31 B/order of data and 50 B of record), 200 probes of 40 + 50 B, 4 snapshot
// markers of at most 9 + 50 B, raft's own 4 KiB, and 3 snapshot files at once (two kept, one
// being written) of 64 + 32 batches × (16 + 2,048 × 32) + 32 B.
func TestEstimateWrites(t *testing.T) {
	pb := plan(t, "2s", "timeline:\n"+strings.Repeat("  - {at: 100ms, snapshot: {}}\n", 4)).Runs[0].Playbook
	pb.Preload.Orders = 65536
	w := (reference.Driver{}).EstimateWrites(workload(pb, 1, false))
	const snap = 64 + 32*(16+2048*32) + 32
	const log = 2*(13+31*32768+50) + 200*90 + 4*59 + 4096
	if w.SnapshotBytes != snap || w.Snapshots != 3 || w.LogBytes != log || w.Total() != 3*snap+log {
		t.Fatalf("estimate %+v (total %d); want snapshot %d × 3 + log %d", w, w.Total(), snap, log)
	}
	// A stored book is one snapshot file and no preload through the log.
	pb.Timeline = pb.Timeline[:1]
	if w := (reference.Driver{}).EstimateWrites(workload(pb, 1, true)); w.Snapshots != 2 || w.LogBytes != 200*90+59+4096 {
		t.Fatalf("with an installed book: %+v", w)
	}
}

// A run whose engines' data would not fit is refused before any engine starts, naming the
// servers, the path, the free bytes and the estimate's parts.
func TestSpaceRefusedBeforeEngines(t *testing.T) {
	c := targettest.NewCluster()
	c.FreeBytes = 100 << 10
	res := runFake(t, context.Background(), &targettest.Target{Cluster: c}, plan(t, "2s", "timeline:\n  - {at: 100ms, snapshot: {}}\n"))
	if !errors.Is(res.err, ErrDiskSpace) {
		t.Fatalf("err %v; want ErrDiskSpace", res.err)
	}
	// Per server: a 32,112 B snapshot, and 4,096 + 31,063 (one preload batch) + 200 × 90
	// (probes) + 59 (the marker) = 53,218 B of log; 3 × 85,330 B = 250.0 KiB.
	for _, want := range []string{"node-0, node-1, node-2 (one filesystem): data/", "has 100.0 KiB free; this run writes about 250.0 KiB there",
		"(3 servers × (1,000 orders × 32.1 B/order × 1 snapshot at once + ~52.0 KiB of raft log))"} {
		if !strings.Contains(res.err.Error(), want) || !strings.Contains(res.man.Error, want) {
			t.Errorf("error %q lacks %q", res.err, want)
		}
	}
	if c.Called("node-0 POST /engine/start") || c.Called("node-0 POST /engine/proxy") {
		t.Errorf("an engine was started although the run was refused: %v", c.Calls())
	}
	d := res.man.DataSpace["node-1"]
	if d.FreeBytes != 100<<10 || d.WritesBytes == 0 || d.SharedWith != 3 {
		t.Errorf("manifest data_space of node-1: %+v", d)
	}
}

// A run that records keeps each take of a Go engine's flight recorder on the agents' disk: up
// to 128 MiB a take, one after each timeline action and one at the end, counted with the data
// when they share a filesystem (the local target) and refused when they do not fit.
func TestSpaceCountsRecordings(t *testing.T) {
	c := targettest.NewCluster()
	c.FreeBytes = 512 << 20 // the data fit; 3 servers × 2 takes × 128 MiB = 768 MiB more do not
	pb, err := playbooks.Parse("fake.yaml", []byte(strings.Replace(fmt.Sprintf(basePlaybook, "2s"),
		"engine: {sync_level: 1}", "engine: {sync_level: 1, recording: \"on\"}", 1)+"timeline:\n  - {at: 100ms, snapshot: {}}\n"), testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := pb.Plan()
	if err != nil {
		t.Fatal(err)
	}
	res := runFake(t, context.Background(), &targettest.Target{Cluster: c}, pl)
	if !errors.Is(res.err, ErrDiskSpace) {
		t.Fatalf("err %v; want ErrDiskSpace", res.err)
	}
	want := "+ 3 servers × (up to 256.0 MiB of engine recording: 2 takes × 128.0 MiB, a flight recorder's most (engine.recording: on))"
	if !strings.Contains(res.err.Error(), want) || !strings.Contains(res.err.Error(), "has 512.0 MiB free; this run writes about 768.2 MiB there") {
		t.Errorf("error %q lacks %q", res.err, want)
	}
	if c.Called("node-0 POST /engine/start") {
		t.Errorf("an engine was started although the run was refused: %v", c.Calls())
	}
}
