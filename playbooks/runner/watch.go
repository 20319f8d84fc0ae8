package runner

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/rig-dev/rig/agent/supervise"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/results"
)

// watch follows every server agent's recorded transitions (the agent polls its engine every
// 20 ms on the node's clock) and turns them into events. It returns a channel closed when all
// watchers stopped.
func (r *run) watch(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	r.cursor = map[string]uint64{}
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
	c := r.agents[name]
	since := r.since[name]
	for ctx.Err() == nil {
		ts, err := c.Transitions(ctx, since, 2*time.Second)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("watch transitions", "node", name, "err", err)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		for _, t := range ts {
			since = t.Seq
			r.onTransition(name, t)
		}
		r.mu.Lock()
		r.cursor[name] = since
		r.mu.Unlock()
	}
}

func (r *run) onTransition(name string, t agentTransition) {
	ev := results.Event{T: t.T.Add(-r.offsets[name]), Node: name, From: t.From}
	switch t.Kind {
	case supervise.KindLaunch:
		// The process exists from here on; it reports phases once its admin API is up.
		ev.Kind, ev.Phase = results.KindPhase, engine.PhaseStarting
		ev.Detail = map[string]any{"launch": t.Launch, "pid": t.PID}
	case supervise.KindPhase:
		ev.Kind, ev.Phase = results.KindPhase, t.To
		if t.Exit != nil {
			ev.Detail = map[string]any{"exit": t.Exit}
		}
	case supervise.KindRole:
		ev.Kind, ev.Role = results.KindRole, t.To
	case supervise.KindSnapshot:
		ev.Kind = results.KindSnapshot
		if t.Status != nil && t.Status.LastSnapshot != nil {
			s := t.Status.LastSnapshot
			ev.Detail = map[string]any{"index": s.Index, "take_ms": s.TakeMs, "persisted_ms": s.PersistedMs,
				"bytes": s.Bytes, "orders": s.Orders, "syncs": s.Syncs, "restored": s.Restored, "restore_ms": s.RestoreMs}
		}
	default: // signals and anything newer: kept as notes
		ev.Kind, ev.Detail = results.KindNote, map[string]any{t.Kind: t.To}
	}
	r.ev.Add(ev)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case t.Kind == supervise.KindPhase && t.To == supervise.PhaseDown:
		st := r.status[name]
		st.Phase, st.Role = supervise.PhaseDown, ""
		r.status[name] = st
	case t.Kind == supervise.KindLaunch:
		st := r.status[name]
		st.Phase, st.Role = engine.PhaseStarting, ""
		r.status[name] = st
	case t.Status != nil:
		r.status[name] = *t.Status
	}
}

// drainWatchers waits (briefly) until every watcher has seen every transition its agent has
// recorded, so stopping them loses nothing.
func (r *run) drainWatchers(ctx context.Context) {
	deadline := time.Now().Add(3 * time.Second)
	for _, n := range r.servers {
		st, err := r.agents[n.Name].EngineStatus(ctx)
		if err != nil {
			continue
		}
		for time.Now().Before(deadline) {
			r.mu.Lock()
			seen := r.cursor[n.Name]
			r.mu.Unlock()
			if seen >= st.LastSeq {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// leader is the server that currently says it leads ("" when none does).
func (r *run) leader() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for n, st := range r.status {
		if st.Role == engine.RoleLeader && !r.down[n] {
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
		if r.status[n].Term > r.status[best].Term {
			best = n
		}
	}
	return best
}

// waitReady waits until node (or every server that is not down, when node is "") is ready and
// a leader is known.
func (r *run) waitReady(ctx context.Context, node string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var missing []string
		r.mu.Lock()
		for _, s := range r.servers {
			if (node != "" && s.Name != node) || (node == "" && r.down[s.Name]) {
				continue
			}
			if r.status[s.Name].Phase != engine.PhaseReady {
				missing = append(missing, fmt.Sprintf("%s is %q", s.Name, r.status[s.Name].Phase))
			}
		}
		r.mu.Unlock()
		if len(missing) == 0 && r.leader() != "" {
			return nil
		}
		if time.Now().After(deadline) {
			if len(missing) == 0 {
				missing = append(missing, "no leader")
			}
			return fmt.Errorf("after %s: %v", timeout, missing)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
