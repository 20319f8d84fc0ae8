package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/agent/hog"
	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/internal/ctxtime"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/runner/launch"
	"github.com/rig-dev/rig/target"
)

// step is an action at its offset from load start.
type step struct {
	at time.Duration
	do actions.Spec
}

// newTimeline takes the playbook's timeline, checking each entry again against the cluster (a
// playbook built in code, not parsed, meets the same rules).
func newTimeline(pb *playbooks.Playbook) ([]step, error) {
	var out []step
	var errs []error
	for i, a := range pb.Timeline {
		if a.Spec == nil {
			errs = append(errs, fmt.Errorf("timeline[%d] %s: no settings (unknown kind? known: %v)", i, a.Kind, actions.Names()))
			continue
		}
		c := actions.Context{Servers: pb.Cluster.Servers, Clients: pb.Cluster.Clients, At: a.At, End: pb.Duration}
		var bad []error
		for _, pr := range a.Spec.Check(c) {
			bad = append(bad, fmt.Errorf("timeline[%d] %s: %s", i, a.Kind, pr.Msg))
		}
		if len(bad) > 0 {
			errs = append(errs, bad...)
			continue
		}
		out = append(out, step{at: a.At, do: a.Spec})
	}
	return out, errors.Join(errs...)
}

// env is what the timeline's actions see of the run (actions.Env).
type env struct{ r *run }

// The runner's env has every capability a kind may ask for.
var (
	_ actions.Env             = env{}
	_ actions.DiskPowerLosser = env{}
	_ actions.NodeRebooter    = env{}
	_ actions.Burster         = env{}
	_ actions.LinkCutter      = env{}
	_ actions.LinkShaper      = env{}
	_ actions.LeaderWatcher   = env{}
	_ actions.CPUHogger       = env{}
	_ actions.StatusReader    = env{}
)

func (e env) Leader() string                         { return e.r.leader() }
func (e env) ResolveNode(ref string) (string, error) { return e.r.resolveNode(ref) }
func (e env) Record(ev rundir.Event) error           { return e.r.ev.Add(ev) }
func (e env) Progress(format string, args ...any)    { e.r.progress(format, args...) }

func (e env) Admin(ctx context.Context, node, path string) ([]byte, error) {
	return e.r.agent(node).EngineAdmin(ctx, path)
}

// EngineStatus reads node's engine status through its agent (GET /status, no hash).
func (e env) EngineStatus(ctx context.Context, node string) (engine.Status, error) {
	var st engine.Status
	b, err := e.r.agent(node).EngineStatusRaw(ctx, false)
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		return st, fmt.Errorf("status of %s: %w", node, err)
	}
	return st, nil
}

// Signal counts the node down (and killed by the timeline, so its exit is no fault) before the
// signal goes out, so a watcher never sees the exit first.
func (e env) Signal(ctx context.Context, node, as, signal string) error {
	r := e.r
	r.mu.Lock()
	r.killLocked(node, false)
	r.notifyLocked()
	r.mu.Unlock()
	return r.agent(node).Signal(ctx, signal)
}

// CPUHog has node's agent start a CPU hog beside its engine (agent/hog_handlers.go).
func (e env) CPUHog(ctx context.Context, node string, req hog.Request) (hog.State, error) {
	return e.r.agent(node).StartHog(ctx, req)
}

func (e env) EndCPUHog(ctx context.Context, node string, pid int, wait time.Duration) (hog.State, error) {
	return e.r.agent(node).EndHog(ctx, pid, wait)
}

// powerLossExit bounds the wait for a killed engine to exit before its disk loses power.
const powerLossExit = 10 * time.Second

