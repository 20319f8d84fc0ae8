package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/runner/launch"
	"github.com/rig-dev/rig/target"
)

// checkPowerCuts refuses, before anything starts, a power_loss the target cannot carry out: one
// on a target that cannot cut its servers' power, one without the disk: block a disk-model
// target needs, and a disk: block on a target whose nodes reboot instead (it has no disk model).
// A power_loss with unsynced: keep only kills the engines, which every target can.
func checkPowerCuts(plan *playbooks.Plan, t target.Target) []error {
	for _, pr := range plan.Runs {
		pb := pr.Playbook
		for i, a := range pb.Timeline {
			pc, ok := a.Spec.(actions.PowerCutter)
			if !ok {
				continue
			}
			what, cuts := pc.CutsPower()
			if !cuts {
				continue
			}
			entry := at(a.Pos) + fmt.Sprintf("timeline[%d] %s (%s) in run %d", i, a.Kind, what, pr.Index)
			tc, ok := t.(target.PowerCutter)
			if !ok {
				return []error{fmt.Errorf("%s: target %s cannot cut its servers' power; run it on the local target with a disk: block, or on a stack", entry, t.Name())}
			}
			switch how := tc.PowerCuts(); {
			case how.How == "":
				return []error{fmt.Errorf("%s: %s; or give it unsynced: keep (a kill -9 of the same servers)", entry, how.Refused)}
			case how.DiskModel && pb.Disk.Zero():
				return []error{fmt.Errorf("%s: on target %s a power loss %s, which needs a disk model under the servers' data: give the playbook a disk: block (docs/disks.md), e.g. disk: {sync_latency: 2ms}",
					entry, t.Name(), how.How)}
			case !how.DiskModel && !pb.Disk.Zero():
				return []error{fmt.Errorf("%s: on target %s a power loss %s; disk: (%s) is a disk model, which it cannot mount (its disk is its data volume): leave disk: out",
					entry, t.Name(), how.How, pb.Disk)}
			}
		}
	}
	return nil
}

// Reboots: a power loss reboots the nodes when the cluster can and no disk model is asked for
// (checkPowerCuts refused the other cases before the run started).
func (e env) Reboots() bool {
	_, ok := e.r.cl.(target.Rebooter)
	return ok && e.r.pb.Disk.Zero()
}

// CutPower counts node down and killed by the timeline, pauses what the reboot will interrupt
// (its lease renewals, its watcher), has the target reboot it, and records its engine down: no
// agent is left to report the exit.
func (e env) CutPower(ctx context.Context, node string) (string, error) {
	r := e.r
	rb, ok := r.cl.(target.Rebooter)
	n, found := r.inv.Node(node)
	if !ok || !found {
		return "", fmt.Errorf("the cluster of %s cannot reboot %s", r.opts.Target.Name(), node)
	}
	r.mu.Lock()
	r.killLocked(node, true)
	r.notifyLocked()
	r.mu.Unlock()
	boot, err := rb.PowerCut(ctx, n)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	from := r.srv(node).status.Phase
	r.mu.Unlock()
	r.onTransition(node, rundir.Transition{T: time.Now().Add(r.srv(node).offset), Kind: rundir.TransPhase, From: from, To: rundir.PhaseDown})
	msg := fmt.Sprintf("power cut in boot %s: rebooting without sync; its lease renewals wait until it is back", boot)
	if err := r.ev.Add(rundir.Event{Node: node, Note: &rundir.Note{Text: msg}}); err != nil {
		return "", err
	}
	r.progress("%s: %s", node, msg)
	return boot, nil
}

