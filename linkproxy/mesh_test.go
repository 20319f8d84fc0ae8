package linkproxy

import (
	"context"
	"errors"
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
