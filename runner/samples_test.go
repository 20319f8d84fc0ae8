package runner

import (
	"slices"
	"testing"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/runner/launch"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/target/targettest"
)

// TestProbeRunFollowedBySamplers: the load generator's probe run writes its pid where the client
// node's samples request tells the agent to look (a relative pid file is in the agent's folder,
// NodePath), so the scheduler sampler records its threads' run-queue waits; a server's samples
// follow its engine.
func TestProbeRunFollowedBySamplers(t *testing.T) {
	c, err := (&targettest.Target{}).Start(t.Context(), target.StartOptions{RunDir: t.TempDir(), Servers: 1, Clients: 1})
	if err != nil {
		t.Fatal(err)
	}
	cl := c.(*targettest.Cluster)
	client := inventory.Node{Name: "client-0", Role: inventory.RoleClient}
	server := inventory.Node{Name: "node-0", Role: inventory.RoleServer}
	r := &run{pb: &playbooks.Playbook{}, cl: cl, client: client}
	pidFile := r.loadgenConfig().Probe.PIDFile
	if pidFile == "" {
		t.Fatal("the probe run's config names no pid file")
	}
	req := r.samplesRequest(client)
	if !slices.ContainsFunc(req.PIDFiles, func(f string) bool { return cl.NodePath(client, f) == pidFile }) {
		t.Errorf("client samples follow %v, want the probe run's pid file %s", req.PIDFiles, pidFile)
	}
	if req.SchedInterval == "" {
		t.Error("client samples have no scheduler sampler")
	}
	if got := r.samplesRequest(server).PIDFiles; slices.ContainsFunc(got, func(f string) bool { return cl.NodePath(server, f) == cl.NodePath(server, "loadgen.pid") }) || len(got) != 1 {
		t.Errorf("server samples follow %v, want its engine alone", got)
	}
}

// TestCauseSourcesOff: a playbook's cause_sources: off asks no node for scheduler samples and
// no engine for its pause record; on (the default) asks for both.
func TestCauseSourcesOff(t *testing.T) {
	server := inventory.Node{Name: "node-0", Role: inventory.RoleServer}
	for _, off := range []bool{false, true} {
		y := "name: t\nload: {probe_rate: 100/s}\nduration: 10s\n"
		if off {
			y += "cause_sources: off\n"
		}
		pb, err := playbooks.Parse("p.yaml", []byte(y), testDrivers)
		if err != nil {
			t.Fatal(err)
		}
		r := &run{pb: pb, cl: oneKernel(t)}
		if got := r.samplesRequest(server).SchedInterval; (got == "") != off {
			t.Errorf("cause sources off %v: sched interval %q", off, got)
		}
		req, err := launch.StartRequest(pb, engine.Config{Node: "node-0"}, "secret")
		if err != nil {
			t.Fatal(err)
		}
		if req.Config.CauseSourcesOff != off {
			t.Errorf("cause sources off %v: engine config cause_sources_off %v", off, req.Config.CauseSourcesOff)
		}
	}
}

func oneKernel(t *testing.T) *targettest.Cluster {
	t.Helper()
	c, err := (&targettest.Target{}).Start(t.Context(), target.StartOptions{RunDir: t.TempDir(), Servers: 3, Clients: 1})
	if err != nil {
		t.Fatal(err)
	}
	return c.(*targettest.Cluster)
}

// kernelPerNode is a cluster whose nodes each have a kernel of their own (as the SSH target's).
type kernelPerNode struct{ *targettest.Cluster }

func (c kernelPerNode) Traits() target.Traits {
	tr := c.Cluster.Traits()
	tr.TuneNodes = c.Inventory().Nodes
	return tr
}

// TestPressureStallsOncePerKernel: the pressure stalls are the kernel's, so where the nodes share
// one (the local target) only the agent that stands for the kernel reads them; where each node
// has its own, every node's does.
func TestPressureStallsOncePerKernel(t *testing.T) {
	one := oneKernel(t)
	nodes := one.Inventory().Nodes
	for _, c := range []struct {
		name string
		cl   target.Cluster
		want []bool // SchedNoPSI per node
	}{
		{"one kernel", one, []bool{false, true, true, true}},
		{"a kernel per node", kernelPerNode{one}, []bool{false, false, false, false}},
	} {
		r := &run{pb: &playbooks.Playbook{}, cl: c.cl}
		for i, n := range nodes {
			req := r.samplesRequest(n)
			if req.SchedInterval == "" || req.SchedNoPSI != c.want[i] {
				t.Errorf("%s: %s asks for scheduler samples every %q without pressure stalls %v, want %v", c.name, n.Name, req.SchedInterval, req.SchedNoPSI, c.want[i])
			}
		}
	}
}
