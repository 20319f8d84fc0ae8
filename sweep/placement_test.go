package sweep

import (
	"strings"
	"testing"

	"github.com/rig-dev/rig/agent/facts"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/rundir"
)

// rig compare warns when the two sides ran in different placements: single-az against multi-az,
// or one node in another AZ. A node's AZ comes from the inventory, else from its agent's facts
// (instance metadata), so runs on stacks made before the inventory carried it are compared too.
func TestPlacementDifferences(t *testing.T) {
	run := func(placement string, zones ...string) *RunData {
		m := &rundir.Manifest{Target: "aws", CPUs: 2, ConfigHash: "abc", Rig: rundir.BuildInfo{Version: "dev"},
			Inventory: &inventory.Inventory{Target: "aws", Placement: placement}, Facts: map[string]facts.Facts{}}
		for i, z := range zones {
			n := inventory.Node{Name: []string{"node-0", "node-1", "node-2"}[i], Role: inventory.RoleServer}
			if placement != "" {
				n.AvailabilityZone = z
			} else {
				m.Facts[n.Name] = facts.Facts{Instance: &facts.Instance{AvailabilityZone: z}}
			}
			m.Inventory.Nodes = append(m.Inventory.Nodes, n)
		}
		return &RunData{Manifest: m}
	}
	single := run("single-az", "us-east-1a", "us-east-1a", "us-east-1a")
	multi := run("multi-az", "us-east-1a", "us-east-1b", "us-east-1c")
	moved := run("multi-az", "us-east-1a", "us-east-1b", "us-east-1d")
	placementLines := func(base, contender *RunData) []string {
		var out []string
		for _, l := range envDifferences([]*RunData{base}, []*RunData{contender}) {
			if strings.HasPrefix(l, "placement") {
				out = append(out, l)
			}
		}
		return out
	}
	if got := placementLines(single, multi); len(got) != 1 ||
		!strings.Contains(got[0], "placement differs: baseline single-az (node-0 us-east-1a, node-1 us-east-1a, node-2 us-east-1a), "+
			"contender multi-az (node-0 us-east-1a, node-1 us-east-1b, node-2 us-east-1c)") {
		t.Errorf("single against multi: %q", got)
	}
	if got := placementLines(multi, moved); len(got) != 1 || !strings.Contains(got[0], "node-2 us-east-1d") {
		t.Errorf("a node in another AZ: %q", got)
	}
	if got := placementLines(multi, run("multi-az", "us-east-1a", "us-east-1b", "us-east-1c")); len(got) != 0 {
		t.Errorf("same placement: %q", got)
	}
	// From the facts when the inventory has no placement: still told apart by AZ.
	if got := placementLines(run("", "us-east-1a", "us-east-1a", "us-east-1a"), run("", "us-east-1a", "us-east-1b", "us-east-1a")); len(got) != 1 ||
		!strings.Contains(got[0], "placement not recorded (node-0 us-east-1a, node-1 us-east-1b, node-2 us-east-1a)") {
		t.Errorf("from facts: %q", got)
	}
	// Local runs have no placement: nothing to warn about.
	local := &RunData{Manifest: &rundir.Manifest{Target: "local", CPUs: 2, ConfigHash: "abc",
		Inventory: &inventory.Inventory{Target: "local", Nodes: []inventory.Node{{Name: "node-0", Role: inventory.RoleServer}}}}}
	if got := placementLines(local, local); len(got) != 0 {
		t.Errorf("local runs: %q", got)
	}
}
