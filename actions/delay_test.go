package actions

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rig-dev/rig/actions/actionstest"
	"github.com/rig-dev/rig/internal/testaddr"
	"github.com/rig-dev/rig/linkproxy"
)

// meshEnv is the fake env plus a LinkShaper whose links are a real linkproxy mesh (one zone, a
// link on every pair, as the local target builds for a timeline that acts on links) in front of
// echo services.
type meshEnv struct {
	*actionstest.Env
	mesh *linkproxy.Mesh
}

func (e *meshEnv) Delay(ctx context.Context, s linkproxy.Shape, node string, peers ...string) ([]linkproxy.PairProbe, int, func() int, error) {
	e.Note("delay %s %v", node, peers)
	pls, undo, err := e.mesh.AddShape(s, node, peers...)
	if err != nil {
		return nil, 0, nil, err
	}
	return linkproxy.ProbePairs(ctx, pls, linkproxy.ProbeOptions{Count: DelayProbeRounds}), len(pls), undo, nil
}

// rtt measures the round trip from one member to another through its route now.
func (e *meshEnv) rtt(t *testing.T, from, to string) time.Duration {
	t.Helper()
	for _, pl := range e.mesh.Links() {
		if pl.From == from && pl.To == to {
			p, err := pl.Link.Probe(context.Background(), linkproxy.ProbeOptions{Count: DelayProbeRounds})
			if err != nil {
				t.Fatal(err)
			}
			return p.Median
		}
	}
	t.Fatalf("no link %s → %s", from, to)
	return 0
}

