package actions

import (
	"context"
	"fmt"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// StepDown asks the leader to hand leadership over gracefully.
type StepDown struct{}

func (*StepDown) Kind() string            { return string(rundir.ActStepDown) }
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
	if err := env.Record(rundir.Event{Node: leader, Action: &rundir.Action{Name: rundir.ActStepDown, Moves: rundir.MovesLeader}}); err != nil {
		return err
	}
	if _, err := env.Admin(ctx, leader, engine.AdminStepDown); err != nil {
		return err
	}
	env.Progress("step-down requested on %s", leader)
	return nil
}
