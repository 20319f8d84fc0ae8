package actions

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/rundir"
)

// Partition cuts one server off from every other server and every client for a while: every
// raft peer link and client link to or from it stops forwarding (data on open connections is
// held, as a partition holds it in the sender's retransmissions; new connections are refused),
// then all of them are healed, on their own timer so the timeline goes on meanwhile. The engine
// process keeps running and the controller still reaches it through its agent, so the run sees
// what the isolated node does (a leader steps down once its lease runs out) while the others
// elect a new leader.
type Partition struct {
	Node string        `json:"node"` // leader | follower | other-follower | node-N
	For  time.Duration `json:"for"`
}

// The partition action's names in playbooks and events: the cut, and its scheduled heal.
const (
	ActPartition rundir.ActionName = "partition"
	ActHeal      rundir.ActionName = "heal"
)

// PartitionAction is the payload of partition and heal: a node cut off from (or healed back to)
// every other node and client. As is how the playbook named it, ForMs how long the cut lasts,
// Links how many links the target cut or healed (peer and client links, each direction of a pair
// its own link).
type PartitionAction struct {
	As    string  `json:"as,omitempty"`
	ForMs float64 `json:"for_ms,omitempty"`
	Links int     `json:"links"`
}

// PartitionOf is e's payload when e is a partition or its heal, else nil.
func PartitionOf(e rundir.Event) *PartitionAction {
	return payloadOf[PartitionAction](e, ActPartition, ActHeal)
}

func (*Partition) Kind() string                { return string(ActPartition) }
func (*Partition) EndEvent() rundir.ActionName { return ActHeal }
func (*Partition) Events() []EventKind {
	payload := func() any { return &PartitionAction{} }
	return []EventKind{{Name: ActPartition, Payload: payload, Moves: rundir.MovesIfLeader, Fault: partitionFault}, {Name: ActHeal, Payload: payload}}
}

func partitionFault(e rundir.Event) string {
	if p := PartitionOf(e); p != nil {
		return fmt.Sprintf("partition of %s for %v", e.Node, time.Duration(p.ForMs*1e6))
	}
	return ""
}
func (*Partition) Disrupts() string { return "partitions a server off" }
func (*Partition) Links() string    { return "partitions a server (cuts its peer and client links)" }

// Down counts the partitioned node as out of the majority until it is healed.
func (p *Partition) Down() Down {
	return Down{Nodes: []string{p.Node}, For: p.For, Takes: LayerLinks}
}

func (*Partition) Fields() []Field {
	return []Field{
		textField("node", CheckNodeForm, func(p *Partition) *string { return &p.Node }),
		durationField("for", time.Millisecond, units.MaxDuration, "e.g. 5s: how long the node stays cut off before its links heal",
			func(p *Partition) *time.Duration { return &p.For }),
	}
}

func (p *Partition) Complete(seen map[string]bool) []Problem {
	var out []Problem
	if !seen["node"] {
		out = append(out, problem("node", "missing", nil, "missing; want which server to cut off: %s or node-N", strings.Join(NodeRoles, ", ")))
	}
	if !seen["for"] {
		// Without a heal the servers never agree on a final state, which every run checks.
		out = append(out, problem("for", "missing", nil, "missing; want how long the node stays cut off, e.g. for: 5s (its links heal after it, inside the run)"))
	}
	return out
}

func (p *Partition) Check(c Context) []Problem {
	return problems(nodeProblem("node", p.Node, c),
		lateProblem("for", "heal-after-end", "the heal", "the links healed inside the run, so the servers can agree on a final state", p.For, c))
}

func (p *Partition) Describe(v Varied) string {
	s := fmt.Sprintf("partition %s from every server and client for %s", v.Value("node", p.Node), v.Value("for", units.FormatDuration(p.For)))
	if !v.Varies("for") {
		s += fmt.Sprintf(" (healed at +%s)", units.FormatDuration(v.At()+p.For))
	}
	return s
}

func (p *Partition) String() string { return fmt.Sprintf("partition %s for %s", p.Node, p.For) }

func (p *Partition) Run(ctx context.Context, env Env) error {
	lc, err := Need[LinkCutter](env, "partition")
	if err != nil {
		return err
	}
	name, err := env.ResolveNode(p.Node)
	if err != nil {
		return err
	}
	pa := &PartitionAction{As: p.Node, ForMs: float64(p.For) / 1e6}
	// The event is stamped before the cut: the fault's time is when it was asked for.
	at := time.Now()
	n, err := lc.Isolate(ctx, name)
	if err != nil {
		return fmt.Errorf("partition %s: %w", name, err)
	}
	pa.Links = n
	if err := record(env, at, name, ActPartition, rundir.MovesIfLeader, pa); err != nil {
		return err
	}
	env.Progress("partitioned %s (%s): %d links cut, healing in %s", name, p.Node, n, p.For)
	lastFor(ctx, env, p, at, p.For, func(ctx context.Context, early bool) (rundir.Event, error) {
		hat := time.Now()
		n, err := lc.Heal(ctx, name)
		if err != nil {
			return rundir.Event{}, fmt.Errorf("heal %s: %w", name, err)
		}
		env.Progress("healed %s: %d links%s", name, n, earlyNote(early))
		return NewEvent(hat, name, ActHeal, "", PartitionAction{As: p.Node, Links: n})
	})
	return nil
}
