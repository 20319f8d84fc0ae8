package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/analysis"
)

// durabilityPlaybook: probes under load, then at 3 s the leader and a follower (a majority) lose
// power (unsynced: drop) or only their processes (keep), and come back 1 s later.
func durabilityPlaybook(sync int, unsynced string) string {
	return fmt.Sprintf(`
name: durability-s%d-%s
cluster: {servers: 3, clients: 1}
engine: {sync_level: %d}
disk: {sync_latency: 2ms}
preload: {orders: 2k}
load: {probe_rate: 200/s}
warmup: 1s
duration: 8s
timeline:
  - {at: 3s, power_loss: {nodes: leader+follower, relaunch_after: 1s, unsynced: %s}}
`, sync, unsynced, sync, unsynced)
}

// durabilityRun runs one durability playbook and returns its run folder, its summary's durability
// and the run's error output ("" when it ended ok).
func durabilityRun(t *testing.T, addr string, sync int, unsynced string) (string, *analysis.Durability, string) {
	t.Helper()
	res := shortResults(t)
	out, errOut, _ := rigRun(t, "run", "--results", res, "--first-address", addr, writePlaybook(t, durabilityPlaybook(sync, unsynced)))
	dir := onlyRunDir(t, res)
	var s analysis.Summary
	readJSON(t, filepath.Join(dir, "summary.json"), &s)
	if s.Durability == nil {
		t.Fatalf("sync %d, unsynced %s: no durability in summary.json:\n%s\n%s", sync, unsynced, out, errOut)
	}
	d := s.Durability
	t.Logf("sync %d, unsynced %s: status %s, acked %d, lost %d, unchecked %d (%s); load %s", sync, unsynced, s.Status, d.Acked, d.Lost, d.Unchecked, d.Faults, loadNow())
	if left := fuseMountsUnder(t, res); len(left) != 0 {
		t.Errorf("FUSE mounts left after the run: %v", left)
	}
	assertNoProcessesUnder(t, res)
	if s.Status == "ok" {
		errOut = ""
	}
	return dir, d, errOut
}

func loadNow() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// At sync level 1 and 2 every acknowledged order was synced before it was acknowledged: a power
// loss of a majority loses none, every server holds every one, and the run ends ok.
func TestDurabilityPowerLossSynced(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("end-to-end runs as root (FUSE disk models)")
	}
	t.Parallel() // its own addresses and folders: it may run beside the other end-to-end runs
	for i, sync := range []int{1, 2} {
		dir, d, errOut := durabilityRun(t, fmt.Sprintf("127.0.%d.11", 47+i), sync, "drop")
		if errOut != "" {
			t.Errorf("sync %d: the run failed after a power loss it should survive:\n%s", sync, errOut)
			continue
		}
		if d.Acked < 1000 || d.Lost != 0 || d.Unchecked != 0 || !strings.Contains(d.Faults, "power loss of") {
			t.Errorf("sync %d: durability %+v; want ≥1000 acknowledged, none lost or unchecked, after a power loss", sync, d)
		}
		for n, nd := range d.Nodes {
			if nd.Missing || nd.Held != d.Acked {
				t.Errorf("sync %d: %s holds %+v of %d acknowledged", sync, n, nd, d.Acked)
			}
		}
		wantInReport(t, dir, "## Durability", fmt.Sprintf("| %d | %d | 0 | 0 |", sync, d.Acked))
	}
}

// At sync level 0 nothing is ever synced, so a power loss of a majority takes every write of
// theirs: the reference engine's stable store is then empty (it was renamed into place but its
// bytes never synced) and it refuses to start, so the two never come back and every acknowledged
// order is held by one server of three: lost, the report's first lines say so. The same kill of
// the same servers with the page cache kept (unsynced: keep) loses none.
func TestDurabilityPowerLossUnsynced(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("end-to-end runs as root (FUSE disk models)")
	}
	t.Parallel() // its own addresses and folders: it may run beside the other end-to-end runs
	dir, d, errOut := durabilityRun(t, "127.0.49.11", 0, "drop")
	if d.Acked == 0 || d.Lost == 0 {
		t.Errorf("sync 0 power loss: durability %+v; want acknowledged orders lost", d)
	}
	if errOut == "" || !strings.Contains(errOut, "stable store") {
		t.Errorf("sync 0 power loss: run error %q; want the relaunched engines refusing their emptied stable store", errOut)
	}
	wantInReport(t, dir, fmt.Sprintf("**Acknowledged orders lost: %d of %d**", d.Lost, d.Acked))

	dir, d, errOut = durabilityRun(t, "127.0.50.11", 0, "keep")
	if errOut != "" {
		t.Fatalf("sync 0 kill -9 of a majority: the run failed:\n%s", errOut)
	}
	if d.Acked < 1000 || d.Lost != 0 || !strings.Contains(d.Faults, "kill -KILL of") {
		t.Errorf("sync 0 kill -9: durability %+v; want ≥1000 acknowledged, none lost", d)
	}
	wantInReport(t, dir, fmt.Sprintf("| 0 | %d | 0 | 0 |", d.Acked))
}

func wantInReport(t *testing.T, dir string, wants ...string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range wants {
		if !strings.Contains(string(b), w) {
			t.Errorf("report.md lacks %q:\n%s", w, b)
		}
	}
}
