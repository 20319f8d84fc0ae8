package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/rundir"
)

// diskPlaybook is a short run with every server's data on a disk model (docs/disks.md): modest
// figures, so this machine's disk delivers them (the probe's floor is 80 %).
const diskPlaybook = `
name: disk-short
cluster: {servers: 3, clients: 1}
engine: {sync_level: 2}
disk: {throughput: 40MB/s, sync_latency: 2ms}
preload: {orders: 2k}
load: {probe_rate: 200/s}
warmup: 1s
duration: 5s
timeline:
  - {at: 2s, snapshot: {}}
`

// A run with a disk: block mounts a model under every server's data while it lasts, records
// asked beside achieved in the manifest, and leaves no FUSE mount behind.
func TestDiskModelEndToEnd(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("end-to-end run as root (it mounts FUSE)")
	}
	t.Parallel() // its own addresses and folders: it may run beside the other end-to-end runs
	res := shortResults(t)
	cmd, stdout, stderr := startRun(t, "--results", res, "--first-address", "127.0.45.11", writePlaybook(t, diskPlaybook))
	waitFor(t, "load start", stderr, 90*time.Second)
	dir := onlyRunDir(t, res)
	during := fuseMountsUnder(t, res)
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		mp := filepath.Join(dir, n, "disk")
		if during[mp] != "fuse.rigdisk" {
			t.Errorf("during the run, %s is not a disk model mount: mounts under the results %v", mp, during)
		}
	}
	if err := cmd.Wait(); err != nil {
		dumpLogs(t, stdout.String())
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if left := fuseMountsUnder(t, res); len(left) != 0 {
		t.Errorf("FUSE mounts left after the run: %v", left)
	}

	var m rundir.Manifest
	readJSON(t, filepath.Join(dir, "manifest.json"), &m)
	asked := diskmodel.Limits{Throughput: 40e6, SyncLatency: 2 * time.Millisecond}
	if len(m.DiskModels) != 3 {
		t.Fatalf("manifest disk_models %+v: want one per server", m.DiskModels)
	}
	for n, r := range m.DiskModels {
		if r.Asked != asked {
			t.Errorf("%s: asked %+v recorded, want %+v", n, r.Asked, asked)
		}
		if err := diskmodel.Check(asked, r.Achieved, 0.8); err != nil {
			t.Errorf("%s: achieved %+v recorded for a run that went ahead: %v", n, r.Achieved, err)
		}
		if r.Achieved.SyncLatency < asked.SyncLatency {
			t.Errorf("%s: achieved sync %v beats the model's floor %v: the probe did not go through the model", n, r.Achieved.SyncLatency, asked.SyncLatency)
		}
		if len(r.LoadAvg) != 3 {
			t.Errorf("%s: load average %v not recorded with the probe", n, r.LoadAvg)
		}
		t.Logf("%s: asked %v, achieved %.1f MB/s, sync %v, load %v", n, r.Asked, r.Achieved.ThroughputBps/1e6, r.Achieved.SyncLatency, r.LoadAvg)
	}
	// The engines wrote through the model into the backing folder, which outlives the mount.
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		if ents, err := os.ReadDir(filepath.Join(dir, n, "disk.backing")); err != nil || len(ents) == 0 {
			t.Errorf("%s: backing folder %v, %v: nothing written through the model", n, ents, err)
		}
	}
	// Every fsync through the models is recorded per node, and the report counts the snapshot's.
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		ss, err := rundir.ReadDiskSyncs(filepath.Join(dir, n, rundir.DiskSyncsFile))
		if err != nil || len(ss) == 0 {
			t.Errorf("%s: %d disk syncs recorded, %v: want the engine's (sync level 2)", n, len(ss), err)
		}
	}
	var sum analysis.Summary
	readJSON(t, filepath.Join(dir, rundir.SummaryFile), &sum)
	if sum.Forces == nil || len(sum.Forces.Nodes) != 3 || len(sum.Forces.Snapshots) == 0 {
		t.Errorf("summary forces %+v: want every server's, and the snapshot's windows", sum.Forces)
	} else {
		for _, r := range sum.Forces.Snapshots {
			t.Logf("snapshot %d on %s: take %v ms, persisted %v ms, %d forces, %d bytes, %.1f ms forced; files %+v", r.Snapshot, r.Node, r.TakeMs, r.PersistedMs, r.Syncs, r.Bytes, r.TimeMs, r.Files)
		}
		for n, nf := range sum.Forces.Nodes {
			if nf.Load.Syncs == 0 {
				t.Errorf("%s: no force over the load at sync level 2", n)
			}
		}
	}
	noTmpFiles(t, res)
	assertNoProcessesUnder(t, res)
}

// fuseMountsUnder maps each mount point under dir in /proc/self/mountinfo to its type.
func fuseMountsUnder(t *testing.T, dir string) map[string]string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint options [optional...] - type source super
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasPrefix(f[4], dir+"/") {
			continue
		}
		typ := "?"
		for i, x := range f {
			if x == "-" && i+1 < len(f) {
				typ = f[i+1]
			}
		}
		got[f[4]] = typ
	}
	return got
}
