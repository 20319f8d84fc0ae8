package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/loadgen"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
)

// action is one thing the timeline does to the cluster. Each kind is a small type, in the way
// Jepsen's nemeses are: it checks its own settings before anything starts, runs against the
// run, and describes itself in one line (progress lines and errors use it).
type action interface {
	check(servers int) error
	run(ctx context.Context, r *run) error
	String() string
}

// step is an action at its offset from load start.
type step struct {
	at time.Duration
	do action
}

// newTimeline turns the playbook's timeline into actions, checking each.
func newTimeline(pb *playbooks.Playbook) ([]step, error) {
	var out []step
	var errs []error
	for i, a := range pb.Timeline {
		act, err := newAction(a)
		if err == nil {
			err = act.check(pb.Cluster.Servers)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("timeline[%d] %s: %w", i, a.Kind, err))
			continue
		}
		out = append(out, step{at: a.At, do: act})
	}
	return out, errors.Join(errs...)
}

// newAction is the one place that knows the playbook's action kinds.
func newAction(a playbooks.Action) (action, error) {
	switch {
	case a.Kind == playbooks.ActSnapshot:
		return snapshot{}, nil
	case a.Kind == playbooks.ActStepDown:
		return stepDown{}, nil
	case a.Kind == playbooks.ActKill && a.Kill != nil:
		return kill{*a.Kill}, nil
	case a.Kind == playbooks.ActBurst && a.Burst != nil:
		return burst{*a.Burst}, nil
	case a.Kind == playbooks.ActWaitFor && a.WaitFor != nil:
		return waitFor{*a.WaitFor}, nil
	}
	return nil, fmt.Errorf("unknown action %q (or its settings are missing)", a.Kind)
}

// snapshot asks the leader for a cluster-wide snapshot at one log index.
type snapshot struct{}

func (snapshot) check(int) error { return nil }
func (snapshot) String() string  { return "snapshot on the leader" }

func (snapshot) run(ctx context.Context, r *run) (err error) {
	leader := r.leader()
	if leader == "" {
		return fmt.Errorf("no leader to snapshot on")
	}
	// The event is stamped with the request's time and written once the index is known.
	act := &rundir.SnapshotAction{Leader: leader}
	ev := rundir.Event{T: time.Now(), Node: leader, Action: &rundir.Action{Name: rundir.ActSnapshot, Snapshot: act}}
	defer func() {
		if aerr := r.ev.Add(ev); err == nil {
			err = aerr
		}
	}()
	body, err := r.agent(leader).EngineAdmin(ctx, "/snapshot")
	if err != nil {
		return err
	}
	var s engine.Snapshot
	if err := json.Unmarshal(body, &s); err != nil {
		return fmt.Errorf("snapshot answer %q: %w", body, err)
	}
	act.Index, act.LeaderTakeMs = &s.Index, &s.TakeMs
	r.progress("snapshot at index %d: leader %s took %.1f ms (%d orders, %d bytes, %d syncs)", s.Index, leader, s.TakeMs, s.Orders, s.Bytes, s.Syncs)
	return nil
}

// stepDown asks the leader to hand leadership over gracefully.
type stepDown struct{}

func (stepDown) check(int) error { return nil }
func (stepDown) String() string  { return "step the leader down" }

func (stepDown) run(ctx context.Context, r *run) error {
	leader := r.leader()
	if leader == "" {
		return fmt.Errorf("no leader to step down")
	}
	if err := r.ev.Add(rundir.Event{Node: leader, Action: &rundir.Action{Name: rundir.ActStepDown}}); err != nil {
		return err
	}
	if _, err := r.agent(leader).EngineAdmin(ctx, "/step-down"); err != nil {
		return err
	}
	r.progress("step-down requested on %s", leader)
	return nil
}

// kill signals a server's engine and, with relaunch_after, relaunches it on its own timer so the
// timeline goes on meanwhile.
type kill struct{ playbooks.Kill }

func (k kill) check(servers int) error {
	if k.RelaunchAfter < 0 {
		return fmt.Errorf("relaunch_after %s is negative", k.RelaunchAfter)
	}
	return errors.Join(playbooks.CheckNodeRef(k.Node, servers), playbooks.CheckSignal(k.Signal))
}

