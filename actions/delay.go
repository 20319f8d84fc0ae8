package actions

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/linkproxy"
	"github.com/rig-dev/rig/rundir"
)

// Delay slows a server's links for a while: each way of every raft peer link and client link to
// or from it (or only the links between it and To) is delayed by Delay ± Jitter on top of what
// the placement gives them, then, For later, set back on their own timer so the timeline goes on
// meanwhile (without For, for the rest of the run). Each changed pair's round trip is measured
// through its link right after and recorded with the event: the effect, not only the request.
//
// There is no loss kind: the links are TCP proxies, and TCP loses no bytes once a proxy has read
// them. A proxy that "dropped" a chunk would have to stall the stream by a retransmission timeout
// it can only guess (the sender's RTO, which depends on its own RTT estimate and backoff), so
// what a run measured would be the guess, not a lossy network; docs/playbooks.md says so.
type Delay struct {
	Node   string        `json:"node"`         // leader | follower | other-follower | node-N
	To     string        `json:"to,omitempty"` // only the links between Node and To ("" every link of Node)
	Delay  time.Duration `json:"delay"`
	Jitter time.Duration `json:"jitter,omitempty"`
	For    time.Duration `json:"for,omitempty"` // 0: until the run ends
}

// The delay action's names in playbooks and events: the delay added, and taken off again.
const (
	ActDelay     rundir.ActionName = "delay"
	ActDelayHeal rundir.ActionName = "delay_heal"
)

// DelayAction is the payload of delay and delay_heal: a delay added to (or taken off) each way of
// a node's links: every peer and client link of it, or only those to To. As and To are how the
// playbook named the nodes ("" To: every link of the node); Links how many links changed; RTTs
// the round trip each changed pair measured through its link right after (as asked: probe.set_ns,
// and achieved).
type DelayAction struct {
	As       string                `json:"as,omitempty"`
	To       string                `json:"to,omitempty"`
	ToNode   string                `json:"to_node,omitempty"`
	DelayMs  float64               `json:"delay_ms"`
	JitterMs float64               `json:"jitter_ms,omitempty"`
	ForMs    float64               `json:"for_ms,omitempty"`
	Links    int                   `json:"links"`
	RTTs     []linkproxy.PairProbe `json:"rtts,omitempty"`
}

// DelayOf is e's payload when e is a delay or its delay_heal, else nil.
func DelayOf(e rundir.Event) *DelayAction { return payloadOf[DelayAction](e, ActDelay, ActDelayHeal) }

func (*Delay) Kind() string                { return string(ActDelay) }
func (*Delay) EndEvent() rundir.ActionName { return ActDelayHeal }
func (*Delay) Events() []EventKind {
	payload := func() any { return &DelayAction{} }
	return []EventKind{{Name: ActDelay, Payload: payload, Disturbs: true}, {Name: ActDelayHeal, Payload: payload}}
}
func (*Delay) Links() string { return "delays a server's links" }

// Touches: the links are the proxies', which stay up whatever happens to the nodes; a role still
// resolves through the leader.
func (d *Delay) Touches() Touch {
	t := Touch{Nodes: []string{d.Node}}
	if d.To != "" {
		t.Nodes = append(t.Nodes, d.To)
	}
	return t
}

func (*Delay) Fields() []Field {
	return []Field{
		textField("node", CheckNodeForm, func(d *Delay) *string { return &d.Node }),
		textField("to", CheckNodeForm, func(d *Delay) *string { return &d.To }),
		durationField("delay", time.Microsecond, 10*time.Second, "e.g. 5ms: added to each way of the links, so a round trip grows by twice it",
			func(d *Delay) *time.Duration { return &d.Delay }),
		durationField("jitter", 0, 10*time.Second, "and at most the delay, e.g. 500us: each chunk's added delay is drawn within ± it",
			func(d *Delay) *time.Duration { return &d.Jitter }),
		durationField("for", time.Millisecond, units.MaxDuration, "e.g. 5s: how long the links stay delayed (leave out: until the run ends)",
			func(d *Delay) *time.Duration { return &d.For }),
	}
}

