package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/rundir"
)

// partitionFor is how long partitionPlaybook cuts the leader off.
const partitionFor = 5 * time.Second

// partitionPlaybook cuts the leader off for 5 s under a probe stream (its raft peer links and the
// client's link to it, all through the local target's linkproxy mesh), then heals it. The heal
// comes 9 s into the load; the 6 s after it are for the healed node's catch-up, and the 13 s
// after warm-up give 6,500 probes, above the test's 5,000.
const partitionPlaybook = `
name: partition-leader
cluster: {servers: 3, clients: 1}
engine: {sync_level: 1, heartbeat_timeout: 200ms, election_timeout: 200ms}
preload: {orders: 20k}
load: {probe_rate: 500/s}
warmup: 2s
duration: 15s
timeline:
  - {at: 4s, wait_for: {stable_leader: 2s}}
  - {at: 4s, partition: {node: leader, for: 5s}}
`

// A real 3-node local run partitions the leader for 5 s: another node is elected, and the client,
// which leaves the silent leader after its leader timeout (the engines' heartbeat timeout), is
// served by it after a gap bounded by the measured election, not by the partition; the healed
// node rejoins with the state hash of the others; the leader change is the partition's; every
// probe is answered and the ledger shows no acknowledged order lost.
func TestPartitionLeaderEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	t.Parallel() // its own addresses and folders: it may run beside the other end-to-end runs
	res := shortResults(t)
	out := runRigOK(t, "run", "--results", res, "--first-address", "127.0.81.11", writePlaybook(t, partitionPlaybook))
	dir := runDirOf(t, out)
	var s analysis.Summary
	readJSON(t, filepath.Join(dir, "summary.json"), &s)
	if s.Status != "ok" {
		t.Fatalf("status %q: %s %s", s.Status, s.StatusReason, s.Error)
	}
	hash := ""
	for n, st := range s.Nodes {
		if st.StateHash == "" || (hash != "" && st.StateHash != hash) || st.Phase != "ready" {
			t.Errorf("%s: state hash %q phase %q; nodes %v", n, st.StateHash, st.Phase, s.Nodes)
		}
		hash = st.StateHash
	}
	if len(s.Failovers) != 1 {
		t.Fatalf("failovers %+v, want the partition's one", s.Failovers)
	}
	f := s.Failovers[0]
	if f.Action != "partition" || f.To == "" || f.To == f.From || f.ElectMs == nil || f.ClientGapMs == nil {
		t.Fatalf("failover %+v: want the partitioned leader replaced and a first reply from the new one", f)
	}
	if len(s.UnplannedLeaderChanges) != 0 {
		t.Errorf("unplanned leader changes %+v", s.UnplannedLeaderChanges)
	}
	if s.Probes.N < 5000 || s.Probes.Lost != 0 {
		t.Errorf("probes %+v: want ≥5000 answered and none lost (what was in flight to the cut leader is resent)", s.Probes)
	}

	// The client's side: it left the silent leader on its leader timeout, the engines' heartbeat
	// timeout in effect, and never waited for its ping timer.
	var st rundir.ProbeStats
	readJSON(t, filepath.Join(dir, rundir.LoadgenDir, rundir.StatsFile), &st)
	lt := time.Duration(st.Conn.LeaderTimeoutNs)
	if lt != 200*time.Millisecond || st.Conn.LeaderTimeouts < 1 || st.Conn.PingTimeouts != 0 {
		t.Errorf("load generator: leader timeout %v (want the engines' heartbeat timeout, 200ms), %d leader timeouts, %d ping timeouts",
			lt, st.Conn.LeaderTimeouts, st.Conn.PingTimeouts)
	}
	// The gap is the election (fault to new leader) or the leader timeout, whichever ends later,
	// plus a redirect and a reply: within twice that, and that well under the partition.
	elect := time.Duration(*f.ElectMs * float64(time.Millisecond))
	gap := time.Duration(*f.ClientGapMs * float64(time.Millisecond))
	bound := 2 * max(elect, lt)
	t.Logf("partition of %s for %v: election %v, client gap %v (bound %v), leader timeout %v; load %s", f.From, partitionFor, elect, gap, bound, lt, loadNow())
	if bound >= partitionFor/2 {
		t.Errorf("election %v: the bound %v is not well under the %v partition", elect, bound, partitionFor)
	}
	if gap > bound {
		t.Errorf("client gap %v, over 2 × max(election %v, leader timeout %v) = %v: the client waited on the cut leader", gap, elect, lt, bound)
	}

	// The acknowledged-order ledger against what each server holds after the heal.
	d := s.Durability
	if d == nil {
		t.Fatal("no durability in summary.json")
	}
	if want := "partition of " + f.From + " for 5s"; d.Faults != want || d.Acked < s.Probes.N || d.Lost != 0 || d.Unchecked != 0 {
		t.Errorf("durability %+v: want faults %q, every answered probe acknowledged, none lost or unchecked", d, want)
	}
	for n, nd := range d.Nodes {
		if nd.Missing || nd.Lost != 0 {
			t.Errorf("%s (the partitioned node: %s) holds %+v of %d acknowledged: want every one it can say", n, f.From, nd, d.Acked)
		}
	}

	evs, _, err := rundir.ReadEvents(filepath.Join(dir, rundir.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	var cut, healed int
	for _, e := range evs {
		switch {
		case e.IsAction(actions.ActPartition) && e.Node == f.From:
			cut = actions.PartitionOf(e).Links
		case e.IsAction(actions.ActHeal) && e.Node == f.From:
			healed = actions.PartitionOf(e).Links
		}
	}
	// 3 servers, 1 client: the node's 2 raft links out, 2 in, and the client's link to it.
	if cut != 5 || healed != 5 {
		t.Errorf("links cut %d, healed %d; want 5 and 5", cut, healed)
	}
	rep, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	if !strings.Contains(string(rep), "| partition |") {
		t.Errorf("report.md has no partition row in its failover table")
	}
}
