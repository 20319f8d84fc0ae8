package actions

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/actions/actionstest"
	"github.com/rig-dev/rig/engine"
)

// stepEnv is the fake env with a StatusReader whose leader's status says how it steps down.
type stepEnv struct {
	*actionstest.Env
	status string
}

func (e *stepEnv) EngineStatus(_ context.Context, node string) (engine.Status, error) {
	e.Note("status %s", node)
	var st engine.Status
	err := json.Unmarshal([]byte(e.status), &st)
	return st, err
}

// An engine whose status says step_down: relaunch is stepped down by SIGTERM, its exit and a
// relaunch, recorded as step_down then relaunch; one that does not say so gets POST /step-down;
// one that does not stop within the bound is killed, relaunched, and named.
func TestStepDownByRelaunch(t *testing.T) {
	bound := engine.StepDownStopBound.String()
	for _, c := range []struct {
		name, status string
		stuck        bool // the engine does not exit on SIGTERM
		want         string
		err          string
	}{
		{"relaunch", `{"role":"leader","step_down":"relaunch"}`, false,
			"status node-0|record step_down|signal node-0 TERM|wait node-0 down " + bound + "|record relaunch|relaunch node-0", ""},
		{"in process", `{"role":"leader"}`, false, "status node-0|record step_down|admin node-0 /step-down", ""},
		{"stuck", `{"step_down":"relaunch"}`, true,
			"status node-0|record step_down|signal node-0 TERM|wait node-0 down " + bound + "|signal node-0 KILL|wait node-0 down " + bound + "|record relaunch|relaunch node-0",
			"node-0 did not stop within " + bound + " of SIGTERM: its engine cannot be stopped gracefully"},
	} {
		env := &stepEnv{Env: actionstest.NewEnv(), status: c.status}
		env.OnWait = func(node, phase string, timeout time.Duration) error {
			if c.stuck && !slices.Contains(env.Calls(), "signal node-0 KILL") {
				return errors.New("did not reach down within the wait's timeout")
			}
			return nil
		}
		err := (&StepDown{}).Run(t.Context(), env)
		if got := strings.Join(env.Calls(), "|"); got != c.want {
			t.Errorf("%s: calls\n %s\nwant\n %s", c.name, got, c.want)
		}
		if c.err == "" && err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.err)
		}
	}
}
