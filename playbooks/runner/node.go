package runner

import (
	"context"
	"fmt"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/agent/tune"
	"github.com/rig-dev/rig/infra/inventory"
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
	if len(r.pb.Tuning) == 0 {
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
