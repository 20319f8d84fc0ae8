package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/agent/supervise"
	"github.com/rig-dev/rig/agent/tune"
	"github.com/rig-dev/rig/inventory"
)

type agentTransition = agent.Transition

// recordFacts keeps each node's facts (kernel, CPU, memory, THP, disks, load) in the manifest.
func (r *run) recordFacts(ctx context.Context) {
	r.man.Facts = map[string]any{}
	for _, n := range r.inv.Nodes {
		f, err := r.agents[n.Name].Facts(ctx)
		if err != nil {
			r.warn("facts from %s: %v", n.Name, err)
			continue
		}
		r.man.Facts[n.Name] = f
	}
	r.saveManifest()
}

// tuneNodes are the agents that apply kernel tuning: every node on a real cluster, but only one
// on the local target, where all nodes share one kernel (several agents recording "prior"
// values of the same setting would revert to each other's changes).
func (r *run) tuneNodes() []inventory.Node {
	if r.inv.Target == "local" {
		return r.inv.Nodes[:1]
	}
	return r.inv.Nodes
}

// applyTuning applies the playbook's kernel settings; the agent records every prior value
// before changing anything and reads each back, failing the run if one did not take.
func (r *run) applyTuning(ctx context.Context) error {
	if len(r.pb.Tuning) == 0 {
		return nil
	}
	if r.inv.Target == "local" && !r.opts.TuneLocal {
		r.warn("tuning skipped: on the local target it would change this machine's own kernel settings (rig run --tune-local allows it; they are reverted at the end)")
		r.tuningSkipped = true
		return nil
	}
	p := tune.Profile{}
	for _, s := range r.pb.Tuning {
		p[s.Key] = s.Value
	}
	r.man.Tuning = map[string]any{}
	for _, n := range r.tuneNodes() {
		rep, err := r.agents[n.Name].Tune(ctx, p)
		if err != nil {
			return fmt.Errorf("tune %s: %w", n.Name, err)
		}
		r.man.Tuning[n.Name] = map[string]any{"applied": rep}
		r.progress("tuned %s: %d settings applied and read back", n.Name, len(rep.Changes))
	}
	r.saveManifest()
	return nil
}

// revertTuning restores the recorded prior values.
func (r *run) revertTuning(ctx context.Context) {
	if len(r.pb.Tuning) == 0 || r.tuningSkipped {
		return
	}
	for _, n := range r.tuneNodes() {
		rep, err := r.agents[n.Name].Revert(ctx)
		if err != nil {
			r.warn("revert tuning on %s: %v", n.Name, err)
			continue
		}
		if m, ok := r.man.Tuning[n.Name].(map[string]any); ok {
			m["reverted"] = rep
		}
	}
	r.saveManifest()
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
		req := agent.SamplesRequest{Name: r.samplesName(), Interval: "500ms"}
		if n.Role == inventory.RoleServer {
			req.PIDFiles = []string{supervise.PIDFile}
		}
		if _, err := r.agents[n.Name].StartSamples(ctx, req); err != nil {
			r.warn("start OS samples on %s: %v", n.Name, err)
		}
	}
}

// stopSamples stops the samplers; their NDJSON is in the node folder (collected from remote
// nodes with everything else).
func (r *run) stopSamples(ctx context.Context) {
	for _, n := range r.inv.Nodes {
		if _, err := r.agents[n.Name].StopSamples(ctx, r.samplesName()); err != nil {
			r.log.Warn("stop samples", "node", n.Name, "err", err)
		}
	}
}

// recordAgentCPU keeps each agent's average CPU share in the manifest: the rig's own overhead
// on the node (DESIGN 6).
func (r *run) recordAgentCPU() {
	cpu := map[string]any{}
	for _, n := range r.inv.Nodes {
		if avg, max, ok := agentCPU(filepath.Join(r.dir, n.Name, "samples", r.samplesName()+".ndjson")); ok {
			cpu[n.Name] = map[string]float64{"mean_pct": avg, "max_pct": max}
		}
	}
	r.man.AgentCPU = cpu
}

// agentCPU averages the agent's CPU share over a samples file.
func agentCPU(path string) (mean, max float64, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	var n int
	for {
		var s struct {
			Agent struct {
				CPUPct float64 `json:"cpu_pct"`
			} `json:"agent"`
		}
		if dec.Decode(&s) != nil {
			break
		}
		mean += s.Agent.CPUPct
		max = math.Max(max, s.Agent.CPUPct)
		n++
	}
	if n == 0 {
		return 0, 0, false
	}
	return mean / float64(n), max, true
}
