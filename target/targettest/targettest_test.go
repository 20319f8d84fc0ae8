package targettest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/transport"
)

func start(t *testing.T, tgt *Target) *Cluster {
	t.Helper()
	cl, err := tgt.Start(t.Context(), target.StartOptions{RunDir: t.TempDir(), Servers: 3, Clients: 1})
	if err != nil {
		t.Fatal(err)
	}
	return cl.(*Cluster)
}

func roles(t *testing.T, c *Cluster) string {
	t.Helper()
	var out []string
	for _, n := range c.Inventory().Servers() {
		st, err := c.Agent(n.Name).EngineStatusHash(t.Context())
		if err != nil {
			out = append(out, n.Name+"=down")
			continue
		}
		out = append(out, n.Name+"="+st.Role)
	}
	return strings.Join(out, " ")
}

// The fake's engines through the real agent client: the first launched leads, the next running
// server takes over when it exits, and each call is noted in order.
func TestEnginesThroughTheAgentClient(t *testing.T) {
	c := start(t, &Target{Cluster: NewCluster()})
	for _, n := range c.Inventory().Servers() {
		if err := c.Agent(n.Name).StartEngine(t.Context(), agent.StartRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := roles(t, c); got != "node-0=leader node-1=follower node-2=follower" {
		t.Errorf("after start: %s", got)
	}
	c.Exit("node-0", 3)
	if got := roles(t, c); got != "node-0=down node-1=leader node-2=follower" {
		t.Errorf("after node-0 exits: %s", got)
	}
	j := c.Journal("node-0")
	if last := j[len(j)-1]; last.Kind != rundir.TransPhase || last.To != rundir.PhaseDown || last.Exit == nil || last.Exit.Code != 3 {
		t.Errorf("node-0's last transition %+v; want down with exit code 3", last)
	}
	if st, _ := c.Agent("node-2").EngineStatusHash(t.Context()); st.Leader != "node-1" || st.Term != 3 {
		t.Errorf("node-2 sees leader %q in term %d; want node-1 in term 3", st.Leader, st.Term)
	}
	calls := c.Calls()
	if i, j := slices.Index(calls, "node-0 POST /engine/start"), slices.Index(calls, "node-2 POST /engine/start"); i < 0 || j < i {
		t.Errorf("calls %q", calls)
	}
	if !c.Called("node-1 GET /engine/proxy /status") {
		t.Errorf("no status call noted: %q", calls)
	}
	c.Gone("node-2")
	if _, err := c.Agent("node-2").Ping(t.Context()); !errors.Is(err, transport.ErrUnreachable) {
		t.Errorf("ping of a gone agent: %v; want unreachable", err)
	}
	c.Lapse("node-1")
	if _, err := c.Agent("node-1").Ping(t.Context()); !errors.Is(err, agent.ErrLeaseLapsed) {
		t.Errorf("ping after the lease lapsed: %v; want a 410", err)
	}
	if st, err := c.Agent("node-1").EngineStatusHash(t.Context()); err == nil && st.Role == engine.RoleLeader {
		t.Error("a lapsed node still leads")
	}
}

// The fake answers only what it fakes: no engine address is dialled, a running cluster is not
// started twice, and a stopped one starts afresh.
func TestFakeSaysWhatItIsNot(t *testing.T) {
	tgt := &Target{}
	c := start(t, tgt)
	client, server := c.Inventory().Clients()[0], c.Inventory().Servers()[0]
	if _, err := c.Transport().Dial(t.Context(), server, "127.0.0.1:9000"); !errors.Is(err, transport.ErrUnreachable) {
		t.Errorf("dial of an engine address: %v; want unreachable", err)
	}
	if _, err := c.Transport().Dial(t.Context(), client, c.ControlSocket(server, "loadgen.sock")); err == nil {
		t.Error("a client dialled a server's control socket")
	}
	conn, err := c.Transport().Dial(t.Context(), client, c.ControlSocket(client, "loadgen.sock"))
	if err != nil {
		t.Fatalf("dial of the client's control socket: %v", err)
	}
	conn.Close()
	if _, err := tgt.Start(t.Context(), target.StartOptions{Servers: 1}); err == nil {
		t.Error("a running cluster started again")
	}
	c.Agent("node-0").StartEngine(t.Context(), agent.StartRequest{})
	c.Stop(t.Context())
	again := start(t, tgt)
	if again != c || len(again.Journal("node-0")) != 0 || !again.Started() || again.Stopped() || len(tgt.Asked()) != 3 {
		t.Errorf("restart: same %v, journal %v, started %v, stopped %v, asked %d", again == c, again.Journal("node-0"), again.Started(), again.Stopped(), len(tgt.Asked()))
	}
}

// A renewal that was past the cut's check when CutLease came (the snapshot that cuts the lease
// runs beside the renewer) still lands: the lease lapses its length after that renewal, not
// after the one before (runner's TestLeaseLapseFailsTheRunNamed saw a renewal after a lapse
// that came too early).
func TestCutLeaseCountsARenewalInFlight(t *testing.T) {
	c := start(t, &Target{Cluster: NewCluster()})
	n := c.nodes["node-1"]
	const ttl = time.Second
	c.mu.Lock()
	n.renewed, n.ttl = time.Now().Add(-500*time.Millisecond), ttl // lapses 500 ms from now
	c.mu.Unlock()
	c.CutLease("node-1")
	c.mu.Lock()
	if n.lapsed {
		c.mu.Unlock()
		t.Skip("this goroutine stalled past the first lapse before the renewal could land")
	}
	renewed := time.Now()
	n.renewed = renewed // the renewal in flight lands
	c.mu.Unlock()
	time.Sleep(700 * time.Millisecond)
	// Only while the landed renewal's lease still holds (a slow machine may sleep past it).
	if lapsed := c.Lapsed("node-1"); lapsed && time.Since(renewed) < ttl {
		t.Errorf("lapsed %s after the renewal that landed, with its lease of %s still held", time.Since(renewed), ttl)
	}
	for deadline := time.Now().Add(10 * time.Second); !c.Lapsed("node-1"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the cut lease never lapsed")
		}
	}
	if d := time.Since(renewed); d < ttl {
		t.Errorf("lapsed %s after the last renewal, want its length %s", d, ttl)
	}
}
