package actions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/rundir"
)

// DefaultPowerLossNodes are the servers a power loss takes when the playbook names none: a
// majority of three, so what the survivors hold is not enough to serve.
const DefaultPowerLossNodes = "leader+follower"

// PowerLoss cuts the power of servers at once, as a correlated failure (one rack, one zone)
// does. On the local target each engine is killed and, once it has exited, its disk model drops
// every write since each file's last fsync (diskmodel/fusefs, as LazyFS does for Jepsen); the
// playbook needs a disk: block. On a stack each node reboots without sync, which loses what its
// page cache held (docs/disks.md); the run waits for it to come back. Either way at sync level 0
// what was acknowledged may be gone. The power comes back RelaunchAfter later (on a stack, or
// once the nodes are back, whichever is later): the engines are started again on what their
// disks kept. Unlike kill it may take a majority down: that is the failure it models.
//
// Unsynced "keep" kills the same servers the same way and drops nothing: a crash of the processes
// only (kill -9 of a majority, which the kill kind refuses), whose writes the page cache keeps —
// the control for what the power loss itself costs.
type PowerLoss struct {
	Nodes         string        `json:"nodes"` // node references joined by +: leader+follower, node-0+node-2
	RelaunchAfter time.Duration `json:"relaunch_after"`
	Unsynced      string        `json:"unsynced"` // drop (a power loss) | keep (the processes crash, the disks keep everything)
}

// What a power loss does with the writes a server's disk holds unsynced.
const (
	UnsyncedDrop = "drop"
	UnsyncedKeep = "keep"
)

// ActPowerLoss is the power_loss action's name in playbooks; its events are kills
// (KillAction.PowerLoss) and relaunches.
const ActPowerLoss rundir.ActionName = "power_loss"

func (*PowerLoss) Kind() string     { return string(ActPowerLoss) }
func (*PowerLoss) Disrupts() string { return "cuts the power of servers" }

// Down counts the servers as down until the power comes back and they are relaunched (on a stack
// that is when they are back from their reboot, if later: the nominal offset is the earliest).
// It may take a majority down; all of them needs the playbook's allow_all_down.
func (p *PowerLoss) Down() Down {
	takes := LayerHost
	if p.Unsynced == UnsyncedKeep {
		takes = LayerEngine // the processes crash; the hosts keep running
	}
	return Down{Nodes: nodeList(p.Nodes), For: p.RelaunchAfter, Majority: true, Takes: takes}
}

func (p *PowerLoss) CutsPower() (string, bool) {
	return "cuts the power of servers", p.Unsynced != UnsyncedKeep
}

func (*PowerLoss) Fields() []Field {
	return []Field{
		textField("nodes", checkNodeList, func(p *PowerLoss) *string { return &p.Nodes }),
		durationField("relaunch_after", time.Millisecond, units.MaxDuration, "e.g. 2s: when the power comes back",
			func(p *PowerLoss) *time.Duration { return &p.RelaunchAfter }),
		textField("unsynced", func(s string) error {
			if s != UnsyncedDrop && s != UnsyncedKeep {
				return fmt.Errorf("%q: want %s (a power loss: unsynced writes are lost) or %s (the processes crash, the disks keep every write)", s, UnsyncedDrop, UnsyncedKeep)
			}
			return nil
		}, func(p *PowerLoss) *string { return &p.Unsynced }),
	}
}

// nodeList splits a + list of node references.
func nodeList(s string) []string { return strings.Split(s, "+") }

func checkNodeList(s string) error {
	seen := map[string]bool{}
	for _, ref := range nodeList(s) {
		if err := CheckNodeForm(ref); err != nil {
			return fmt.Errorf("%w (several joined by +, e.g. %s)", err, DefaultPowerLossNodes)
		}
		if seen[ref] {
			return fmt.Errorf("%q is named twice in %q; want each server once", ref, s)
		}
		seen[ref] = true
	}
	return nil
}

func (p *PowerLoss) Complete(seen map[string]bool) []Problem {
	if !seen["relaunch_after"] {
		return []Problem{problem("relaunch_after", "missing", nil, "missing; want when the power comes back, e.g. 2s (the servers are relaunched on what their disks kept)")}
	}
	return nil
}

