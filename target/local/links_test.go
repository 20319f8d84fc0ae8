package local

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/rig-dev/rig/internal/testaddr"
	"github.com/rig-dev/rig/linkproxy"
	"github.com/rig-dev/rig/target"
)

// zonesFirst is this file's first node address, its own, so it may run beside other tests.
const zonesFirst = "127.0.71.11"

// A placement routes every raft peer link and client link by zone: a link with the zones' shape
// on the dialer's own address for a pair in two zones, the service itself for a pair in one;
// with StartOptions.Links (a timeline that cuts links) every pair gets a link, undelayed within
// a zone. ProbeLinks measures each routed pair's round trip through its link.
func TestPlacementRoutesByZone(t *testing.T) {
	inv, err := New(Options{FirstAddress: zonesFirst}).Inventory(t.TempDir(), 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	addr := map[string]string{}
	for _, n := range inv.Nodes {
		addr[n.Name] = n.Address
	}
	between := linkproxy.Shape{Delay: 2 * time.Millisecond}
	pl := linkproxy.Placement{Zones: map[string][]string{"a": {"node-0", "client-0"}, "b": {"node-1"}, "c": {"node-2"}}, Between: between}
	for _, cut := range []bool{false, true} {
		c := &Cluster{inv: inv, log: slog.New(slog.DiscardHandler)}
		if err := c.startLinks(target.StartOptions{Placement: pl, Links: cut}); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		svc := map[string]string{}
		for _, s := range []string{"node-0", "node-1", "node-2"} {
			svc[s] = testaddr.Echo(t, addr[s])
		}
		for _, from := range []string{"node-0", "node-1", "node-2", "client-0"} {
			for _, to := range []string{"node-0", "node-1", "node-2"} {
				if from == to {
					continue
				}
				got, err := c.Route(ctx, from, to, svc[to])
				if err != nil {
					t.Fatal(err)
				}
				same := pl.ZoneOf(from) == pl.ZoneOf(to)
				if same && !cut {
					if got != svc[to] {
						t.Errorf("cut=%v: %s → %s in one zone routed to %s, want the service %s itself", cut, from, to, got, svc[to])
					}
					continue
				}
				host, _, _ := net.SplitHostPort(got)
				if got == svc[to] || host != addr[from] {
					t.Errorf("cut=%v: %s → %s routed to %s; want a link on %s's own address %s", cut, from, to, got, from, addr[from])
				}
			}
		}
		want := 8 // 6 raft pairs and 3 client pairs, less node-0 ↔ client-0's one (one zone)
		if cut {
			want = 9
		}
		probes := c.ProbeLinks(ctx)
		if len(probes) != want {
			t.Errorf("cut=%v: %d pairs probed, want %d: %+v", cut, len(probes), want, probes)
		}
		for _, pp := range probes {
			set := 2 * between.Delay
			if pl.ZoneOf(pp.From) == pl.ZoneOf(pp.To) {
				set = 0
			}
			if pp.Probe.Set != set {
				t.Errorf("cut=%v: %s → %s asked %v, want %v", cut, pp.From, pp.To, pp.Probe.Set, set)
			}
			// A pair's measured round trip is at least what it was asked (the link never sends early).
			if pp.Error != "" || pp.Probe.N == 0 || pp.Probe.Min < set {
				t.Errorf("cut=%v: %s → %s: %+v", cut, pp.From, pp.To, pp)
			}
		}
		if err := c.links.mesh.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
