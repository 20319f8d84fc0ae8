package actions

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

// Every registered kind's fields read back what they were given, and a clone shares nothing.
func TestKindsRoundTrip(t *testing.T) {
	if got := Names(); !slices.Equal(got, []string{"snapshot", "kill", "step_down", "burst", "wait_for", "power_loss", "partition", "delay", "gc", "cpu_hog"}) {
		t.Fatalf("kinds %v", got)
	}
	k, _ := New("kill")
	f, ok := FieldOf(k, "relaunch_after")
	if !ok {
		t.Fatal("kill has no relaunch_after")
	}
	if err := f.Set(k, "1.5s"); err != nil || f.Get(k) != "1.5s" {
		t.Fatalf("relaunch_after: %v, reads %q", err, f.Get(k))
	}
	if err := f.Set(k, "0s"); err == nil {
		t.Error("relaunch_after 0s accepted; want 1ms or more")
	}
	c := Clone(k).(*Kill)
	c.RelaunchAfter = time.Hour
	if k.(*Kill).RelaunchAfter != 1500*time.Millisecond {
		t.Error("a clone's change reached the original")
	}
	nf, _ := FieldOf(k, "node")
	if err := nf.Set(k, "node-x"); err == nil {
		t.Error("node-x accepted as a node")
	}
	b, _ := json.Marshal(k)
	if string(b) != `{"node":"","signal":"KILL","relaunch_after":1500000000}` {
		t.Errorf("kill JSON %s", b)
	}
}

// A kind's rules see the playbook through Context: a relaunch after the end, a burst whose last
// repetition starts after it, a node the cluster does not have.
func TestKindChecks(t *testing.T) {
	c := Context{Servers: 3, Clients: 1, At: 10 * time.Second, End: 20 * time.Second}
	rules := func(s Spec) []string {
		var out []string
		for _, p := range s.Check(c) {
			out = append(out, p.Key+":"+p.Rule)
		}
		return out
	}
	if got := rules(&Kill{Node: "node-3", Signal: "KILL", RelaunchAfter: 15 * time.Second}); !slices.Equal(got, []string{"node:node", "relaunch_after:relaunch-after-end"}) {
		t.Errorf("kill rules %v", got)
	}
	if got := rules(&Burst{Messages: 10, Count: 3, Every: 5 * time.Second, Size: 170, Senders: 17}); !slices.Equal(got, []string{"senders:senders-per-client", "count:burst-after-end"}) {
		t.Errorf("burst rules %v", got)
	}
	if got := rules(&WaitFor{Phase: "ready", Node: "other-follower", Timeout: time.Second}); len(got) != 0 {
		t.Errorf("wait_for rules %v", got)
	}
	if got := rules(&PowerLoss{Nodes: "leader+node-3", RelaunchAfter: 10 * time.Second}); !slices.Equal(got, []string{"nodes:node", "relaunch_after:relaunch-after-end"}) {
		t.Errorf("power_loss rules %v", got)
	}
	if got := rules(&PowerLoss{Nodes: "leader+follower", RelaunchAfter: 2 * time.Second}); len(got) != 0 {
		t.Errorf("power_loss of a majority, back inside the run: rules %v; want none (taking a majority is the point)", got)
	}
}

// A power loss names its servers joined by +, each once, and must say when the power comes back.
func TestPowerLossFields(t *testing.T) {
	k, _ := New("power_loss")
	if p := k.(*PowerLoss); p.Nodes != DefaultPowerLossNodes || p.Unsynced != UnsyncedDrop {
		t.Errorf("defaults %+v", p)
	}
	uf, _ := FieldOf(k, "unsynced")
	if err := uf.Set(k, "flush"); err == nil {
		t.Error("unsynced: flush accepted")
	}
	f, _ := FieldOf(k, "nodes")
	for _, bad := range []string{"leader+leader", "leader,follower", "node-x", ""} {
		if err := f.Set(k, bad); err == nil {
			t.Errorf("nodes %q accepted", bad)
		}
	}
	if err := f.Set(k, "node-0+other-follower"); err != nil || f.Get(k) != "node-0+other-follower" {
		t.Errorf("nodes: %v, reads %q", err, f.Get(k))
	}
	if ps := k.(Completer).Complete(map[string]bool{"nodes": true}); len(ps) != 1 || ps[0].Key != "relaunch_after" {
		t.Errorf("a power loss without relaunch_after: %+v; want it asked for", ps)
	}
	// A power loss takes its servers down until the power is back, and may take a majority:
	// that is the failure it models (the playbook's timeline state, playbooks/timeline.go).
	dn, ok := k.(Downer)
	if !ok {
		t.Fatal("power_loss is no Downer: a node it cut could be killed while it has no power")
	}
	k.(*PowerLoss).RelaunchAfter = 5 * time.Second
	if d := dn.Down(); !slices.Equal(d.Nodes, []string{"node-0", "other-follower"}) || d.For != 5*time.Second || !d.Majority {
		t.Errorf("power_loss Down %+v; want both nodes for 5s, a majority allowed", d)
	}
	if d := (&Kill{Node: "node-1"}).Down(); d.Majority || d.For != 0 {
		t.Errorf("kill Down %+v; want no majority, down for the rest of the run", d)
	}
}

// The language's kinds are indexed in the order declared; two of one name are a programming error.
func TestIndexKinds(t *testing.T) {
	byName, names := index([]Kind{func() Spec { return &GC{} }, func() Spec { return &StepDown{} }})
	if !slices.Equal(names, []string{"gc", "step_down"}) || len(byName) != 2 {
		t.Errorf("index: %v, %v", names, byName)
	}
	defer func() {
		if recover() == nil {
			t.Error("two kinds of one name did not panic")
		}
	}()
	index([]Kind{func() Spec { return &GC{} }, func() Spec { return &GC{} }})
}
