package local

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/target"
)

// Addresses of their own, apart from the ones other tests and runs on this machine use.
const testFirst = "127.0.203.11"

func TestInventoryLayout(t *testing.T) {
	dir := t.TempDir()
	inv, err := New(Options{FirstAddress: testFirst}).Inventory(dir, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ name, role, addr string }{
		{"node-0", inventory.RoleServer, "127.0.203.11"},
		{"node-1", inventory.RoleServer, "127.0.203.12"},
		{"node-2", inventory.RoleServer, "127.0.203.13"},
		{"client-0", inventory.RoleClient, "127.0.203.14"},
	}
	if len(inv.Nodes) != len(want) || inv.Target != "local" {
		t.Fatalf("inventory %+v", inv)
	}
	for i, w := range want {
		n := inv.Nodes[i]
		if n.Name != w.name || n.Role != w.role || n.Address != w.addr || n.PrivateAddress != w.addr || n.Dir != filepath.Join(dir, w.name) {
			t.Errorf("node %d: %+v, want %+v in %s", i, n, w, dir)
		}
		if target.LoopbackHost(n) != w.addr {
			t.Errorf("%s: services listen on %s, want its own address", n.Name, target.LoopbackHost(n))
		}
	}
}

func TestInventoryRefusals(t *testing.T) {
	for _, tc := range []struct {
		first            string
		servers, clients int
		want             string
	}{
		{"10.0.0.1", 3, 1, `first address "10.0.0.1" is not an IPv4 loopback address`},
		{"::1", 3, 1, "not an IPv4 loopback address"},
		{testFirst, 3, 0, "need at least 1 server and 1 client, have 3 and 0"},
		{"127.0.0.250", 5, 2, "7 nodes do not fit after 127.0.0.250"},
	} {
		_, err := New(Options{FirstAddress: tc.first}).Inventory(t.TempDir(), tc.servers, tc.clients)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %d+%d: err %v, want %q", tc.first, tc.servers, tc.clients, err, tc.want)
		}
	}
}

// An agent binary that exits at once fails Start with the node named, leaves nothing running
// and no address locked: the next Start gets as far again.
func TestAgentExitsAtStart(t *testing.T) {
	tgt := New(Options{FirstAddress: testFirst})
	for i := 0; i < 2; i++ {
		c, err := tgt.Start(context.Background(), target.StartOptions{RunDir: t.TempDir(), Servers: 1, Clients: 1, Binary: "/bin/false", Run: "test"})
		if c != nil || err == nil || !strings.Contains(err.Error(), "agent on node-0 exited at start") {
			t.Fatalf("start %d: cluster %v, err %v", i, c, err)
		}
		if errors.Is(err, ErrBusy) {
			t.Fatalf("start %d: the first start left its address locks: %v", i, err)
		}
	}
}

// Tuning on the local target changes this machine's kernel: only with Tune, and through one agent.
func TestTraits(t *testing.T) {
	inv, err := New(Options{FirstAddress: testFirst}).Inventory(t.TempDir(), 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tune := range []bool{false, true} {
		c := &Cluster{t: New(Options{Tune: tune}), inv: inv}
		tr := c.Traits()
		if !tr.OneClock || len(tr.TuneNodes) != 1 || (tr.TuneSkipped == "") != tune {
			t.Errorf("tune %v: traits %+v", tune, tr)
		}
	}
}
