package aeroncluster_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/rundir"
)

// TestDutyCycleNamed ("an agent's stall is named from Aeron's duty-cycle counters"): a snapshot
// of a book of 1M resting orders holds the clustered service container in one duty cycle of
// seconds (the service writes the book) on every node; the harness's sampler reads the agents'
// max cycle time and threshold counters through the run into each node's pauses file, and the
// excursion over the snapshot is named duty_cycle from aeron_counters, the service container its
// agent. No JVM-wide pause is involved: the other agents keep cycling.
func TestDutyCycleNamed(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a three-node Aeron Cluster")
	}
	build(t)
	bin := rigBinary(t)
	pb := rewritePlaybook(t, "engine.yaml", map[string]string{
		"duration: 10s": "preload: {orders: 1M}\nduration: 8s\ntimeline:\n  - {at: 4s, snapshot: {}}\n",
	})
	dir, s := runOne(t, bin, pb, "127.0.19.157", 4*time.Minute)
	for _, node := range []string{"node-0", "node-1", "node-2"} {
		ss, err := rundir.Folder{Dir: dir}.Pauses(node)
		if err != nil {
			t.Errorf("%s's pauses file: %v", node, err)
			continue
		}
		agents := map[string]bool{}
		for _, sp := range ss {
			if sp.Kind == rundir.InsideDutyCycle && sp.Source == rundir.SourceAeronCounters {
				agents[sp.Thread] = true
				if sp.DurNs <= 0 || sp.Share <= 0 || sp.Share > 1 {
					t.Errorf("%s: span %+v: want a length and a share in (0, 1]", node, sp)
				}
			}
		}
		if !agents["service-container"] {
			t.Errorf("%s: duty-cycle spans of %v; want the service container's among them", node, agents)
		}
	}
	if len(s.Snapshots) != 1 || s.Excursions == nil {
		t.Fatalf("snapshots %+v, excursions %+v: want one snapshot and the excursions", s.Snapshots, s.Excursions)
	}
	snap := s.Snapshots[0]
	to := snap.WindowToS
	if snap.FinishedS != nil {
		to = *snap.FinishedS
	}
	named := 0
	for _, e := range s.Excursions.List {
		if e.EndS < snap.AtS || e.StartS > to {
			continue
		}
		for _, c := range e.Causes {
			// the longest span's detail, quoted in the evidence, names its agent first
			if c.Kind == analysis.CauseKind(rundir.InsideDutyCycle) && strings.HasPrefix(c.Evidence, rundir.SourceAeronCounters+":") &&
				strings.Contains(c.Evidence, "(service-container: a cycle of ") {
				named++
				t.Logf("excursion %.3f–%.3f s (peak %.1f ms, covered %.1f ms) over the snapshot at %.3f–%.3f s: %s on %s", e.StartS, e.EndS, e.PeakMs,
					e.CoveredMs, snap.AtS, to, c.Evidence, c.Node)
				break
			}
		}
	}
	if named == 0 {
		t.Errorf("no excursion over the snapshot at %.3f–%.3f s is named duty_cycle of the service container: %+v", snap.AtS, to, s.Excursions.List)
		rep, _ := os.ReadFile(filepath.Join(dir, rundir.ReportFile))
		t.Logf("report.md:\n%s", rep)
	}
}