func (k kill) String() string {
	s := fmt.Sprintf("kill -%s %s", k.Signal, k.Node)
	if k.RelaunchAfter > 0 {
		s += fmt.Sprintf(", relaunch after %s", k.RelaunchAfter)
	}
	return s
}

func (k kill) run(ctx context.Context, r *run) error {
	name, err := r.resolveNode(k.Node)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.down[name], r.killed[name], r.lastKilled = true, true, name
	r.notifyLocked()
	r.mu.Unlock()
	if err := r.ev.Add(rundir.Event{Node: name, Action: &rundir.Action{Name: rundir.ActKill, Kill: &rundir.KillAction{Signal: k.Signal, As: k.Node}}}); err != nil {
		return err
	}
	if err := r.agent(name).Signal(ctx, k.Signal); err != nil {
		return err
	}
	r.progress("kill -%s %s (%s)", k.Signal, name, k.Node)
	if k.RelaunchAfter > 0 {
		r.async(ctx, relaunch{node: name, after: k.RelaunchAfter})
	}
	return nil
}

// relaunch starts a killed server's engine again on the same folder, after a delay. A kill
// schedules it; it is not a playbook entry of its own.
type relaunch struct {
	node  string
	after time.Duration
}

func (relaunch) check(int) error  { return nil }
func (a relaunch) String() string { return fmt.Sprintf("relaunch %s after %s", a.node, a.after) }

func (a relaunch) run(ctx context.Context, r *run) error {
	if err := sleep(ctx, a.after); err != nil {
		return nil // the run is over: nothing to relaunch into
	}
	if err := r.ev.Add(rundir.Event{Node: a.node, Action: &rundir.Action{Name: rundir.ActRelaunch}}); err != nil {
		return err
	}
	if err := r.agent(a.node).Relaunch(ctx); err != nil {
		return fmt.Errorf("relaunch %s: %w", a.node, err)
	}
	r.mu.Lock()
	delete(r.down, a.node)
	r.notifyLocked()
	r.mu.Unlock()
	r.progress("relaunched %s", a.node)
	return nil
}

// burst has the load generators send UDP datagrams at wire speed beside the probe stream: the
// senders are spread over the client nodes (client-0's probe process takes its share through
// its control API, the others run `rig loadgen burst`), and when more than one node sends they
// are given one start time so the bursts arrive together.
type burst struct{ playbooks.Burst }

func (b burst) check(int) error {
	switch {
	case b.Messages < 1:
		return fmt.Errorf("messages is %d; want at least 1", b.Messages)
	case b.Count < 1:
		return fmt.Errorf("count is %d; want at least 1", b.Count)
	case b.Count > 1 && b.Every <= 0:
		return fmt.Errorf("count is %d but every is %s; want the time between bursts", b.Count, b.Every)
	}
	return nil
}

func (b burst) String() string {
	s := fmt.Sprintf("burst of %d x %d B", b.Messages, b.Size)
	if b.Senders > 0 {
		s += fmt.Sprintf(" from each of %d senders", b.Senders)
	}
	if b.Count > 1 {
		s += fmt.Sprintf(", %d times every %s", b.Count, b.Every)
	}
	return s
}

// burstLead is how far ahead the start of a burst sent from several client nodes is set, so
// that every node's load generator is up and has found the leader by then.
const burstLead = 2 * time.Second

func (b burst) run(ctx context.Context, r *run) error {
	clients := r.inv.Clients()
	senders := b.Senders
	if senders == 0 {
		senders = len(clients)
	}
	share := make([]int, len(clients))
	for i := 0; i < senders; i++ {
		share[i%len(clients)]++
	}
	r.mu.Lock()
	first := r.burstNo
	r.burstNo += uint32(b.Count)
	r.mu.Unlock()
	var start time.Time
	if len(clients) > 1 && share[1] > 0 {
		start = time.Now().Add(burstLead)
	}
	spec := rundir.BurstAction{Messages: b.Messages, EveryNs: b.Every.Nanoseconds(), Count: b.Count,
		UDP: true, Size: b.Size, Senders: senders, FirstBurst: first}
	if !start.IsZero() {
		spec.Start = start.UTC()
	}
	if err := r.ev.Add(rundir.Event{Action: &rundir.Action{Name: rundir.ActBurst, Burst: &spec}}); err != nil {
		return err
	}
	for i, c := range clients[1:] {
		if share[i+1] == 0 {
			continue
		}
		r.asyncWG.Add(1)
		go func() {
			defer r.asyncWG.Done()
			if err := r.remoteBurst(ctx, c, b.Burst, share[i+1], first, start.Add(r.offsets[c.Name])); err != nil {
				r.mu.Lock()
				r.asyncErrs = append(r.asyncErrs, fmt.Errorf("burst from %s: %w", c.Name, err))
				r.notifyLocked()
				r.mu.Unlock()
			}
		}()
	}
	body := loadgen.BurstSpec{Messages: b.Messages, EveryNs: b.Every.Nanoseconds(), Count: b.Count,
		UDP: true, Size: b.Size, Senders: share[0], FirstBurst: first}
	if !start.IsZero() {
		body.StartUnixNs = start.Add(r.offsets[r.client.Name]).UnixNano()
	}
	return r.loadgenControl(ctx, "/burst", body)
}

