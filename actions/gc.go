package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// ActGC is the gc action's name in playbooks and events.
const ActGC rundir.ActionName = "gc"

// EngineCaller is a kind that calls an optional admin path of the engine (engine.AdminGC): the
// playbook's engine must offer it (driver.AdminOfferer, or engine.admin_gc for a command-driven
// one), which rig validate checks before anything runs.
type EngineCaller interface {
	Calls() (path string)
}

// GC has a server's engine collect its garbage now (POST engine.AdminGC): a GC pause provoked
// on purpose, whose latency spike the analysis names as `gc` (docs/results.md).
type GC struct {
	Node string `json:"node"` // leader | follower | other-follower | node-N
}

// GCAction is the gc action's event payload: the node reference and the engine's answer. The
// event is stamped when the call was made.
type GCAction struct {
	As string `json:"as"`
	engine.GCAnswer
}

// GCOf is e's payload when e is a gc action, else nil.
func GCOf(e rundir.Event) *GCAction { return payloadOf[GCAction](e, ActGC) }

func (*GC) Kind() string { return string(ActGC) }
func (*GC) Events() []EventKind {
	return []EventKind{{Name: ActGC, Payload: func() any { return &GCAction{} }, Collected: gcCollected}}
}

func gcCollected(e rundir.Event) (engine.GCAnswer, bool) {
	if a := GCOf(e); a != nil && e.Action.Payload != nil {
		return a.GCAnswer, true
	}
	return engine.GCAnswer{}, false
}
func (*GC) Calls() string { return engine.AdminGC }

// Touches: the call reaches the node's engine through its agent, so a partitioned node takes it.
func (g *GC) Touches() Touch { return Touch{Nodes: []string{g.Node}, Needs: LayerEngine} }

func (*GC) Fields() []Field {
	return []Field{textField("node", CheckNodeForm, func(g *GC) *string { return &g.Node })}
}

func (g *GC) Check(c Context) []Problem { return problems(nodeProblem("node", g.Node, c)) }

func (g *GC) Describe(v Varied) string {
	return fmt.Sprintf("collect the garbage of %s now (a GC pause on purpose)", v.Value("node", g.Node))
}

func (g *GC) String() string { return "gc on " + g.Node }

func (g *GC) Run(ctx context.Context, env Env) error {
	name, err := env.ResolveNode(g.Node)
	if err != nil {
		return err
	}
	t0 := time.Now()
	body, err := env.Admin(ctx, name, engine.AdminGC)
	if err != nil {
		return fmt.Errorf("gc on %s: %w", name, err)
	}
	p := GCAction{As: g.Node}
	if err := json.Unmarshal(body, &p.GCAnswer); err != nil {
		return fmt.Errorf("gc answer of %s %q: %w", name, body, err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("gc event: %w", err)
	}
	if err := env.Record(rundir.Event{T: t0, Node: name, Action: &rundir.Action{Name: ActGC, Payload: b}}); err != nil {
		return err
	}
	env.Progress("gc on %s: %d collection(s), %.1f ms paused, %.1f ms in all", name, p.Collections, p.PauseMs, p.WallMs)
	return nil
}
