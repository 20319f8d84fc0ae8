package runner

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/internal/ctxtime"
)

// runTimeline executes the playbook's actions at their offsets from load start. Actions run in
// order; a wait_for holds back every later action. Actions an action schedules (a kill's
// relaunch) run beside the timeline and are joined before it returns.
func (r *run) runTimeline(ctx context.Context) error {
	err := r.timelineSteps(ctx)
	r.asyncWG.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(append([]error{err}, r.asyncErrs...)...)
}

func (r *run) timelineSteps(ctx context.Context) error {
	end := r.loadStart.Add(r.pb.Duration)
	win := r.recordingWindows()
	for i, s := range r.timeline {
		if win != nil {
			if err := win.Open(ctx, r.loadStart.Add(s.at)); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				r.noteRecording("every server", err.Error())
			}
		}
		if err := ctxtime.SleepUntil(ctx, r.loadStart.Add(s.at)); err != nil {
			return err
		}
		if time.Now().After(end) {
			// A wait_for held it back past the end of the load: there are no probes left to
			// measure it with.
			r.warn("timeline[%d] %s and the actions after it did not run: the load ended before they could start", i, s.do)
			return nil
		}
		back := r.windowBack(s.do)
		if err := s.do.Run(ctx, env{r}); err != nil {
			return fmt.Errorf("timeline[%d] %s at %s: %w", i, s.do, s.at, err)
		}
		window := fmt.Sprintf("%02d-%s", i+1, s.do.Kind())
		if win == nil {
			r.takeRecordingsAsync(ctx, window)
			continue
		}
		var next time.Time
		if i+1 < len(r.timeline) {
			next = r.loadStart.Add(r.timeline[i+1].at)
		}
		r.closeRecordingWindow(ctx, win, window, back, next)
	}
	return nil
}

// async runs fn beside the timeline (an action's follow-up, such as a kill's relaunch); its
// failure fails the timeline.
func (r *run) async(ctx context.Context, fn func(context.Context) error) {
	r.asyncWG.Add(1)
	go func() {
		defer r.asyncWG.Done()
		if err := fn(ctx); err != nil {
			r.mu.Lock()
			r.asyncErrs = append(r.asyncErrs, err)
			r.notifyLocked()
			r.mu.Unlock()
		}
	}()
}

// waitRelaunches waits until no killed node is still waiting for its relaunch.
func (r *run) waitRelaunches(ctx context.Context, timeout time.Duration) error {
	var down []string
	var failed error
	err := r.waitFor(ctx, timeout, func() (bool, error) {
		down = down[:0]
		for _, s := range r.servers {
			if r.srv(s.Name).down {
				down = append(down, s.Name)
			}
		}
		failed = errors.Join(r.asyncErrs...)
		return len(down) == 0, failed
	})
	switch {
	case errors.Is(err, errTimeout):
		sort.Strings(down)
		return fmt.Errorf("%v still down (not relaunched) at the wait's timeout", down)
	}
	return err
}

func (r *run) waitPhase(ctx context.Context, node, phase string, timeout time.Duration) error {
	if phase == engine.PhaseReady {
		return r.waitReady(ctx, node, timeout)
	}
	err := r.waitFor(ctx, timeout, func() (bool, error) {
		for _, s := range r.servers {
			if (node == "" || s.Name == node) && r.srv(s.Name).status.Phase != phase {
				return false, nil
			}
		}
		return true, nil
	})
	if errors.Is(err, errTimeout) {
		// The wait's timeout as the playbook gave it: callers pass what is left of a deadline.
		return fmt.Errorf("%s did not reach %s within the wait's timeout", orAll(node), phase)
	}
	return err
}

// resolveNode turns leader | follower | other-follower | node-N into a node name, at the moment
// the action runs.
func (r *run) resolveNode(ref string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	leader := r.leaderLocked()
	var followers []string
	for _, s := range r.servers {
		if s.Name != leader && !r.srv(s.Name).down {
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
