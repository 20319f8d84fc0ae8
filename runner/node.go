package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/agent/facts"
	"github.com/rig-dev/rig/agent/sample"
	"github.com/rig-dev/rig/agent/supervise"
	"github.com/rig-dev/rig/agent/tune"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"github.com/rig-dev/rig/rundir"
)

// recordFacts keeps each node's facts (kernel, CPU, memory, THP, disks, load) in the manifest,
// and returns them (the memory check reads them).
func (r *run) recordFacts(ctx context.Context) map[string]facts.Facts {
	facts := map[string]facts.Facts{}
	for _, n := range r.inv.Nodes {
		f, err := r.agent(n.Name).Facts(ctx)
		if err != nil {
			r.warn("facts from %s: %v", n.Name, err)
			continue
		}
		facts[n.Name] = f
	}
	r.updateManifest(func(m *rundir.Manifest) { m.Facts = facts })
	return facts
}

// applyTuning applies the playbook's kernel settings; the agent records every prior value
// before changing anything and reads each back, failing the run if one did not take.
func (r *run) applyTuning(ctx context.Context) error {
	if len(r.pb.Tuning) == 0 {
		return nil
	}
	tr := r.cl.Traits()
	if tr.TuneSkipped != "" {
		r.warn("tuning skipped: %s", tr.TuneSkipped)
		r.tuningSkipped = true
		r.updateManifest(func(m *rundir.Manifest) { m.TuningSkipped = tr.TuneSkipped })
		return nil
	}
	p := r.tuneProfile()
	r.updateManifest(func(m *rundir.Manifest) { m.Tuning = map[string]rundir.Tuning{} })
	for _, n := range tr.TuneNodes {
		rep, err := r.agent(n.Name).Tune(ctx, p)
		if err != nil {
			return fmt.Errorf("tune %s: %w", n.Name, err)
		}
		r.updateManifest(func(m *rundir.Manifest) { m.Tuning[n.Name] = rundir.Tuning{Applied: &rep} })
		r.progress("tuned %s: %d settings applied and read back", n.Name, len(rep.Changes))
	}
	return nil
}

// tuneProfile is the playbook's kernel settings as the agents apply them.
func (r *run) tuneProfile() tune.Profile {
	p := tune.Profile{}
	for _, s := range r.pb.Tuning {
		p[s.Key] = s.Value
	}
	return p
}

// revertTuning restores the recorded prior values.
func (r *run) revertTuning(ctx context.Context) {
	if len(r.pb.Tuning) == 0 || r.tuningSkipped {
		return
	}
	for _, n := range r.liveNodes(r.cl.Traits().TuneNodes) { // a lapsed node's agent reverted by itself
		rep, err := r.agent(n.Name).Revert(ctx)
		if err != nil {
			r.warn("revert tuning on %s: %v", n.Name, err)
			continue
		}
		r.updateManifest(func(m *rundir.Manifest) {
			if t, ok := m.Tuning[n.Name]; ok {
				t.Reverted = &rep
				m.Tuning[n.Name] = t
			}
		})
	}
}

// samplesName names this run's OS samples: an agent that served earlier runs (on a real cluster)
// keeps their files, so each run writes its own.
func (r *run) samplesName() string {
	n := "os-" + r.id
	if len(n) > 64 {
		n = n[:64]
	}
	return n
}

// startSamples starts the OS sampler on every node (disks, UDP errors, vmstat, load, the
// engine's and the agent's own CPU and RSS) for the whole run.
func (r *run) startSamples(ctx context.Context) {
	for _, n := range r.inv.Nodes {
		info, err := r.agent(n.Name).StartSamples(ctx, r.samplesRequest(n))
		if err != nil {
			r.warn("start OS samples on %s: %v", n.Name, err)
			continue
		}
		if info.RunQueue != "" {
			r.log.Info("run-queue waits", "node", n.Name, "how", info.RunQueue)
		}
	}
}

// samplesRequest is what node n samples for the run, at the start and again after a reboot.
func (r *run) samplesRequest(n inventory.Node) agent.SamplesRequest {
	req := agent.SamplesRequest{Name: r.samplesName(), Interval: "500ms", PIDFiles: samplePIDFiles(n), SchedInterval: sample.DefaultSchedInterval.String()}
	if r.pb.CauseSourcesOff() {
		req.SchedInterval = ""
	}
	// The pressure stalls are the kernel's: one agent per kernel reads them (on the local target
	// every node's would read the same files, and analysis takes one node's series for the machine).
	req.SchedNoPSI = !slices.ContainsFunc(r.cl.Traits().TuneNodes, func(k inventory.Node) bool { return k.Name == n.Name })
	return req
}

// samplePIDFiles are the processes a node's samples follow besides the agent (pid files in its
// agent folder): a server's engine, a client's probe run.
func samplePIDFiles(n inventory.Node) []string {
	if n.Role == inventory.RoleServer {
		return []string{supervise.PIDFile}
	}
	return []string{loadspec.PIDFile}
}

// stopSamples stops the samplers; their NDJSON is in the node folder (collected from remote
// nodes with everything else).
func (r *run) stopSamples(ctx context.Context) {
	for _, n := range r.liveNodes(r.inv.Nodes) {
		if _, err := r.agent(n.Name).StopSamples(ctx, r.samplesName()); err != nil {
			r.log.Warn("stop samples", "node", n.Name, "err", err)
		}
	}
}

// recordAgentCPU keeps each agent's average CPU share in the manifest: the rig's own overhead
// on the node, which the report shows beside the figures it could disturb.
func (r *run) recordAgentCPU() {
	cpu := map[string]rundir.CPUShare{}
	for _, n := range r.inv.Nodes {
		if share, ok := agentCPU(filepath.Join(r.dir, n.Name, rundir.SamplesDir, r.samplesName()+rundir.SamplesExt)); ok {
			cpu[n.Name] = share
		}
	}
	r.updateManifest(func(m *rundir.Manifest) { m.AgentCPU = cpu })
}

// agentCPU averages the agent's CPU share over a samples file.
func agentCPU(path string) (rundir.CPUShare, bool) {
	samples, _ := rundir.ReadSamplesFile(path)
	if len(samples) == 0 {
		return rundir.CPUShare{}, false
	}
	var share rundir.CPUShare
	for _, s := range samples {
		share.MeanPct += s.Agent.CPUPct
		share.MaxPct = max(share.MaxPct, s.Agent.CPUPct)
	}
	share.MeanPct /= float64(len(samples))
	return share, true
}
