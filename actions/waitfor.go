package actions

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/rundir"
)

// DefaultWaitForTimeout is a wait_for's timeout when the playbook gives none.
const DefaultWaitForTimeout = 60 * time.Second

// WaitFor blocks the timeline until a node (default: every server) reaches a phase, and with
// StableLeader until every server is ready and the leader has not changed for that long (ready
// alone is sticky: it holds through an election).
type WaitFor struct {
	Phase        string        `json:"phase"` // an engine.Phases entry
	Node         string        `json:"node,omitempty"`
	Timeout      time.Duration `json:"timeout"`
	StableLeader time.Duration `json:"stable_leader,omitempty"`
}

// ActWaitFor is the wait_for action's name in playbooks and events.
const ActWaitFor rundir.ActionName = "wait_for"

// WaitForAction is the wait_for event's payload: the timeline held until the event's node (every
// server when it has none) is in Phase.
type WaitForAction struct {
	Phase string `json:"phase"`
}

func (*WaitFor) Kind() string { return string(ActWaitFor) }
func (*WaitFor) Events() []EventKind {
	return []EventKind{{Name: ActWaitFor, Payload: func() any { return &WaitForAction{} }}}
}
func (w *WaitFor) Awaits() (node, phase string) { return w.Node, w.Phase }

func (*WaitFor) Fields() []Field {
	return []Field{
		textField("phase", CheckPhase, func(w *WaitFor) *string { return &w.Phase }),
		textField("node", CheckNodeForm, func(w *WaitFor) *string { return &w.Node }),
		durationField("timeout", time.Millisecond, units.MaxDuration, "e.g. 60s",
			func(w *WaitFor) *time.Duration { return &w.Timeout }),
		durationField("stable_leader", 10*time.Millisecond, time.Hour, "e.g. 2s: how long the leader must not change",
			func(w *WaitFor) *time.Duration { return &w.StableLeader }),
	}
}

func (w *WaitFor) Complete(seen map[string]bool) []Problem {
	switch {
	case seen["stable_leader"] && (seen["phase"] && w.Phase != engine.PhaseReady || w.Node != ""):
		return []Problem{problem("stable_leader", "stable-leader", nil, "waits for every server ready and no leader change; want it without node, and with phase: ready or no phase")}
	case seen["stable_leader"] && !seen["phase"]:
		w.Phase = engine.PhaseReady // a stable leader needs every server ready
	case !seen["phase"]:
		return []Problem{problem("phase", "missing", nil, "missing; want one of %s, or stable_leader: 2s", strings.Join(engine.Phases, ", "))}
	}
	return nil
}

func (w *WaitFor) Check(c Context) []Problem {
	return problems(nodeProblem("node", w.Node, c))
}

func (w *WaitFor) Describe(v Varied) string {
	target := "every server"
	if w.Node != "" || v.Varies("node") {
		target = v.Value("node", w.Node)
	}
	timeout := v.Value("timeout", units.FormatDuration(w.Timeout))
	// The timeline ends with the load, so a wait never holds it past the run's end.
	if c := v.Context(); !v.Varies("timeout") && c.End > 0 && v.At()+w.Timeout > c.End {
		timeout += fmt.Sprintf(", cut when the load ends at +%s", units.FormatDuration(c.End))
	}
	if w.StableLeader > 0 {
		return fmt.Sprintf("wait until every server is ready and the leader unchanged for %s (timeout %s); later actions wait with it",
			v.Value("stable_leader", units.FormatDuration(w.StableLeader)), timeout)
	}
	return fmt.Sprintf("wait until %s is %s (timeout %s); later actions wait with it",
		target, v.Value("phase", w.Phase), timeout)
}

func (w *WaitFor) String() string {
	if w.StableLeader > 0 {
		return fmt.Sprintf("wait until every server is ready and the leader unchanged for %s (timeout %s)", w.StableLeader, w.Timeout)
	}
	return fmt.Sprintf("wait until %s is %s (timeout %s)", orAll(w.Node), w.Phase, w.Timeout)
}

func (w *WaitFor) Run(ctx context.Context, env Env) error {
	node := w.Node
	if node != "" {
		var err error
		if node, err = env.ResolveNode(node); err != nil {
			return err
		}
	}
	start := time.Now()
	if err := record(env, time.Time{}, node, ActWaitFor, "", WaitForAction{Phase: w.Phase}); err != nil {
		return err
	}
	deadline := start.Add(w.Timeout)
	if err := env.Wait(ctx, node, w.Phase, w.Timeout); err != nil {
		return err
	}
	if w.StableLeader > 0 {
		lw, err := Need[LeaderWatcher](env, "wait_for a stable leader")
		if err != nil {
			return err
		}
		if err := lw.WaitStableLeader(ctx, w.StableLeader, deadline); err != nil {
			return err
		}
		env.Progress("wait_for a stable leader (%s unchanged, every server ready): %s", w.StableLeader, time.Since(start).Round(time.Millisecond))
		return nil
	}
	env.Progress("wait_for %s %s: %s", orAll(node), w.Phase, time.Since(start).Round(time.Millisecond))
	return nil
}
