package analysis

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// The disk model's fsyncs are counted per snapshot window (action to the node's report), beside
// the take and persisted time, and per node over the load split into those windows and the rest.
func TestForcesPerSnapshotWindow(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(100, "warmup_end")
	f.action(1000, "snapshot", "node-0", map[string]any{"leader": "node-0", "index": 7})
	f.snap(1300, "node-0", 7, 120, map[string]any{"persisted_ms": 250,
		"engine_writes": map[string]any{"source": "aeron archive recorder counters", "bytes": 2<<20 + 300, "time_ms": 13.5, "max_ms": 9}})
	f.snap(1500, "node-1", 7, 130, map[string]any{"persisted_ms": 400})
	f.run(3000, "load_end")
	f.status("node-0", engine.Status{})
	f.status("node-1", engine.Status{})
	ps := []rundir.Probe{}
	for ms := int64(0); ms < 3000; ms += 50 {
		ps = append(ps, rundir.Probe{IntendedNs: at(ms).UnixNano(), LatencyNs: 2_000_000, Outcome: rundir.ProbeOK})
	}
	f.probes(ps)
	write := func(node string, ss ...rundir.DiskSync) {
		w, err := rundir.CreateDiskSyncs(filepath.Join(f.dir, node, rundir.DiskSyncsFile))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ss {
			w.Write(s)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	ds := func(ms int64, file string, bytes int64) rundir.DiskSync {
		return rundir.DiskSync{AtNs: at(ms).UnixNano(), File: file, Bytes: bytes, DurNs: 4_000_000}
	}
	write("node-0",
		ds(-500, "log", 100), // before the load: not counted
		ds(500, "log", 100), ds(1100, "snap/0.bin", 1<<20), ds(1200, "snap/0.bin", 1<<20), ds(1250, "log", 100),
		ds(1400, "log", 100), ds(2000, "log", 100), ds(2500, "other", 10))
	write("node-1", ds(1499, "snap/0.bin", 1<<20), ds(1501, "log", 1))
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	fo := s.Forces
	if fo == nil || len(fo.Snapshots) != 2 {
		t.Fatalf("forces %+v, want two snapshot rows", fo)
	}
	byNode := map[string]SnapshotForces{}
	for _, r := range fo.Snapshots {
		byNode[r.Node] = r
	}
	n0, n1 := byNode["node-0"], byNode["node-1"]
	if n0.Syncs != 3 || n0.Bytes != 2<<20+100 || n0.TimeMs != 12 || n0.TakeMs != 120 || n0.PersistedMs != 250 || n0.FromS != 1 || n0.ToS != 1.3 {
		t.Errorf("node-0 snapshot forces %+v, want 3 forces, 2 MiB + 100 B, 12 ms, take 120, persisted 250, window [1, 1.3]", n0)
	}
	if len(n0.Files) != 2 || n0.Files[0].File != "snap/0.bin" || n0.Files[0].Syncs != 2 {
		t.Errorf("node-0 snapshot files %+v, want snap/0.bin (2 forces) first", n0.Files)
	}
	if n1.Syncs != 1 || n1.Bytes != 1<<20 || n1.Snapshot != 1 {
		t.Errorf("node-1 snapshot forces %+v, want 1 force of 1 MiB in snapshot 1", n1)
	}
	nf := fo.Nodes["node-0"]
	if nf.Load.Syncs != 7 || nf.InSnapshots.Syncs != 3 || nf.Rest.Syncs != 4 || nf.RestFiles[0].File != "log" || nf.RestFiles[0].Syncs != 3 {
		t.Errorf("node-0 over the load %+v, want 7 = 3 in the snapshot + 4 (log 3)", nf)
	}
	if n0.Engine == nil || n0.Engine.Bytes != 2<<20+300 || n0.Engine.TimeMs != 13.5 || n1.Engine != nil {
		t.Errorf("engine's own writes node-0 %+v node-1 %+v, want node-0's as reported and none for node-1", n0.Engine, n1.Engine)
	}
	rep := renderReport(s)
	if !strings.Contains(rep, "## Disk forces") || !strings.Contains(rep, "snap/0.bin (2, 2.0 MiB)") {
		t.Errorf("report lacks the forces section:\n%s", rep)
	}
	// The engine's own count sits in the same row as the model's, and its source is named.
	if !strings.Contains(rep, "| 2.0 MiB, 13.5 ms (9.00 ms) |") || !strings.Contains(rep, "(aeron archive recorder counters)") {
		t.Errorf("report lacks the engine's own writes beside the model's forces:\n%s", rep)
	}
}

// Without a disk model's records there is no forces figure and no section.
func TestNoForcesWithoutDiskSyncs(t *testing.T) {
	s, err := Analyze(followerRestartRun(t))
	if err != nil {
		t.Fatal(err)
	}
	if s.Forces != nil || strings.Contains(renderReport(s), "Disk forces") {
		t.Errorf("forces %+v without any disk syncs file", s.Forces)
	}
}