func (d *Delay) Complete(seen map[string]bool) []Problem {
	var out []Problem
	if !seen["node"] {
		out = append(out, problem("node", "missing", nil, "missing; want which server's links to delay: %s or node-N", strings.Join(NodeRoles, ", ")))
	}
	if !seen["delay"] {
		out = append(out, problem("delay", "missing", nil, "missing; want the delay added to each way of the links, e.g. delay: 5ms"))
	}
	return out
}

func (d *Delay) Check(c Context) []Problem {
	out := problems(nodeProblem("node", d.Node, c), nodeProblem("to", d.To, c),
		lateProblem("for", "heal-after-end", "the end of the delay", "a delay that ends inside the run, or no for: (delayed until the run ends)", d.For, c))
	if d.To != "" && d.To == d.Node {
		out = append(out, problem("to", "to-self", []string{"@node"}, "%q is the node itself; want another server (or leave to: out to delay every link of %s)", d.To, d.Node))
	}
	if d.Jitter > d.Delay {
		out = append(out, problem("jitter", "jitter", []string{"@delay"}, "%s is more than the delay (%s); want at most the delay",
			units.FormatDuration(d.Jitter), units.FormatDuration(d.Delay)))
	}
	// The probe after the change holds the timeline: its round trips alone must fit in the time
	// the links stay delayed, or it measures past the end of the delay and of the run.
	if pairs, _, least, _ := d.probe(c); c.At < c.End && least > d.window(c) {
		w := d.window(c)
		most := w/time.Duration(pairs*DelayProbeRounds*2) - c.ZoneDelay
		floor := time.Duration(pairs*DelayProbeRounds) * 2 * (c.ZoneDelay + time.Microsecond)
		want := fmt.Sprintf("a window of at least %s (a longer for: or run): the placement's delay between zones alone makes the probe that long", units.FormatDuration(floor.Round(time.Millisecond)))
		if most >= time.Microsecond {
			want = fmt.Sprintf("delay at most %s here (or a longer for: or run)", units.FormatDuration(most.Truncate(time.Microsecond)))
		}
		out = append(out, problem("delay", "delay-probe", []string{"@for", "@at", "duration", "cluster.servers", "cluster.clients", "placement"},
			"the round-trip probe after the change measures %d round trips on each of up to %d pairs, at least %s at this delay, but the links stay delayed %s%s; want %s",
			DelayProbeRounds, pairs, units.FormatDuration(least), units.FormatDuration(w), d.windowEnd(c), want))
	}
	return out
}

// DelayProbeRounds is how many round trips the probe after a delay's change measures on each
// pair it changed (runner's env.Delay); the probe holds the timeline meanwhile.
const DelayProbeRounds = 5

// probe is what the round-trip probe after the change costs, by the playbook: pairs it measures
// at most (every peer link of node both ways and each client's, or the two between node and
// to), the longest round trip through one (twice the placement's and the added delay and
// jitter), the least time its round trips take, and its bound (linkproxy.ProbeTimeout a pair):
// what the plan shows and what a probe is given up after.
func (d *Delay) probe(c Context) (pairs int, rtt, least, bound time.Duration) {
	pairs = 2*max(c.Servers-1, 0) + c.Clients
	if d.To != "" {
		pairs = 2
	}
	rtt = 2 * (c.ZoneDelay + d.Delay + d.Jitter)
	least = time.Duration(pairs*DelayProbeRounds) * 2 * (c.ZoneDelay + d.Delay)
	return pairs, rtt, least, time.Duration(pairs) * linkproxy.ProbeTimeout(DelayProbeRounds, rtt)
}

// window is how long the links stay delayed: For, or the rest of the run.
func (d *Delay) window(c Context) time.Duration {
	if d.For > 0 {
		return min(d.For, c.End-c.At)
	}
	return c.End - c.At
}

func (d *Delay) shape() linkproxy.Shape { return linkproxy.Shape{Delay: d.Delay, Jitter: d.Jitter} }

