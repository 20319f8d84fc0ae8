package linkproxy

import (
	"context"
	"errors"
	"maps"
	"net"
	"testing"
	"time"
)

func TestPlacementValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Placement
	}{
		{"member in two zones", Placement{Zones: map[string][]string{"a": {"node-0"}, "b": {"node-0"}}}},
		{"empty zone", Placement{Zones: map[string][]string{"a": {}}}},
		{"jitter above delay", Placement{Zones: map[string][]string{"a": {"node-0"}}, Between: Shape{Delay: time.Millisecond, Jitter: 2 * time.Millisecond}}},
	} {
		if err := tc.p.Validate(); !errors.Is(err, ErrPlacement) {
			t.Errorf("%s: %v, want ErrPlacement", tc.name, err)
		}
	}
}

// TestMesh: members in one zone are routed straight to each other, members in different zones
// through a link with the between-zones shape, which the mesh's probe measures back; isolating
// a member cuts its links only.
func TestMesh(t *testing.T) {
	between := Shape{Delay: 5 * time.Millisecond, Jitter: 500 * time.Microsecond}
	m, err := NewMesh(MeshOptions{
		Placement: Placement{Zones: map[string][]string{"a": {"node-0", "client-0"}, "b": {"node-1"}, "c": {"node-2"}}, Between: between},
		Hosts:     map[string]string{"node-0": "127.0.0.1", "client-0": "127.0.0.1", "node-1": "127.0.0.1", "node-2": "127.0.0.1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	svc := map[string]string{"node-0": echoServer(t), "node-1": echoServer(t), "node-2": echoServer(t)}
	for _, from := range []string{"node-0", "node-1", "node-2", "client-0"} {
		for _, to := range []string{"node-0", "node-1", "node-2"} {
			if from == to {
				continue
			}
			addr, err := m.Route(ctx, from, to, svc[to])
			if err != nil {
				t.Fatal(err)
			}
			same := m.o.Placement.ZoneOf(from) == m.o.Placement.ZoneOf(to)
			if same != (addr == svc[to]) {
				t.Errorf("route %s → %s: %s (service %s); same zone %v", from, to, addr, svc[to], same)
			}
		}
	}
	if _, err := m.Route(ctx, "node-9", "node-0", svc["node-0"]); !errors.Is(err, ErrPlacement) {
		t.Errorf("route from a member in no zone: %v", err)
	}
	if n := len(m.Links()); n != 8 { // 3 servers × 2 others, less node-0's none, + client-0 → node-1, node-2
		t.Errorf("%d links, want 8 (every cross-zone pair)", n)
	}
	probes := m.Probe(ctx, ProbeOptions{Count: 10})
	if len(probes) != 8 {
		t.Fatalf("%d pairs probed, want 8", len(probes))
	}
	for _, p := range probes {
		if p.Error != "" {
			t.Errorf("%s → %s: %s", p.From, p.To, p.Error)
			continue
		}
		if p.Probe.Set != 2*between.Delay || p.Probe.Min < 2*(between.Delay-between.Jitter) {
			t.Errorf("%s → %s: %v; want a set round trip of %v, none below %v", p.From, p.To, p.Probe, 2*between.Delay, 2*(between.Delay-between.Jitter))
		}
	}
	if n := m.Isolate("node-1"); n != 5 { // node-0, node-2, client-0 → node-1 and node-1 → node-0, node-2
		t.Errorf("isolating node-1 cut %d links, want 5", n)
	}
	for _, pl := range m.Links() {
		touches := pl.From == "node-1" || pl.To == "node-1"
		if pl.Link.IsCut() != touches {
			t.Errorf("%s → %s cut %v", pl.From, pl.To, pl.Link.IsCut())
		}
	}
	addr, _ := m.Route(ctx, "node-2", "node-1", svc["node-1"])
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(time.Second))
		_, _ = c.Write([]byte("x"))
		if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Errorf("node-2 reached isolated node-1: %v", err)
		}
		c.Close()
	}
	m.Heal()
	for _, p := range m.Probe(ctx, ProbeOptions{Count: 2}) {
		if p.Error != "" {
			t.Errorf("after heal %s → %s: %s", p.From, p.To, p.Error)
		}
	}
}

