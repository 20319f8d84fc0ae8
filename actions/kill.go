package actions

import (
	"context"
	"fmt"
	"image/color"
	"strings"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/internal/ctxtime"
	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/rundir"
)

// DefaultSignal is a kill's signal when the playbook names none.
const DefaultSignal = "KILL"

// Kill stops a server's engine with a signal and optionally relaunches it on the same folder,
// on its own timer so the timeline goes on meanwhile.
type Kill struct {
	Node          string        `json:"node"`   // leader | follower | other-follower | node-N
	Signal        string        `json:"signal"` // KILL | TERM
	RelaunchAfter time.Duration `json:"relaunch_after,omitempty"`
}

// The kill action's names in playbooks and events: the kill, and a node's relaunch after it (or
// after a power loss, or a step-down by relaunch).
const (
	ActKill     rundir.ActionName = "kill"
	ActRelaunch rundir.ActionName = "relaunch"
)

// KillAction is the kill event's payload: a signal sent to a node; As is how the playbook named
// it (leader, follower...). PowerLoss marks the kill of a power_loss action: once the engine had
// exited, the node's disk model dropped every write since each file's last fsync (a note says how
// much). With Reboot no signal was sent: the node rebooted without sync (a stack), and notes give
// the boot it left and the one it came back in.
type KillAction struct {
	Signal    string `json:"signal"`
	As        string `json:"as,omitempty"`
	PowerLoss bool   `json:"power_loss,omitempty"`
	Reboot    bool   `json:"reboot,omitempty"`
}

// KillOf is e's payload when e is a kill, else nil.
func KillOf(e rundir.Event) *KillAction { return payloadOf[KillAction](e, ActKill) }

func (*Kill) Kind() string { return string(ActKill) }
func (*Kill) Events() []EventKind {
	return []EventKind{{Name: ActKill, Payload: func() any { return &KillAction{} }, Moves: rundir.MovesIfLeader,
		Marker: color.RGBA{R: 0xc0, G: 0x10, B: 0x10, A: 0xff}, Fault: killFault, NodePhase: rundir.PhaseDown,
		Down: killDown}, relaunchEvent}
}

// killDown: a power loss's kill events name it (its fault window is power_loss's).
func killDown(e rundir.Event) (kind, signal string) {
	k := KillOf(e)
	switch {
	case k == nil:
		return string(ActKill), ""
	case k.PowerLoss:
		return string(ActPowerLoss), k.Signal
	}
	return string(ActKill), k.Signal
}

func killFault(e rundir.Event) string {
	switch k := KillOf(e); {
	case k == nil:
		return ""
	case k.PowerLoss:
		return "power loss of " + e.Node
	default:
		return fmt.Sprintf("kill -%s of %s", k.Signal, e.Node)
	}
}

// relaunchEvent is the relaunch every kind that relaunches a node records (kill, power_loss, a
// step-down by relaunch).
var relaunchEvent = EventKind{Name: ActRelaunch, Marker: color.RGBA{R: 0xe0, G: 0x80, B: 0x00, A: 0xff}, NodePhase: engine.PhaseStarting}

func (*Kill) Disrupts() string { return "kills a server" }
func (k *Kill) Down() Down {
	return Down{Nodes: []string{k.Node}, For: k.RelaunchAfter, Takes: LayerEngine}
}

func (*Kill) Fields() []Field {
	return []Field{
		textField("node", CheckNodeForm, func(k *Kill) *string { return &k.Node }),
		textField("signal", CheckSignal, func(k *Kill) *string { return &k.Signal }),
		durationField("relaunch_after", time.Millisecond, units.MaxDuration, "e.g. 15s (leave it out to keep the node down)",
			func(k *Kill) *time.Duration { return &k.RelaunchAfter }),
	}
}

func (k *Kill) Complete(seen map[string]bool) []Problem {
	if !seen["node"] {
		return []Problem{problem("node", "missing", nil, "missing; want which server to kill: %s or node-N", strings.Join(NodeRoles, ", "))}
	}
	return nil
}

func (k *Kill) Check(c Context) []Problem {
	return problems(nodeProblem("node", k.Node, c),
		lateProblem("relaunch_after", "relaunch-after-end", "the relaunch", "the relaunch to happen inside the run", k.RelaunchAfter, c))
}

func (k *Kill) Describe(v Varied) string {
	s := fmt.Sprintf("kill %s with SIG%s", v.Value("node", k.Node), v.Value("signal", k.Signal))
	if varied := v.Varies("relaunch_after"); varied || k.RelaunchAfter > 0 {
		s += fmt.Sprintf(", relaunch after %s", v.Value("relaunch_after", units.FormatDuration(k.RelaunchAfter)))
		if !varied {
			s += fmt.Sprintf(" (at +%s)", units.FormatDuration(v.At()+k.RelaunchAfter))
		}
		return s
	}
	return s + ", no relaunch"
}

func (k *Kill) String() string {
	s := fmt.Sprintf("kill -%s %s", k.Signal, k.Node)
	if k.RelaunchAfter > 0 {
		s += fmt.Sprintf(", relaunch after %s", k.RelaunchAfter)
	}
	return s
}

func (k *Kill) Run(ctx context.Context, env Env) error {
	name, err := env.ResolveNode(k.Node)
	if err != nil {
		return err
	}
	if err := record(env, time.Time{}, name, ActKill, rundir.MovesIfLeader, KillAction{Signal: k.Signal, As: k.Node}); err != nil {
		return err
	}
	if err := env.Signal(ctx, name, k.Node, k.Signal); err != nil {
		return err
	}
	env.Progress("kill -%s %s (%s)", k.Signal, name, k.Node)
	if k.RelaunchAfter > 0 {
		relaunchLater(ctx, env, k.RelaunchAfter, []string{name}, "", nil)
	}
	return nil
}

// relaunchLater relaunches each of names after a wait, in the background, recording each
// relaunch as an event; cause ends its messages ("" or e.g. " after its power loss"). back, if
// not nil, runs first (rebooted nodes coming back): the relaunch waits for it, and for after
// counted from now, whichever ends later.
func relaunchLater(ctx context.Context, env Env, after time.Duration, names []string, cause string, back func(context.Context) error) {
	start := time.Now()
	env.Go(ctx, func(ctx context.Context) error {
		if back != nil {
			if err := back(ctx); err != nil {
				if ctx.Err() != nil {
					return nil // the run is over
				}
				return err
			}
		}
		if err := ctxtime.Sleep(ctx, time.Until(start.Add(after))); err != nil {
			return nil // the run is over: nothing to relaunch into
		}
		for _, name := range names {
			if err := record(env, time.Time{}, name, ActRelaunch, "", nil); err != nil {
				return err
			}
			if err := env.Relaunch(ctx, name); err != nil {
				return fmt.Errorf("relaunch %s%s: %w", name, cause, err)
			}
			env.Progress("relaunched %s%s", name, cause)
		}
		return nil
	})
}
