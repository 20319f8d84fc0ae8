package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/rundir"
)

// partitionPlaybook cuts the leader off for 5 s under a probe stream (its raft peer links and the
// client's link to it, all through the local target's linkproxy mesh), then heals it.
const partitionPlaybook = `
name: partition-leader
cluster: {servers: 3, clients: 1}
engine: {sync_level: 1, heartbeat_timeout: 200ms, election_timeout: 200ms}
preload: {orders: 20k}
load: {probe_rate: 500/s}
warmup: 2s
duration: 25s
timeline:
  - {at: 4s, wait_for: {stable_leader: 2s}}
  - {at: 4s, partition: {node: leader, for: 5s}}
`

// A real 3-node local run partitions the leader for 5 s: another node is elected, clients are
// served by it, the healed node rejoins with the state hash of the others, and the leader
// change is the partition's, not an unplanned one.
func TestPartitionLeaderEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	t.Parallel() // its own addresses and folders: it may run beside the other end-to-end runs
	res := shortResults(t)
	out := runRigOK(t, "run", "--results", res, "--first-address", "127.0.63.11", writePlaybook(t, partitionPlaybook))
	dir := runDirOf(t, out)
	var s struct {
		summary
		Failovers []struct {
			Action, From, To string
			ElectMs          *float64 `json:"elect_ms"`
			ClientGapMs      *float64 `json:"client_gap_ms"`
		} `json:"failovers"`
		Unplanned []struct{ Node string } `json:"unplanned_leader_changes"`
	}
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
		t.Errorf("failover %+v: want the partitioned leader replaced and a first reply from the new one", f)
	}
	if len(s.Unplanned) != 0 {
		t.Errorf("unplanned leader changes %+v", s.Unplanned)
	}
	if s.Probes.N < 5000 {
		t.Errorf("probes %+v: want ≥5000 answered", s.Probes)
	}
	evs, _, err := rundir.ReadEvents(filepath.Join(dir, rundir.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	var cut, healed int
	for _, e := range evs {
		switch {
		case e.IsAction(rundir.ActPartition) && e.Node == f.From:
			cut = e.Action.Partition.Links
		case e.IsAction(rundir.ActHeal) && e.Node == f.From:
			healed = e.Action.Partition.Links
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