// AddShape delays a member's links on top of their zone shape (or only those to given peers),
// the delays of two added shapes add up, and each undo takes off its own shape only.
func TestMeshAddShape(t *testing.T) {
	const host = "127.0.73.1"
	between := Shape{Delay: time.Millisecond}
	m, err := NewMesh(MeshOptions{
		Placement: Placement{Zones: map[string][]string{"a": {"node-0", "node-1"}, "b": {"node-2"}}, Between: between},
		Hosts:     map[string]string{"node-0": host, "node-1": host, "node-2": host}, SameZone: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	svc := map[string]string{"node-0": echoServer(t), "node-1": echoServer(t), "node-2": echoServer(t)}
	for _, from := range []string{"node-0", "node-1", "node-2"} {
		for _, to := range []string{"node-0", "node-1", "node-2"} {
			if from != to {
				if _, err := m.Route(ctx, from, to, svc[to]); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	shapes := func() map[[2]string]Shape {
		out := map[[2]string]Shape{}
		for _, pl := range m.Links() {
			up, down := pl.Link.Shapes()
			if up != down {
				t.Errorf("%s → %s: up %v, down %v", pl.From, pl.To, up, down)
			}
			out[[2]string{pl.From, pl.To}] = up
		}
		return out
	}
	ms := time.Millisecond
	all, undoAll, err := m.AddShape(Shape{Delay: 5 * ms, Jitter: ms}, "node-0")
	if err != nil || len(all) != 4 {
		t.Fatalf("node-0's links: %d changed, %v; want 4", len(all), err)
	}
	pair, undoPair, err := m.AddShape(Shape{Delay: 3 * ms}, "node-1", "node-0")
	if err != nil || len(pair) != 2 {
		t.Fatalf("node-1 ↔ node-0: %d changed, %v; want 2", len(pair), err)
	}
	want := map[[2]string]Shape{
		{"node-0", "node-1"}: {Delay: 8 * ms, Jitter: ms}, {"node-1", "node-0"}: {Delay: 8 * ms, Jitter: ms},
		{"node-0", "node-2"}: {Delay: 6 * ms, Jitter: ms}, {"node-2", "node-0"}: {Delay: 6 * ms, Jitter: ms},
		{"node-1", "node-2"}: between, {"node-2", "node-1"}: between,
	}
	if got := shapes(); !maps.Equal(got, want) {
		t.Errorf("shapes %v, want %v", got, want)
	}
	// The shape is in effect on the wire: node-1 → node-0's round trip is 2 × 8 ms, ± 2 ms.
	for _, pp := range ProbePairs(ctx, pair, ProbeOptions{Count: 5}) {
		if pp.From == "node-1" && (pp.Error != "" || pp.Probe.Set != 16*ms || pp.Probe.Min < 14*ms) {
			t.Errorf("node-1 → node-0 probe %+v; want a set 16ms, none below 14ms", pp)
		}
	}
	if n := undoAll(); n != 4 || undoAll() != 0 {
		t.Errorf("undo changed %d links, want 4 (and nothing a second time)", n)
	}
	want[[2]string{"node-0", "node-1"}], want[[2]string{"node-1", "node-0"}] = Shape{Delay: 3 * ms}, Shape{Delay: 3 * ms}
	want[[2]string{"node-0", "node-2"}], want[[2]string{"node-2", "node-0"}] = between, between
	if got := shapes(); !maps.Equal(got, want) {
		t.Errorf("after the first undo: shapes %v, want %v", got, want)
	}
	undoPair()
	if got := shapes(); got[[2]string{"node-0", "node-1"}] != (Shape{}) || got[[2]string{"node-0", "node-2"}] != between {
		t.Errorf("after both undos: %v; want the zone shapes back", got)
	}
	if _, _, err := m.AddShape(Shape{Delay: ms, Jitter: 2 * ms}, "node-0"); !errors.Is(err, ErrPlacement) {
		t.Errorf("jitter above delay: %v", err)
	}
}

// A probe is off the asked round trip beyond the tolerance of it plus the floor, either way.
func TestProbeCheck(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		median time.Duration
		n      int
		off    bool
	}{
		{4 * ms, 20, false}, {5 * ms, 20, false}, {5200 * time.Microsecond, 20, true},
		{2800 * time.Microsecond, 20, true}, {3 * ms, 20, false}, {4 * ms, 0, true},
	} {
		err := Probe{Set: 4 * ms, Median: tc.median, N: tc.n}.Check(0.2, 300*time.Microsecond)
		if off := errors.Is(err, ErrOffShape); off != tc.off {
			t.Errorf("median %v over %d: %v; want off %v (allowed 4ms ± 1.1ms)", tc.median, tc.n, err, tc.off)
		}
	}
	pp := PairProbe{From: "node-0", To: "node-1", Probe: Probe{Set: 4 * ms, Median: 9 * ms, Min: 8 * ms, Max: 12 * ms, N: 20}}
	if err := pp.Check(Tolerance, Floor); err == nil || err.Error() != "round trip node-0 → node-1: off the asked: asked 4ms, achieved 9ms (median of 20; min 8ms, max 12ms); allowed 4ms ± 1.1ms (20 % + 300µs)" {
		t.Errorf("pair check: %v", err)
	}
}
