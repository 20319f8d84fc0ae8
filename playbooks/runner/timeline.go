package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/results"
)

// runTimeline executes the playbook's actions at their offsets from load start. Actions run in
// order; a wait_for holds back every later action. Relaunches run on their own timers so a kill
// never blocks the timeline.
func (r *run) runTimeline(ctx context.Context) error {
	var relaunches sync.WaitGroup
	err := r.timeline(ctx, &relaunches)
	relaunches.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(append([]error{err}, r.asyncErrs...)...)
}

func (r *run) timeline(ctx context.Context, relaunches *sync.WaitGroup) error {
	end := r.loadStart.Add(r.pb.Duration)
	for i, a := range r.pb.Timeline {
		if err := sleepUntil(ctx, r.loadStart.Add(a.At)); err != nil {
			return err
		}
		if time.Now().After(end) {
			// A wait_for held it back past the end of the load: there are no probes left to
			// measure it with.
			r.warn("timeline[%d] %s and the actions after it did not run: the load ended before they could start", i, a.Kind)
			return nil
		}
		if err := r.do(ctx, i, a, relaunches); err != nil {
			return fmt.Errorf("timeline[%d] %s at %s: %w", i, a.Kind, a.At, err)
		}
	}
	return nil
}

func (r *run) do(ctx context.Context, i int, a playbooks.Action, relaunches *sync.WaitGroup) error {
	switch a.Kind {
	case playbooks.ActSnapshot:
		leader := r.leader()
		if leader == "" {
			return fmt.Errorf("no leader to snapshot on")
		}
		r.ev.Add(results.Event{Kind: results.KindAction, Action: a.Kind, Node: leader, Detail: map[string]any{"leader": leader}})
		body, err := r.agents[leader].EngineAdmin(ctx, "/snapshot")
		if err != nil {
			return err
		}
		var s engine.Snapshot
		if err := json.Unmarshal(body, &s); err != nil {
			return fmt.Errorf("snapshot answer %q: %w", body, err)
		}
		r.ev.Add(results.Event{Kind: results.KindNote, Node: leader, Action: a.Kind, Detail: map[string]any{"index": s.Index, "leader": leader, "leader_take_ms": s.TakeMs}})
		r.progress("snapshot at index %d: leader %s took %.1f ms (%d orders, %d bytes, %d syncs)", s.Index, leader, s.TakeMs, s.Orders, s.Bytes, s.Syncs)
	case playbooks.ActKill:
		name, err := r.resolveNode(a.Kill.Node)
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.down[name], r.lastKilled = true, name
		r.mu.Unlock()
		r.ev.Add(results.Event{Kind: results.KindAction, Action: a.Kind, Node: name, Detail: map[string]any{"signal": a.Kill.Signal, "as": a.Kill.Node}})
		if err := r.agents[name].Signal(ctx, a.Kill.Signal); err != nil {
			return err
		}
		r.progress("kill -%s %s (%s)", a.Kill.Signal, name, a.Kill.Node)
		if a.Kill.RelaunchAfter > 0 {
			relaunches.Add(1)
			go func() {
				defer relaunches.Done()
				if sleep(ctx, a.Kill.RelaunchAfter) != nil {
					return
				}
				r.ev.Add(results.Event{Kind: results.KindAction, Action: "relaunch", Node: name})
				if err := r.agents[name].Relaunch(ctx); err != nil {
					r.mu.Lock()
					r.asyncErrs = append(r.asyncErrs, fmt.Errorf("relaunch %s: %w", name, err))
					r.mu.Unlock()
					return
				}
				r.mu.Lock()
				delete(r.down, name)
				r.mu.Unlock()
				r.progress("relaunched %s", name)
			}()
		}
	case playbooks.ActStepDown:
		leader := r.leader()
		if leader == "" {
			return fmt.Errorf("no leader to step down")
		}
		r.ev.Add(results.Event{Kind: results.KindAction, Action: a.Kind, Node: leader})
		if _, err := r.agents[leader].EngineAdmin(ctx, "/step-down"); err != nil {
			return err
		}
		r.progress("step-down requested on %s", leader)
	case playbooks.ActWaitFor:
		node := a.WaitFor.Node
		if node != "" {
			var err error
			if node, err = r.resolveNode(node); err != nil {
				return err
			}
		}
		// Relaunches still pending count too: waiting for "ready" right after a kill means
		// waiting for the relaunched node.
		start := time.Now()
		r.ev.Add(results.Event{Kind: results.KindAction, Action: a.Kind, Node: node, Detail: map[string]any{"phase": a.WaitFor.Phase}})
		deadline := start.Add(a.WaitFor.Timeout)
		if node == "" {
			if err := r.waitRelaunches(ctx, deadline); err != nil {
				return err
			}
		}
		if err := r.waitPhase(ctx, node, a.WaitFor.Phase, time.Until(deadline)); err != nil {
			return err
		}
		r.progress("wait_for %s %s: %s", orAll(node), a.WaitFor.Phase, time.Since(start).Round(time.Millisecond))
	case playbooks.ActBurst:
		r.ev.Add(results.Event{Kind: results.KindAction, Action: a.Kind, Detail: map[string]any{"messages": a.Burst.Messages, "every_ns": a.Burst.Every.Nanoseconds(), "count": a.Burst.Count}})
		if err := r.burst(ctx, *a.Burst); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown action %q", a.Kind)
	}
	return nil
}

