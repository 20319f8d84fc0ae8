package playbooks

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/linkproxy"
)

const zones3 = "placement: {zones: {a: [node-0, client-0], b: [node-1], c: [node-2]}, between_zones: {delay: 1ms, jitter: 100us}}\n"

func TestPlacementBlock(t *testing.T) {
	p := mustParse(t, base+zones3)
	want := linkproxy.Placement{Zones: map[string][]string{"a": {"node-0", "client-0"}, "b": {"node-1"}, "c": {"node-2"}},
		Between: linkproxy.Shape{Delay: time.Millisecond, Jitter: 100 * time.Microsecond}}
	if p.Placement.Between != want.Between || len(p.Placement.Zones) != 3 || strings.Join(p.Placement.Zones["a"], ",") != "node-0,client-0" {
		t.Fatalf("placement = %+v, want %+v", p.Placement, want)
	}
	if err := p.Placement.Validate(); err != nil {
		t.Fatalf("the mesh refuses the parsed placement: %v", err)
	}
	if p := mustParse(t, base); !p.Placement.IsZero() {
		t.Fatalf("no placement: block gave %+v", p.Placement)
	}
	block := mustParse(t, base+"placement:\n  zones:\n    a: [node-0, client-0]\n    b:\n      - node-1\n      - node-2\n")
	if got := block.Placement.Zones["b"]; len(got) != 2 || block.Placement.Between != (linkproxy.Shape{}) {
		t.Fatalf("block style: %+v", block.Placement)
	}
	pl, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	pl.Print(&out)
	if !strings.Contains(out.String(), "zones a: node-0, client-0; b: node-1; c: node-2; 1ms ± 100µs each way between zones") {
		t.Errorf("plan has no placement line:\n%s", out.String())
	}
}

// Every placement problem is reported where it stands, saying what would be valid.
func TestPlacementProblemsSayWhere(t *testing.T) {
	for _, c := range []struct{ name, src, at, msg string }{
		{"not a node", "placement: {zones: {a: [node-0, client-0], b: [node-1], c: [node-2, node-3]}}\n",
			"t.yaml:5:69: placement.zones.c[1]", `"node-3" is not a node of the cluster; want one of node-0..node-2, client-0`},
		{"a role is not a node", "placement: {zones: {a: [leader, node-0, client-0], b: [node-1, node-2]}}\n",
			"t.yaml:5:25: placement.zones.a[0]", `"leader" is not a node of the cluster`},
		{"in two zones", "placement: {zones: {a: [node-0, client-0], b: [node-1, node-0], c: [node-2]}}\n",
			"t.yaml:5:56: placement.zones.b[1]", "node-0 is already in placement.zones.a[0]; a node is in one zone"},
		{"missing nodes", "placement: {zones: {a: [node-0], b: [node-1]}}\n",
			"t.yaml:5:20: placement.zones", "node-2, client-0 are in no zone; with a placement every node of the cluster (node-0..node-2, client-0) is in one zone"},
		{"no zones", "placement: {between_zones: {delay: 1ms}}\n", "t.yaml:5:12: placement.zones", "missing; want the zones and their nodes"},
		{"empty zone", "placement: {zones: {a: [node-0, node-1, node-2, client-0], b: []}}\n",
			"t.yaml:5:63: placement.zones.b", "want a non-empty list of nodes, e.g. [node-0, client-0], got an empty list"},
		{"bad zone name", "placement:\n  zones:\n    'a/b': [node-0, node-1, node-2, client-0]\n",
			"t.yaml:7:5: placement.zones.a/b", `"a/b" is not a zone name`},
		{"unknown key", "placement: {zones: {a: [node-0, node-1, node-2, client-0]}, between: {delay: 1ms}}\n",
			"t.yaml:5:61: placement.between", `unknown key (did you mean "between_zones"?)`},
		{"no unit", "placement: {zones: {a: [node-0, node-1, node-2, client-0]}, between_zones: {delay: 1}}\n",
			"t.yaml:5:84: placement.between_zones.delay", `"1" has no unit`},
		{"jitter above delay", "placement: {zones: {a: [node-0, node-1, node-2, client-0]}, between_zones: {delay: 1ms, jitter: 2ms}}\n",
			"t.yaml:5:97: placement.between_zones.jitter", "2ms is more than the delay (1ms)"},
	} {
		t.Run(c.name, func(t *testing.T) { wantProblem(t, problemsOf(t, base+c.src), c.at, c.msg) })
	}
}

// The distance between zones is a matrix axis, checked as the field is, and the placement's
// rules are checked in every combination (a node missing only with more servers says which run).
func TestPlacementMatrix(t *testing.T) {
	p := mustParse(t, base+"placement: {zones: {a: [node-0, client-0], b: [node-1], c: [node-2]}}\nmatrix:\n  placement.between_zones.delay: [0, 2ms]\n")
	pl, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Runs) != 2 || pl.Runs[0].Playbook.Placement.Between.Delay != 0 || pl.Runs[1].Playbook.Placement.Between.Delay != 2*time.Millisecond {
		t.Fatalf("runs %+v", pl.Runs)
	}
	pl.Runs[0].Playbook.Placement.Zones["a"][0] = "changed"
	if pl.Runs[1].Playbook.Placement.Zones["a"][0] != "node-0" {
		t.Fatal("runs share their zones: Clone must copy them")
	}
	probs := problemsOf(t, base+"placement: {zones: {a: [node-0, node-1, node-2, client-0]}, between_zones: {delay: 1ms, jitter: 500us}}\n"+
		"matrix:\n  placement.between_zones.delay: [1ms, 200us]\n  cluster.servers: [3, 5]\n")
	wantProblem(t, probs, "t.yaml:5:97: placement.between_zones.jitter", "500µs is more than the delay (200µs); want at most the delay, so that no chunk is due before it was sent and the mean stays the delay (in the run with placement.between_zones.delay=200us cluster.servers=3)")
	wantProblem(t, probs, "t.yaml:5:20: placement.zones", "node-3, node-4 are in no zone; with a placement every node of the cluster (node-0..node-4, client-0) is in one zone (in the run with placement.between_zones.delay=1ms cluster.servers=5)")
	probs = problemsOf(t, base+zones3+"matrix:\n  placement.between_zones.delay: [1ms, 2s]\n")
	wantProblem(t, probs, "t.yaml:7:40: matrix.placement.between_zones.delay[1]", "out of range; want a duration from 0 to 1s")
}

// A placement's links are probed before load, one pair after the other; their round
// trips between zones must fit in MaxLinkProbe, and the plan shows what the probe takes and its
// bound.
func TestPlacementLinkProbeBounded(t *testing.T) {
	zones := "placement: {zones: {a: [node-0, client-0], b: [node-1], c: [node-2]}, between_zones: {delay: %s}}\n"
	// 8 of the 9 pairs cross zones (client-0 to node-0 does not): 8 x 20 x 2 x 500ms = 160s.
	wantProblem(t, problemsOf(t, base+fmt.Sprintf(zones, "500ms")), "t.yaml:5:94: placement.between_zones.delay",
		"the links' probe before load measures 20 round trips on each of 8 pairs between zones, at least 2m40s at this delay, more than the 1m0s it may take; want delay at most 187.5ms")
	p := mustParse(t, base+fmt.Sprintf(zones, "10ms"))
	pl, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	pl.Print(&buf)
	if want := "its links probed before load and again under load: 20 round trips on each of 9 pairs, about 3.2s, at most 48.2s"; !strings.Contains(buf.String(), want) {
		t.Errorf("plan lacks %q:\n%s", want, buf.String())
	}
}