func (d *Delay) Describe(v Varied) string {
	links := "every peer and client link of " + v.Value("node", d.Node)
	if d.To != "" || v.Varies("to") {
		links = "the links between " + v.Value("node", d.Node) + " and " + v.Value("to", d.To)
	}
	s := fmt.Sprintf("delay %s by %s each way", links, v.Value("delay", units.FormatDuration(d.Delay)))
	if d.Jitter > 0 || v.Varies("jitter") {
		s += " ± " + v.Value("jitter", units.FormatDuration(d.Jitter))
	}
	switch {
	case d.For == 0 && !v.Varies("for"):
		s += " until the run ends"
	case v.Varies("for"):
		s += " for " + v.Value("for", "")
	default:
		s += fmt.Sprintf(" for %s (set back at +%s)", units.FormatDuration(d.For), units.FormatDuration(v.At()+d.For))
	}
	if v.Varies("delay") || v.Varies("jitter") || v.Varies("to") {
		return s + fmt.Sprintf("; then a probe of %d round trips a changed pair, given up after %s a pair plus the round trips", DelayProbeRounds, units.FormatDuration(linkproxy.ProbeSlack))
	}
	pairs, _, least, bound := d.probe(v.Context())
	return s + fmt.Sprintf("; then a probe of %d round trips on each of up to %d pairs holds the timeline about %s, at most %s",
		DelayProbeRounds, pairs, units.FormatDuration(least), units.FormatDuration(bound))
}

// windowEnd says what ends the window, for messages.
func (d *Delay) windowEnd(c Context) string {
	if d.For > 0 && d.For < c.End-c.At {
		return " (for:)"
	}
	return " (to the end of the run)"
}

func (d *Delay) String() string {
	s := "delay " + d.Node
	if d.To != "" {
		s += " ↔ " + d.To
	}
	return s + " by " + d.shape().String()
}

func (d *Delay) Run(ctx context.Context, env Env) error {
	ls, err := Need[LinkShaper](env, "delay")
	if err != nil {
		return err
	}
	name, err := env.ResolveNode(d.Node)
	if err != nil {
		return err
	}
	da := &DelayAction{As: d.Node, To: d.To, DelayMs: ms(d.Delay), JitterMs: ms(d.Jitter), ForMs: ms(d.For)}
	var peers []string
	if d.To != "" {
		to, err := env.ResolveNode(d.To)
		if err != nil {
			return err
		}
		if to == name {
			return fmt.Errorf("delay %s ↔ %s: both are %s now; no link between a node and itself", d.Node, d.To, name)
		}
		peers, da.ToNode = []string{to}, to
	}
	// The event is stamped before the change: the fault's time is when it was asked for.
	at := time.Now()
	rtts, n, undo, err := ls.Delay(ctx, d.shape(), name, peers...)
	if err != nil {
		return fmt.Errorf("delay %s: %w", name, err)
	}
	da.Links, da.RTTs = n, rtts
	if err := record(env, at, name, ActDelay, "", da); err != nil {
		return err
	}
	var got []string
	for _, r := range rtts {
		got = append(got, fmt.Sprintf("%s → %s %v", r.From, r.To, r.Probe.Median.Round(10*time.Microsecond)))
	}
	env.Progress("delayed %d links of %s (%s) by %s each way; round trips now %s", n, name, d.Node, d.shape(), strings.Join(got, ", "))
	if d.For == 0 {
		return nil // the target closes every link at its stop
	}
	lastFor(ctx, env, d, at, d.For, func(_ context.Context, early bool) (rundir.Event, error) {
		hat := time.Now()
		n := undo()
		env.Progress("delay of %s's links taken off: %d links%s", name, n, earlyNote(early))
		return NewEvent(hat, name, ActDelayHeal, "", DelayAction{As: d.Node, To: d.To, ToNode: da.ToNode, DelayMs: da.DelayMs, JitterMs: da.JitterMs, Links: n})
	})
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