// waitFor holds the timeline back until a server (or every server) reaches a phase.
type waitFor struct{ playbooks.WaitFor }

func (w waitFor) check(servers int) error {
	err := playbooks.CheckPhase(w.Phase)
	if w.Node != "" {
		err = errors.Join(err, playbooks.CheckNodeRef(w.Node, servers))
	}
	if w.Timeout <= 0 {
		err = errors.Join(err, fmt.Errorf("timeout %s: want a positive duration", w.Timeout))
	}
	return err
}

func (w waitFor) String() string {
	if w.StableLeader > 0 {
		return fmt.Sprintf("wait until every server is ready and the leader unchanged for %s (timeout %s)", w.StableLeader, w.Timeout)
	}
	return fmt.Sprintf("wait until %s is %s (timeout %s)", orAll(w.Node), w.Phase, w.Timeout)
}

func (w waitFor) run(ctx context.Context, r *run) error {
	node := w.Node
	if node != "" {
		var err error
		if node, err = r.resolveNode(node); err != nil {
			return err
		}
	}
	start := time.Now()
	if err := r.ev.Add(rundir.Event{Node: node, Action: &rundir.Action{Name: rundir.ActWaitFor, WaitFor: &rundir.WaitForAction{Phase: w.Phase}}}); err != nil {
		return err
	}
	deadline := start.Add(w.Timeout)
	// Relaunches still pending count too: waiting for "ready" right after a kill means waiting
	// for the relaunched node.
	if node == "" {
		if err := r.waitRelaunches(ctx, time.Until(deadline)); err != nil {
			return err
		}
	}
	if err := r.waitPhase(ctx, node, w.Phase, time.Until(deadline)); err != nil {
		return err
	}
	if w.StableLeader > 0 {
		if err := r.waitStableLeader(ctx, w.StableLeader, deadline); err != nil {
			return err
		}
		r.progress("wait_for a stable leader (%s unchanged, every server ready): %s", w.StableLeader, time.Since(start).Round(time.Millisecond))
		return nil
	}
	r.progress("wait_for %s %s: %s", orAll(node), w.Phase, time.Since(start).Round(time.Millisecond))
	return nil
}

// waitStableLeader waits until every server is ready, one is leader, and no server has become
// leader for stable. Ready is sticky through an election, so it alone says nothing about the
// leader.
func (r *run) waitStableLeader(ctx context.Context, stable time.Duration, deadline time.Time) error {
	for {
		err := r.waitFor(ctx, time.Until(deadline), func() (bool, error) {
			for _, s := range r.servers {
				if r.status[s.Name].Phase != engine.PhaseReady {
					return false, r.exitedLocked(s.Name)
				}
			}
			return r.leaderLocked() != "", nil
		})
		if errors.Is(err, errTimeout) {
			return fmt.Errorf("no stable leader: not every server ready with a leader by the wait's timeout")
		}
		if err != nil {
			return err
		}
		r.mu.Lock()
		since := time.Since(r.leaderChanged)
		r.mu.Unlock()
		if since >= stable {
			return nil
		}
		if time.Until(deadline) < stable-since {
			return fmt.Errorf("no stable leader: the leader changed %s before the wait's timeout, want %s without a change",
				since.Round(time.Millisecond), stable)
		}
		if err := sleep(ctx, stable-since); err != nil {
			return err
		}
	}
}
