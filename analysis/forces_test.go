package analysis

import (
	"math"
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
	write := func(node string, ss ...rundir.DiskSync) { writeDiskSyncs(t, f.dir, node, ss...) }
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

// The engine's own record of its forces (inside.ndjson, JFR) is set beside the disk model's in
// each snapshot window, on the snapshot's file (the new file forced most there), with the share
// of persisted − take its forces took; a snapshot whose file was only written (sync level 0)
// shows the file with no forces.
func TestInsideForcesBesideModel(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(100, "warmup_end")
	f.action(1000, "snapshot", "node-0", map[string]any{"leader": "node-0", "index": 7})
	f.snap(1300, "node-0", 7, 100, map[string]any{"persisted_ms": 250})
	f.snap(1310, "node-1", 7, 100, map[string]any{"persisted_ms": 120})
	f.run(3000, "load_end")
	f.status("node-0", engine.Status{})
	f.status("node-1", engine.Status{})
	ps := []rundir.Probe{}
	for ms := int64(0); ms < 3000; ms += 50 {
		ps = append(ps, rundir.Probe{IntendedNs: at(ms).UnixNano(), LatencyNs: 2_000_000, Outcome: rundir.ProbeOK})
	}
	f.probes(ps)
	w, err := rundir.CreateDiskSyncs(filepath.Join(f.dir, "node-0", rundir.DiskSyncsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		ms   int64
		file string
	}{{500, "node-0/rig/r/archive/0-0.rec"}, {1050, "node-0/rig/r/archive/0-0.rec"}, {1110, "node-0/rig/r/archive/3-0.rec"},
		{1150, "node-0/rig/r/archive/3-0.rec"}, {1200, "node-0/rig/r/archive/3-0.rec"}} {
		w.Write(rundir.DiskSync{AtNs: at(x.ms).UnixNano(), File: x.file, Bytes: 1 << 20, DurNs: 40_000_000})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	inside := func(node string, spans ...rundir.InsideSpan) {
		iw, err := rundir.CreateInside(filepath.Join(f.dir, node, rundir.InsideFile))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range spans {
			iw.Write(s)
		}
		if err := iw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	sp := func(ms int64, kind rundir.InsideKind, file string) rundir.InsideSpan {
		return rundir.InsideSpan{AtNs: at(ms).UnixNano(), DurNs: 40_000_000, Kind: kind, Source: "jfr", File: file, Role: rundir.RoleArchiveSegment}
	}
	inside("node-0", sp(500, rundir.InsideForce, "archive/0-0.rec"), sp(1050, rundir.InsideForce, "archive/0-0.rec"),
		sp(1100, rundir.InsideWrite, "archive/3-0.rec"), sp(1110, rundir.InsideForce, "archive/3-0.rec"),
		sp(1150, rundir.InsideForce, "archive/3-0.rec"), sp(1200, rundir.InsideForce, "archive/3-0.rec"),
		sp(1230, rundir.InsideWrite, "archive/3-0.rec"), // overlaps the force before it by 10 ms
		rundir.InsideSpan{AtNs: at(1120).UnixNano(), DurNs: 5_000_000, Kind: rundir.InsideGCPause, Source: "jfr"})
	// node-1 at sync level 0: its snapshot's file is written, never forced.
	inside("node-1", sp(600, rundir.InsideWrite, "archive/0-0.rec"), sp(1100, rundir.InsideWrite, "archive/4-0.rec"),
		sp(1120, rundir.InsideWrite, "archive/4-0.rec"), sp(1130, rundir.InsideWrite, "archive/0-0.rec"))
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	if s.Forces == nil || len(s.Forces.Snapshots) != 2 {
		t.Fatalf("forces %+v, want a row per node", s.Forces)
	}
	rows := map[string]SnapshotForces{}
	for _, r := range s.Forces.Snapshots {
		rows[r.Node] = r
	}
	n0 := rows["node-0"]
	if n0.SnapFile != "3-0.rec" || n0.SnapModel == nil || n0.SnapModel.Syncs != 3 || n0.Inside == nil ||
		n0.Inside.Snap.Syncs != 3 || n0.Inside.All.Syncs != 4 || n0.Inside.Snap.TimeMs != 120 {
		t.Errorf("node-0: %+v inside %+v, want 3-0.rec forced 3 times by both, 4 JFR forces in the window", n0, n0.Inside)
	}
	// The step: the file's first write at 1100 ms + take 100 = 1200 to + persisted 250 = 1350;
	// the force at 1200 (40 ms) lies in it, and the write at 1230 (40 ms), which together cover
	// 1200–1270: 70 ms, not 80.
	if st := n0.Inside.Step; st == nil || st.StepMs != 150 || st.Forces.Syncs != 1 || st.Forces.TimeMs != 40 ||
		math.Abs(st.Share-40.0/150) > 1e-9 || len(st.Files) != 1 || st.Files[0].File != "3-0.rec" || st.FromS != 1.2 || st.ToS != 1.35 ||
		st.Writes.Count != 1 || st.Writes.TimeMs != 40 || math.Abs(st.IOShare-70.0/150) > 1e-9 {
		t.Errorf("node-0 step %+v, want 1.2–1.35 s, one force of 3-0.rec (40 ms of 150) and one write, 70 ms of 150 under either", st)
	}
	n1 := rows["node-1"]
	if n1.SnapFile != "4-0.rec" || n1.SnapModel != nil || n1.Inside == nil || n1.Inside.Snap.Syncs != 0 || n1.Inside.All.Syncs != 0 {
		t.Errorf("node-1: %+v inside %+v, want 4-0.rec written and never forced", n1, n1.Inside)
	}
	rep := renderReport(s)
	if strings.Contains(rep, "| 1 | node-1 | 1.0 s") {
		t.Errorf("the disk model's table has a row for node-1, which ran on no model:\n%s", rep)
	}
	for _, want := range []string{"Forces the engine recorded itself (jfr)", "| 1 | node-0 | 3-0.rec | 3, 120 ms | 3 | 120 ms | 4, 160 ms | 150 ms | 1, 40.0 ms | 27 % | 1, 40.0 ms | 47 % | 3-0.rec (1, 40.0 ms) |",
		"| 1 | node-1 | 4-0.rec | — | 0 | 0 µs | 0, 0 µs | 20.0 ms | 0, 0 µs | 0 % | 0, 0 µs | 0 % | — |"} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
}

// writeDiskSyncs writes node's disk model fsync record (rundir.DiskSyncsFile) of ss.
func writeDiskSyncs(t *testing.T, dir, node string, ss ...rundir.DiskSync) {
	t.Helper()
	w, err := rundir.CreateDiskSyncs(filepath.Join(dir, node, rundir.DiskSyncsFile))
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