// AwaitBoot waits for node to come back in another boot with a new agent, and puts back what
// the reboot took: the run's lease on the agent (then renewals resume), the data volume's mount,
// the kernel tuning, the OS samples (appended to the same file), and the watcher (on the new
// agent's journal). Relaunch then starts the engine afresh.
func (e env) AwaitBoot(ctx context.Context, node, old string) (string, error) {
	r := e.r
	rb := r.cl.(target.Rebooter)
	n, _ := r.inv.Node(node)
	got, err := rb.AwaitBoot(ctx, n, old, target.RebootOptions{Timeout: r.opts.RebootTimeout, Progress: r.progress})
	if err != nil {
		return "", err
	}
	c := r.agent(node)
	sent := time.Now()
	if _, err := c.Lease(ctx, r.opts.LeaseTTL); err != nil {
		return "", fmt.Errorf("claim %s's new agent for this run: %w", node, err)
	}
	var redone []string
	if len(n.DataVolumes()) > 0 {
		v, err := r.dataVolume(n)
		if err != nil {
			return "", err
		}
		mp := n.MountPoint(r.opts.DataMount, v)
		if _, err := MountVolume(ctx, c, v, mp, r.opts.DataFS); err != nil {
			return "", fmt.Errorf("mount %s's data volume %s again after its reboot: %w", node, v.Name, err)
		}
		redone = append(redone, "data volume "+v.Name+" mounted on "+mp)
	}
	if len(r.pb.Tuning) > 0 && !r.tuningSkipped && slices.ContainsFunc(r.cl.Traits().TuneNodes, func(t inventory.Node) bool { return t.Name == node }) {
		rep, err := c.Tune(ctx, r.tuneProfile())
		if err != nil {
			return "", fmt.Errorf("tune %s again after its reboot (it reverted the kernel settings): %w", node, err)
		}
		redone = append(redone, fmt.Sprintf("tuning applied again (%d settings; the reboot had reverted them)", len(rep.Changes)))
	}
	if _, err := c.StartSamples(ctx, r.samplesRequest(n)); err != nil {
		r.warn("start OS samples on %s again after its reboot: %v", node, err)
	}
	var since uint64
	if st, err := c.EngineStatus(ctx); err == nil {
		since = st.LastSeq
	}
	r.mu.Lock()
	r.srv(node).cameBack(sent, since)
	r.notifyLocked()
	r.mu.Unlock()
	ssh := "SSH answered throughout"
	if got.SeenDown {
		ssh = "SSH unreachable meanwhile"
	}
	msg := fmt.Sprintf("back after %s in boot %s (%s): agent started (pid %d), lease claimed again", got.Back.Round(time.Millisecond), got.NewBoot, ssh, got.Agent.PID)
	for _, d := range redone {
		msg += ", " + d
	}
	if err := r.ev.Add(rundir.Event{Node: node, Note: &rundir.Note{Text: msg}}); err != nil {
		return "", err
	}
	r.progress("%s: %s", node, msg)
	return got.NewBoot, nil
}

// leasePaused reports whether node's lease renewals are paused (its node is rebooting: the lease
// went with the agent), and takes the time a claim after the reboot was sent, if one was.
func (r *run) leasePaused(node string) (paused bool, reclaimed time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.srv(node).leasePaused()
}

// rewatchFrom says whether node's watcher must wait (its node is rebooting) or start over from a
// new agent's journal (ok with the sequence number to follow).
func (r *run) rewatchFrom(node string) (wait bool, since uint64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.srv(node).rewatchFrom()
}

// errNotRebooted is a relaunch of an engine whose agent is the one that started it.
var errNotRebooted = errors.New("not rebooted")

// startAfresh starts node's engine anew when its node rebooted since its last launch (the new
// agent knows no engine to relaunch), on the config and folder it had.
func (r *run) startAfresh(ctx context.Context, node string) error {
	r.mu.Lock()
	fresh := r.srv(node).startFresh()
	r.mu.Unlock()
	if !fresh {
		return errNotRebooted
	}
	req, err := launch.StartRequest(r.pb, r.srv(node).cfg, r.secret)
	if err != nil {
		return fmt.Errorf("start engine on %s: %w", node, err)
	}
	return r.agent(node).StartEngine(ctx, req)
}