func newMeshEnv(t *testing.T) *meshEnv {
	t.Helper()
	const host = "127.0.74.1"
	members := []string{"node-0", "node-1", "node-2", "client-0"}
	hosts := map[string]string{}
	for _, m := range members {
		hosts[m] = host
	}
	m, err := linkproxy.NewMesh(linkproxy.MeshOptions{Placement: linkproxy.Placement{Zones: map[string][]string{"local": members}}, Hosts: hosts, SameZone: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	for _, to := range members[:3] {
		svc := testaddr.Echo(t, host)
		for _, from := range members {
			if from != to {
				if _, err := m.Route(context.Background(), from, to, svc); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return &meshEnv{Env: actionstest.NewEnv(), mesh: m}
}

// A delay of the leader's links slows every raft peer and client link of it on the wire, records
// the round trips it measured right after, and is taken off at its end, recorded as delay_heal.
func TestDelayNodeLinks(t *testing.T) {
	env := newMeshEnv(t)
	const add = 3 * time.Millisecond
	d := &Delay{Node: "leader", Delay: add, For: 400 * time.Millisecond}
	if err := d.Run(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	if got := env.rtt(t, "node-1", "node-0"); got < 2*add {
		t.Errorf("node-1 → node-0 round trip %v during the delay; want at least %v", got, 2*add)
	}
	if got := env.rtt(t, "node-1", "node-2"); got >= add {
		t.Errorf("node-1 → node-2 (not node-0's) round trip %v; want it undelayed", got)
	}
	if err := env.Settle(); err != nil {
		t.Fatal(err)
	}
	if len(env.Events()) != 2 {
		t.Fatalf("events %+v; want delay and delay_heal", env.Events())
	}
	ev, heal := env.Events()[0], env.Events()[1]
	da := DelayOf(ev)
	if !ev.IsAction(ActDelay) || ev.Node != "node-0" || da == nil || da.As != "leader" || da.DelayMs != 3 || da.ForMs != 400 || da.Links != 5 {
		t.Fatalf("delay event %+v %+v; want node-0 (leader), 3 ms for 400 ms, 5 links (2 peers each way + client-0's)", ev, da)
	}
	var pairs []string
	for _, r := range da.RTTs {
		pairs = append(pairs, r.From+"→"+r.To)
		if r.Error != "" || r.Probe.Set != 2*add || r.Probe.Min < 2*add {
			t.Errorf("recorded %s → %s: %+v; want asked %v and nothing faster", r.From, r.To, r, 2*add)
		}
	}
	slices.Sort(pairs)
	if want := []string{"client-0→node-0", "node-0→node-1", "node-0→node-2", "node-1→node-0", "node-2→node-0"}; !slices.Equal(pairs, want) {
		t.Errorf("probed pairs %v, want %v", pairs, want)
	}
	if !heal.IsAction(ActDelayHeal) || heal.Node != "node-0" || DelayOf(heal).Links != 5 || heal.T.Sub(ev.T) < 400*time.Millisecond {
		t.Errorf("heal %+v %+v; want delay_heal of node-0's 5 links 400 ms after", heal, DelayOf(heal))
	}
	if got := env.rtt(t, "node-1", "node-0"); got >= add {
		t.Errorf("node-1 → node-0 round trip %v after the heal; want it undelayed", got)
	}
}

// A delay whose timeline ends first (an interrupted run) is taken off at once and recorded as
// delay_heal, as a hog records its end: the record holds no lasting action without its end.
func TestDelayEndsWithTheTimeline(t *testing.T) {
	env := newMeshEnv(t)
	const add = 3 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	if err := (&Delay{Node: "node-0", Delay: add, For: time.Hour}).Run(ctx, env); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := env.Settle(); err != nil {
		t.Fatal(err)
	}
	if len(env.Events()) != 2 || !env.Events()[1].IsAction(ActDelayHeal) || DelayOf(env.Events()[1]).Links != 5 {
		t.Fatalf("events %+v; want delay, then delay_heal of node-0's 5 links", env.Events())
	}
	if got := env.rtt(t, "node-1", "node-0"); got >= add {
		t.Errorf("node-1 → node-0 round trip %v after the timeline ended; want it undelayed", got)
	}
}

// Between two nodes, only the links joining them are delayed; without for it stays.
func TestDelayBetweenTwoNodes(t *testing.T) {
	env := newMeshEnv(t)
	d := &Delay{Node: "node-1", To: "leader", Delay: 2 * time.Millisecond, Jitter: 500 * time.Microsecond}
	if err := d.Run(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	if err := env.Settle(); err != nil {
		t.Fatal(err)
	}
	if len(env.Events()) != 1 || DelayOf(env.Events()[0]).Links != 2 || DelayOf(env.Events()[0]).ToNode != "node-0" {
		t.Fatalf("events %+v; want one delay of the 2 links node-1 ↔ node-0", env.Events())
	}
	for _, p := range [][2]string{{"node-1", "node-0"}, {"node-0", "node-1"}} {
		if got := env.rtt(t, p[0], p[1]); got < 3*time.Millisecond {
			t.Errorf("%s → %s round trip %v; want at least 2 × (2ms − 500µs)", p[0], p[1], got)
		}
	}
	for _, p := range [][2]string{{"client-0", "node-0"}, {"node-2", "node-1"}} {
		if got := env.rtt(t, p[0], p[1]); got >= time.Millisecond {
			t.Errorf("%s → %s round trip %v; want it undelayed", p[0], p[1], got)
		}
	}
	same := &Delay{Node: "leader", To: "node-0", Delay: time.Millisecond}
	if err := same.Run(context.Background(), env); err == nil {
		t.Error("a delay between the leader and itself ran")
	}
}

// The playbook-facing rules: required keys, nodes of the cluster, jitter within delay, an end inside the run.
func TestDelayRules(t *testing.T) {
	c := Context{Servers: 3, Clients: 1, At: 10 * time.Second, End: 20 * time.Second}
	var got []string
	for _, p := range (&Delay{Node: "node-3", To: "node-3", Delay: time.Millisecond, Jitter: 2 * time.Millisecond, For: 15 * time.Second}).Check(c) {
		got = append(got, p.Key+":"+p.Rule)
	}
	if want := []string{"node:node", "to:node", "for:heal-after-end", "to:to-self", "jitter:jitter"}; !slices.Equal(got, want) {
		t.Errorf("rules %v, want %v", got, want)
	}
	var missing []string
	for _, p := range (&Delay{}).Complete(map[string]bool{}) {
		missing = append(missing, p.Key)
	}
	if fmt.Sprint(missing) != "[node delay]" {
		t.Errorf("missing %v", missing)
	}
}
