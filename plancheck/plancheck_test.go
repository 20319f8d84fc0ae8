package plancheck

import (
	"strings"
	"testing"

	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/runner"
)

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

const base = `name: p
cluster: {servers: 3, clients: 1}
load: {probe_rate: 100/s}
duration: 10s
`

// A run whose book does not fit is a problem at the matrix value that asks for it, naming the
// run; a run that fits is none.
func TestMemoryPlacesTheProblem(t *testing.T) {
	plan := planOf(t, base+"preload: {orders: 1k}\nmatrix: {preload.orders: [1k, 100M]}\n")
	oneGiB := func(servers int) []runner.MemoryHost {
		return []runner.MemoryHost{{Servers: []string{"node-0", "node-1", "node-2"}[:servers], AvailableBytes: 1 << 30, Source: "a test host"}}
	}
	probs, checked := Memory(plan, oneGiB)
	if !checked || len(probs) != 1 {
		t.Fatalf("checked %v, problems %v; want one", checked, probs)
	}
	p := probs[0]
	if p.Path != "matrix.preload.orders[1]" || p.Pos.Line == 0 || !strings.Contains(p.Msg, "in the run with preload.orders=100M") {
		t.Errorf("problem %+v", p)
	}
}

// A disk.volume the stack's config does not name is refused at its value; the local target has
// none to give; with no stack config it is only a note.
func TestVolumesPlacesTheProblem(t *testing.T) {
	plan := planOf(t, base+"disk: {volume: logs}\n")
	if probs, _ := Volumes(t.Context(), plan, &VolumeSource{Names: []string{"data"}, Where: "Pulumi.dev.yaml"}); len(probs) != 1 || probs[0].Path != "disk.volume" || !strings.Contains(probs[0].Msg, "data") {
		t.Errorf("a volume the stack lacks: %v", probs)
	}
	if probs, _ := Volumes(t.Context(), plan, &VolumeSource{Names: []string{"logs"}, Where: "Pulumi.dev.yaml"}); len(probs) != 0 {
		t.Errorf("a volume the stack has: %v", probs)
	}
	if probs, _ := Volumes(t.Context(), plan, nil); len(probs) != 1 {
		t.Errorf("the local target: %v; want a refusal", probs)
	}
	if probs, note := Volumes(t.Context(), plan, &VolumeSource{}); len(probs) != 0 || !strings.Contains(note, "not checked") {
		t.Errorf("no stack config: %v, note %q", probs, note)
	}
}