func (p *PowerLoss) Check(c Context) []Problem {
	var out []Problem
	if checkNodeList(p.Nodes) == nil {
		refs := nodeList(p.Nodes)
		for _, ref := range refs {
			out = append(out, problems(nodeProblem("nodes", ref, c))...)
		}
		if len(refs) > c.Servers {
			out = append(out, problem("nodes", "node", []string{"cluster.servers"}, "names %d servers; the cluster has %d", len(refs), c.Servers))
		}
	}
	return append(out, problems(lateProblem("relaunch_after", "relaunch-after-end", "the power coming back", "it back inside the run", p.RelaunchAfter, c))...)
}

func (p *PowerLoss) Describe(v Varied) string {
	s := fmt.Sprintf("power loss of %s (unsynced writes: %s), power back after %s", v.Value("nodes", p.Nodes),
		v.Value("unsynced", p.Unsynced), v.Value("relaunch_after", units.FormatDuration(p.RelaunchAfter)))
	if !v.Varies("relaunch_after") {
		s += fmt.Sprintf(" (at +%s)", units.FormatDuration(v.At()+p.RelaunchAfter))
	}
	return s
}

func (p *PowerLoss) String() string {
	return fmt.Sprintf("power loss of %s (unsynced writes: %s), back after %s", p.Nodes, p.Unsynced, p.RelaunchAfter)
}

func (p *PowerLoss) Run(ctx context.Context, env Env) error {
	// Every reference resolves against the cluster as it is before anything loses power.
	refs := nodeList(p.Nodes)
	names := make([]string, len(refs))
	for i, ref := range refs {
		name, err := env.ResolveNode(ref)
		if err != nil {
			return err
		}
		if slices.Contains(names[:i], name) {
			return fmt.Errorf("power loss: %s and %s are both %s now; want distinct servers", refs[slices.Index(names[:i], name)], ref, name)
		}
		names[i] = name
	}
	if rb, ok := env.(NodeRebooter); ok && p.Unsynced != UnsyncedKeep && rb.Reboots() {
		return p.reboot(ctx, env, rb, refs, names)
	}
	for i, name := range names {
		if err := record(env, time.Time{}, name, ActKill, rundir.MovesIfLeader,
			KillAction{Signal: "KILL", As: refs[i], PowerLoss: p.Unsynced != UnsyncedKeep}); err != nil {
			return err
		}
		if err := env.Signal(ctx, name, refs[i], "KILL"); err != nil {
			return err
		}
	}
	for _, name := range names {
		if p.Unsynced == UnsyncedKeep {
			env.Progress("%s: killed; its disk keeps every write (unsynced: keep)", name)
			continue
		}
		dl, err := Need[DiskPowerLosser](env, "power loss of "+name)
		if err != nil {
			return err
		}
		d, err := dl.PowerLoss(ctx, name)
		if err != nil {
			return fmt.Errorf("power loss of %s: %w", name, err)
		}
		msg := fmt.Sprintf("power loss: %d files reverted to their last fsync, %s unsynced dropped", d.Files, units.FormatSize(d.Bytes))
		if err := env.Record(rundir.Event{Node: name, Note: &rundir.Note{Text: msg}}); err != nil {
			return err
		}
		env.Progress("%s: %s", name, msg)
	}
	relaunchLater(ctx, env, p.RelaunchAfter, names, " after its power loss", nil)
	return nil
}

// reboot cuts the power of a stack's nodes, one right after the other, and waits beside the
// timeline for them to come back, then relaunches their engines.
func (p *PowerLoss) reboot(ctx context.Context, env Env, rb NodeRebooter, refs, names []string) error {
	old := make([]string, len(names))
	for i, name := range names {
		if err := record(env, time.Time{}, name, ActKill, rundir.MovesIfLeader,
			KillAction{As: refs[i], PowerLoss: true, Reboot: true}); err != nil {
			return err
		}
		boot, err := rb.CutPower(ctx, name)
		if err != nil {
			return fmt.Errorf("power loss of %s: %w", name, err)
		}
		old[i] = boot
	}
	back := func(ctx context.Context) error {
		errs := make([]error, len(names))
		var wg sync.WaitGroup
		for i, name := range names {
			wg.Go(func() {
				boot, err := rb.AwaitBoot(ctx, name, old[i])
				if err != nil {
					errs[i] = fmt.Errorf("power loss of %s: %w", name, err)
					return
				}
				errs[i] = env.Record(rundir.Event{Node: name, Note: &rundir.Note{
					Text: fmt.Sprintf("power loss: rebooted without sync, from boot %s to boot %s", old[i], boot)}})
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	relaunchLater(ctx, env, p.RelaunchAfter, names, " after its power loss", back)
	return nil
}
