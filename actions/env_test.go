package actions

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/rundir"
)

// coreEnv has the core of Env and no capability.
type coreEnv struct{ recorded []rundir.Event }

func (*coreEnv) Leader() string                                            { return "node-0" }
func (*coreEnv) ResolveNode(ref string) (string, error)                    { return "node-1", nil }
func (*coreEnv) Admin(context.Context, string, string) ([]byte, error)     { return nil, nil }
func (*coreEnv) Signal(context.Context, string, string, string) error      { return nil }
func (*coreEnv) Relaunch(context.Context, string) error                    { return nil }
func (e *coreEnv) Record(ev rundir.Event) error                            { e.recorded = append(e.recorded, ev); return nil }
func (*coreEnv) Progress(string, ...any)                                   {}
func (*coreEnv) Go(context.Context, func(context.Context) error)           {}
func (*coreEnv) Wait(context.Context, string, string, time.Duration) error { return nil }

// A kind that needs a capability the run lacks fails naming it, before it records or changes
// anything; the core is enough for the kinds that need nothing more.
func TestKindsAskForCapabilities(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{&Burst{Messages: 10, Count: 1}, "Burster"},
		{&Partition{Node: "leader", For: time.Second}, "LinkCutter"},
		{&Delay{Node: "leader", Delay: time.Millisecond, For: time.Second}, "LinkShaper"},
		{&WaitFor{Phase: "ready", Timeout: time.Second, StableLeader: time.Second}, "LeaderWatcher"},
	} {
		env := &coreEnv{}
		err := c.spec.Run(t.Context(), env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s on a run without %s: %v", c.spec.Kind(), c.want, err)
		}
		if c.want != "LeaderWatcher" && len(env.recorded) != 0 {
			t.Errorf("%s recorded %v before failing", c.spec.Kind(), env.recorded)
		}
	}
	if err := (&StepDown{}).Run(t.Context(), &coreEnv{}); err != nil {
		t.Errorf("step_down on the core: %v", err)
	}
}
