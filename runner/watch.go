package runner

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/internal/ctxtime"
	"github.com/rig-dev/rig/rundir"
)

// watch follows every server agent's recorded transitions (a long poll on the agent) and turns
// them into events. It returns a channel closed when all watchers stopped.
func (r *run) watch(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, n := range r.servers {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			r.watchNode(ctx, name)
		}(n.Name)
	}
	go func() { wg.Wait(); close(done) }()
	return done
}

func (r *run) watchNode(ctx context.Context, name string) {
	since := r.srv(name).since
	for ctx.Err() == nil {
		// A node rebooting has no agent to ask; once back, its new agent's journal is followed.
		wait, from, restart := r.rewatchFrom(name)
		if wait {
			ctxtime.Sleep(ctx, 200*time.Millisecond)
			continue
		}
		if restart {
			since = from
		}
		ts, err := r.agent(name).Transitions(ctx, since, 2*time.Second)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("watch transitions", "node", name, "err", err)
				ctxtime.Sleep(ctx, 100*time.Millisecond) // the agent is unreachable: do not spin
			}
			continue
		}
		for _, t := range ts {
			since = t.Seq
			r.onTransition(name, t)
		}
		r.mu.Lock()
		r.srv(name).cursor = since
		r.notifyLocked()
		r.mu.Unlock()
	}
}

