package actions

import (
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/actions/actionstest"
)

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
		env := actionstest.NewEnv()
		err := c.spec.Run(t.Context(), env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s on a run without %s: %v", c.spec.Kind(), c.want, err)
		}
		if c.want != "LeaderWatcher" && len(env.Events()) != 0 {
			t.Errorf("%s recorded %v before failing", c.spec.Kind(), env.Events())
		}
	}
	if err := (&StepDown{}).Run(t.Context(), actionstest.NewEnv()); err != nil {
		t.Errorf("step_down on the core: %v", err)
	}
}