// waitRelaunches waits until no killed node is still waiting for its relaunch.
func (r *run) waitRelaunches(ctx context.Context, deadline time.Time) error {
	for {
		r.mu.Lock()
		var down []string
		for n := range r.down {
			down = append(down, n)
		}
		failed := errors.Join(r.asyncErrs...)
		r.mu.Unlock()
		switch {
		case failed != nil:
			return failed
		case len(down) == 0:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("%v still down (not relaunched) at the wait's timeout", down)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

func (r *run) waitPhase(ctx context.Context, node, phase string, timeout time.Duration) error {
	if phase == engine.PhaseReady {
		return r.waitReady(ctx, node, timeout)
	}
	deadline := time.Now().Add(timeout)
	for {
		r.mu.Lock()
		ok := true
		for _, s := range r.servers {
			if (node == "" || s.Name == node) && r.status[s.Name].Phase != phase {
				ok = false
			}
		}
		r.mu.Unlock()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not reach %s within %s", orAll(node), phase, timeout)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// resolveNode turns leader | follower | other-follower | node-N into a node name, at the moment
// the action runs.
func (r *run) resolveNode(ref string) (string, error) {
	leader := r.leader()
	r.mu.Lock()
	defer r.mu.Unlock()
	var followers []string
	for _, s := range r.servers {
		if s.Name != leader && !r.down[s.Name] {
			followers = append(followers, s.Name)
		}
	}
	sort.Strings(followers)
	switch ref {
	case "leader":
		if leader == "" {
			return "", fmt.Errorf("no leader")
		}
		return leader, nil
	case "follower", "other-follower":
		if leader == "" {
			return "", fmt.Errorf("no leader, so no follower")
		}
		if len(followers) == 0 {
			return "", fmt.Errorf("no running follower")
		}
		if ref == "other-follower" {
			for _, f := range followers {
				if f != r.lastKilled {
					return f, nil
				}
			}
		}
		return followers[len(followers)-1], nil
	}
	for _, s := range r.servers {
		if s.Name == ref {
			return ref, nil
		}
	}
	return "", fmt.Errorf("no node %q", ref)
}

func orAll(node string) string {
	if node == "" {
		return "all servers"
	}
	return node
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func sleepUntil(ctx context.Context, t time.Time) error {
	if d := time.Until(t); d > 0 {
		return sleep(ctx, d)
	}
	return ctx.Err()
}