func (r *run) onTransition(name string, t rundir.Transition) {
	ev := rundir.Event{T: t.T.Add(-r.srv(name).offset), Node: name}
	switch t.Kind {
	case rundir.TransLaunch:
		// The process exists from here on; it reports phases once its admin API is up.
		ev.Phase = &rundir.PhaseChange{From: t.From, To: engine.PhaseStarting, Launch: t.Launch, PID: t.PID}
	case rundir.TransPhase:
		ev.Phase = &rundir.PhaseChange{From: t.From, To: t.To, Exit: t.Exit}
	case rundir.TransRole:
		ev.Role = &rundir.RoleChange{From: t.From, To: t.To}
	case rundir.TransElection:
		ev.Election = &rundir.ElectionChange{From: t.From, To: t.To}
	case rundir.TransSnapshot:
		ev.Snapshot = &rundir.SnapshotTaken{From: t.From}
		if t.Status != nil && t.Status.LastSnapshot != nil {
			ev.Snapshot.Snapshot = *t.Status.LastSnapshot
		}
	case rundir.TransSignal:
		ev.Note = &rundir.Note{From: t.From, Signal: t.To}
	default: // anything newer: kept as a note
		ev.Note = &rundir.Note{From: t.From, Text: string(t.Kind) + ": " + t.To}
	}
	// A lost line is kept by the log (EventLog.Err) and fails the run when it finishes.
	if err := r.ev.Add(ev); err != nil {
		r.log.Error("record transition", "node", name, "err", err)
	}
	if t.Kind == rundir.TransTrap && t.Status != nil {
		r.onTrap(name, t.Status.Traps)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.srv(name)
	switch {
	case t.Kind == rundir.TransPhase && t.To == rundir.PhaseDown:
		s.onExit(t.Exit)
		if r.fault == nil && !r.stopping {
			r.fault = s.unscheduledExit(name) // nil when the timeline killed it
		}
	case t.Kind == rundir.TransLaunch:
		s.onLaunch()
	case t.Status != nil:
		s.onStatus(*t.Status)
	}
	if t.Kind == rundir.TransRole && t.To == engine.RoleLeader {
		r.leaderChanged = time.Now()
	}
	if t.Kind == rundir.TransRole && t.From == engine.RoleLeader {
		s.onLeadershipLost(ev.T)
	}
	r.notifyLocked()
}

// exitedLocked says how a server's engine ended when it is down without the timeline having
// killed it (r.mu held).
func (r *run) exitedLocked(name string) error { return r.srv(name).unscheduledExit(name) }

// ErrEngineExited classifies an engine that exited or was killed outside the timeline.
var ErrEngineExited = errors.New("engine exited outside the schedule")

// unscheduledExit names an engine's death: node, its role, the signal or exit code, and the end
// of its log (where an ENOSPC or a panic says what happened).
func unscheduledExit(name, role string, e *rundir.ExitStatus) error {
	if role == "" {
		role = "no role yet"
	}
	how, tail := "no exit status", ""
	if e != nil {
		how = fmt.Sprintf("exit code %d", e.Code)
		if e.Signal != "" {
			how = "killed by SIG" + e.Signal
		}
		if e.LogTail != "" {
			tail = "; engine.log ends:\n" + e.LogTail
		}
	}
	return fmt.Errorf("%w: %s (%s): %s%s", ErrEngineExited, name, role, how, tail)
}

// notifyLocked wakes everything waiting for the run's state to change (r.mu held).
func (r *run) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// waitFor waits until cond (called with r.mu held) holds or fails, waking on every change of
// the run's state instead of polling. It returns errTimeout after timeout.
func (r *run) waitFor(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		if err := ctx.Err(); err != nil {
			return err // interrupted: whatever the state, the run stops here
		}
		r.mu.Lock()
		ok, err := cond()
		changed := r.changed
		r.mu.Unlock()
		if ok || err != nil {
			return err
		}
		select {
		case <-changed:
		case <-t.C:
			return errTimeout
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

var errTimeout = errors.New("timed out")

// drainWatchers waits (briefly) until every watcher has seen every transition its agent has
// recorded, so stopping them loses nothing.
func (r *run) drainWatchers(ctx context.Context) {
	last := map[string]uint64{}
	for _, n := range r.servers {
		if st, err := r.agent(n.Name).EngineStatus(ctx); err == nil {
			last[n.Name] = st.LastSeq
		}
	}
	r.waitFor(ctx, 3*time.Second, func() (bool, error) {
		for n, seq := range last {
			if r.srv(n).cursor < seq {
				return false, nil
			}
		}
		return true, nil
	})
}

// leader is the server that currently says it leads ("" when none does).
func (r *run) leader() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leaderLocked()
}

func (r *run) leaderLocked() string {
	var names []string
	for n, s := range r.nodes {
		if s.status.Role == engine.RoleLeader && !s.down {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return ""
	}
	// Two self-declared leaders happen briefly after an election; the higher term wins.
	best := names[0]
	for _, n := range names[1:] {
		if r.srv(n).status.Term > r.srv(best).status.Term {
			best = n
		}
	}
	return best
}

// waitReady waits until node (or every server that is not down, when node is "") is ready and
// a leader is known. An engine that exits on its own meanwhile fails the wait at once.
func (r *run) waitReady(ctx context.Context, node string, timeout time.Duration) error {
	return r.waitReadyChecking(ctx, node, timeout, nil)
}

// waitReadyChecking is waitReady that also calls check (r.mu held) on every server it waits for,
// at every change of the run's state: an error from it ends the wait at once.
func (r *run) waitReadyChecking(ctx context.Context, node string, timeout time.Duration, check func(name string) error) error {
	var missing []string
	err := r.waitFor(ctx, timeout, func() (bool, error) {
		missing = nil
		for _, s := range r.servers {
			if (node != "" && s.Name != node) || (node == "" && r.srv(s.Name).down) {
				continue
			}
			if err := r.exitedLocked(s.Name); err != nil {
				return false, err
			}
			if check != nil {
				if err := check(s.Name); err != nil {
					return false, err
				}
			}
			if ph := r.srv(s.Name).status.Phase; ph != engine.PhaseReady {
				missing = append(missing, fmt.Sprintf("%s is %q", s.Name, ph))
			}
		}
		if len(missing) == 0 && r.leaderLocked() == "" {
			missing = append(missing, "no leader")
		}
		return len(missing) == 0, nil
	})
	if errors.Is(err, errTimeout) {
		return fmt.Errorf("after %s: %v", timeout.Round(time.Millisecond), missing)
	}
	return err
}
