package actions

import (
	"context"
	"fmt"
	"image/color"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// StepDown asks the leader to hand leadership over gracefully: by POST /step-down, or, for an
// engine whose graceful stop is its hand-off (engine.StepDownRelaunch), by SIGTERM and a
// relaunch once it has exited.
type StepDown struct{}

// ActStepDown is the step_down action's name in playbooks and events; it carries no payload.
const ActStepDown rundir.ActionName = "step_down"

func (*StepDown) Kind() string { return string(ActStepDown) }
func (*StepDown) Events() []EventKind {
	return []EventKind{{Name: ActStepDown, Moves: rundir.MovesLeader,
		Marker: color.RGBA{R: 0x80, G: 0x30, B: 0xa0, A: 0xff}, Shapes: []Shape{ShapeStepDown}}, relaunchEvent}
}
func (*StepDown) Fields() []Field         { return nil }
func (*StepDown) Check(Context) []Problem { return nil }
func (*StepDown) Describe(Varied) string {
	return "step the leader down (graceful leadership transfer)"
}
func (*StepDown) String() string   { return "step the leader down" }
func (*StepDown) Disrupts() string { return "steps the leader down" }
func (*StepDown) Touches() Touch   { return Touch{Leader: true} }

func (*StepDown) Run(ctx context.Context, env Env) error {
	leader := env.Leader()
	if leader == "" {
		return fmt.Errorf("no leader to step down")
	}
	byRelaunch := stepsDownByRelaunch(ctx, env, leader)
	if err := record(env, time.Time{}, leader, ActStepDown, rundir.MovesLeader, nil); err != nil {
		return err
	}
	if byRelaunch {
		return stepDownByRelaunch(ctx, env, leader)
	}
	if _, err := env.Admin(ctx, leader, engine.AdminStepDown); err != nil {
		return err
	}
	env.Progress("step-down requested on %s", leader)
	return nil
}

// stepsDownByRelaunch says whether node's engine hands leadership over by its graceful stop
// (GET /status step_down, through a StatusReader); an engine whose status cannot be read is
// asked by POST /step-down, which then says what is wrong.
func stepsDownByRelaunch(ctx context.Context, env Env, node string) bool {
	sr, ok := env.(StatusReader)
	if !ok {
		return false
	}
	st, err := sr.EngineStatus(ctx, node)
	return err == nil && st.StepDown == engine.StepDownRelaunch
}

// stepDownByRelaunch stops the leader with SIGTERM, waits for its exit (engine.StepDownStopBound)
// and relaunches it at once. An engine still running after the bound cannot be stopped
// gracefully: it is killed, relaunched, and the step-down fails naming it.
func stepDownByRelaunch(ctx context.Context, env Env, leader string) error {
	start := time.Now()
	if err := env.Signal(ctx, leader, "leader", "TERM"); err != nil {
		return err
	}
	var stuck error
	if err := env.Wait(ctx, leader, rundir.PhaseDown, engine.StepDownStopBound); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		stuck = fmt.Errorf("step-down: %s did not stop within %s of SIGTERM: its engine cannot be stopped gracefully (its engine.log names what it waited for); killed it", leader, engine.StepDownStopBound)
		if err := env.Signal(ctx, leader, "leader", "KILL"); err != nil {
			return fmt.Errorf("%w; and the kill failed: %v", stuck, err)
		}
		if err := env.Wait(ctx, leader, rundir.PhaseDown, engine.StepDownStopBound); err != nil {
			return fmt.Errorf("%w; still running after SIGKILL: %v", stuck, err)
		}
	}
	stopped := time.Since(start)
	if err := record(env, time.Time{}, leader, ActRelaunch, "", nil); err != nil {
		return err
	}
	if err := env.Relaunch(ctx, leader); err != nil {
		return fmt.Errorf("step-down: relaunch %s: %w", leader, err)
	}
	if stuck != nil {
		return stuck
	}
	env.Progress("stepped %s down: stopped gracefully in %s, relaunched", leader, stopped.Round(time.Millisecond))
	return nil
}