// PowerLoss waits until node's engine (signalled KILL) has exited, then has the target drop
// every unsynced write from its disk model.
func (e env) PowerLoss(ctx context.Context, node string) (diskmodel.Dropped, error) {
	r := e.r
	pl, ok := r.cl.(target.PowerLosser)
	if !ok || r.pb.Disk.Zero() {
		return diskmodel.Dropped{}, fmt.Errorf("a power loss needs a disk model under the servers' data (the playbook's disk: block, on the local target)")
	}
	n, ok := r.inv.Node(node)
	if !ok {
		return diskmodel.Dropped{}, fmt.Errorf("no server %s", node)
	}
	err := r.waitFor(ctx, powerLossExit, func() (bool, error) { return r.srv(node).status.Phase == rundir.PhaseDown, nil })
	if errors.Is(err, errTimeout) {
		return diskmodel.Dropped{}, fmt.Errorf("its engine had not exited %s after SIGKILL", powerLossExit)
	}
	if err != nil {
		return diskmodel.Dropped{}, err
	}
	return pl.DropUnsynced(ctx, n)
}

func (e env) Relaunch(ctx context.Context, node string) error {
	r := e.r
	err := r.startAfresh(ctx, node)
	if errors.Is(err, errNotRebooted) {
		err = r.agent(node).Relaunch(ctx)
	}
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.srv(node).relaunched()
	r.notifyLocked()
	r.mu.Unlock()
	return nil
}

func (e env) Go(ctx context.Context, fn func(context.Context) error) { e.r.async(ctx, fn) }

func (e env) Wait(ctx context.Context, node, phase string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	// Relaunches still pending count too: waiting for "ready" right after a kill means waiting
	// for the relaunched node.
	if node == "" {
		if err := e.r.waitRelaunches(ctx, time.Until(deadline)); err != nil {
			return err
		}
	}
	return e.r.waitPhase(ctx, node, phase, time.Until(deadline))
}

func (e env) WaitStableLeader(ctx context.Context, stable time.Duration, deadline time.Time) error {
	return e.r.waitStableLeader(ctx, stable, deadline)
}

// burstLead is how far ahead the start of a burst sent from several client nodes is set, so
// that every node's load generator is up and has found the leader by then.
const burstLead = 2 * time.Second

// Burst spreads a burst's senders over the client nodes: client-0's probe process takes its
// share through its control API, the others run `rig loadgen burst`; when more than one node
// sends they are given one start time so the bursts arrive together.
func (e env) Burst(ctx context.Context, b rundir.BurstSeries, record func(rundir.BurstSeries) error) error {
	r := e.r
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
	series := rundir.BurstSeries{Messages: b.Messages, Every: b.Every, Count: b.Count,
		UDP: true, Size: b.Size, Senders: senders, FirstBurst: first}
	if argv := r.pb.Engine.BurstClient(); argv != nil { // the engine takes bursts through its own client
		series.Start = time.Now().Add(launch.BurstClientLead).UTC()
		if err := record(series); err != nil {
			return err
		}
		r.async(ctx, func(ctx context.Context) error { return e.clientBurst(ctx, argv, share, series) })
		return nil
	}
	if !start.IsZero() {
		series.Start = start.UTC()
	}
	if err := record(series); err != nil {
		return err
	}
	// Each load generator is told its own share of the senders, and the start on its own clock.
	share1 := func(n inventory.Node, senders int) rundir.BurstSeries {
		s := series
		s.Senders = senders
		if !start.IsZero() {
			s.Start = start.Add(r.srv(n.Name).offset)
		}
		return s
	}
	for i, c := range clients[1:] {
		if share[i+1] == 0 {
			continue
		}
		r.async(ctx, func(ctx context.Context) error {
			if err := r.remoteBurst(ctx, c, share1(c, share[i+1])); err != nil {
				return fmt.Errorf("burst from %s: %w", c.Name, err)
			}
			return nil
		})
	}
	return r.loadgenControl(ctx, "/burst", share1(r.client, share[0]))
}

// waitStableLeader waits until every server is ready, one is leader, and no server has become
// leader for stable. Ready is sticky through an election, so it alone says nothing about the
// leader.
func (r *run) waitStableLeader(ctx context.Context, stable time.Duration, deadline time.Time) error {
	for {
		err := r.waitFor(ctx, time.Until(deadline), func() (bool, error) {
			for _, s := range r.servers {
				if r.srv(s.Name).status.Phase != engine.PhaseReady {
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
		if err := ctxtime.Sleep(ctx, stable-since); err != nil {
			return err
		}
	}
}
