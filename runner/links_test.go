package runner

import (
	"os"
	"strings"
	"testing"

	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/target/local"
	"github.com/rig-dev/rig/target/targettest"
)

const partitionYAML = `
name: p
cluster: {servers: 3, clients: 1}
load: {probe_rate: 100/s}
duration: 20s
timeline:
  - {at: 4s, partition: {node: leader, for: 5s}}
`

func planOf(t *testing.T, body string) *playbooks.Plan {
	t.Helper()
	pb, err := playbooks.Parse("p.yaml", []byte(body), testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pb.Plan()
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// A partition needs a target that routes links: the local target is one, a target without
// proxies (the fake here, as the SSH target) is refused before anything starts, naming the entry.
func TestCheckTargetPartition(t *testing.T) {
	plan := planOf(t, partitionYAML)
	if err := CheckTarget(plan, local.New(local.Options{})); err != nil {
		t.Errorf("local target refused: %v", err)
	}
	err := CheckTarget(plan, &targettest.Target{})
	if err == nil || !strings.Contains(err.Error(), "timeline[0] partitions a server") || !strings.Contains(err.Error(), "local target") {
		t.Errorf("fake target: %v; want a refusal naming timeline[0] and the local target", err)
	}
	_, err = Run(t.Context(), plan, Options{Target: &targettest.Target{}, ResultsDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "cannot cut or delay links") {
		t.Errorf("Run on the fake target: %v; want the refusal", err)
	}
	// UDP bursts do not go through TCP proxies.
	burst := planOf(t, partitionYAML+"  - {at: 12s, burst: {messages: 100, every: 1s, count: 1}}\n")
	if err := CheckTarget(burst, local.New(local.Options{})); err == nil || !strings.Contains(err.Error(), "timeline[1] burst") {
		t.Errorf("partition + burst: %v; want timeline[1] refused", err)
	}
}

// A placement in zones needs a target that routes links as a partition does: the SSH target
// (the fake here) is refused before anything starts, naming the placement; so is a UDP burst.
func TestCheckTargetPlacement(t *testing.T) {
	const zonesYAML = `
name: z
cluster: {servers: 3, clients: 1}
load: {probe_rate: 100/s}
duration: 20s
placement: {zones: {a: [node-0, client-0], b: [node-1], c: [node-2]}, between_zones: {delay: 1ms}}
`
	plan := planOf(t, zonesYAML)
	if err := CheckTarget(plan, local.New(local.Options{})); err != nil {
		t.Errorf("local target refused: %v", err)
	}
	res := t.TempDir()
	_, err := Run(t.Context(), plan, Options{Target: &targettest.Target{}, ResultsDir: res})
	if err == nil || !strings.Contains(err.Error(), "placement: puts the nodes in zones") || !strings.Contains(err.Error(), "cannot cut or delay links") {
		t.Errorf("Run on the fake target: %v; want the refusal naming the placement", err)
	}
	if ents, _ := os.ReadDir(res); len(ents) != 0 {
		t.Errorf("the refused run made %d entries in the results folder", len(ents))
	}
	burst := planOf(t, zonesYAML+"timeline:\n  - {at: 2s, burst: {messages: 100}}\n")
	if err := CheckTarget(burst, local.New(local.Options{})); err == nil || !strings.Contains(err.Error(), "p.yaml:8:5: timeline[0] burst (run 1): a run with placement") {
		t.Errorf("placement + burst: %v; want timeline[0] refused at its place in the file", err)
	}
}

// The playbook's own rules: for is required and the heal must fall inside the run.
func TestPartitionPlaybookRules(t *testing.T) {
	for _, c := range []struct{ entry, want string }{
		{"{at: 4s, partition: {node: leader}}", "for: missing"},
		{"{at: 4s, partition: {for: 5s}}", "node: missing"},
		{"{at: 4s, partition: {node: leader, for: 30s}}", "at or after the end of the run"},
		{"{at: 4s, partition: {node: node-7, for: 5s}}", "does not exist"},
	} {
		body := strings.Replace(partitionYAML, "{at: 4s, partition: {node: leader, for: 5s}}", c.entry, 1)
		_, err := playbooks.Parse("p.yaml", []byte(body), testDrivers)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "p.yaml:") {
			t.Errorf("%s: %v; want p.yaml:line:col and %q", c.entry, err, c.want)
		}
	}
}
