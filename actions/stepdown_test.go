package actions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// stepEnv is a core env whose leader's status says how it steps down, and which notes every
// call the step-down makes.
type stepEnv struct {
	coreEnv
	status string
	stuck  bool // the engine does not exit on SIGTERM
	calls  []string
}

func (e *stepEnv) Admin(_ context.Context, node, path string) ([]byte, error) {
	e.calls = append(e.calls, "admin "+path)
	return nil, nil
}

func (e *stepEnv) EngineStatus(_ context.Context, node string) (engine.Status, error) {
	e.calls = append(e.calls, "status "+node)
	var st engine.Status
	err := json.Unmarshal([]byte(e.status), &st)
	return st, err
}

func (e *stepEnv) Signal(_ context.Context, node, as, signal string) error {
	e.calls = append(e.calls, "signal "+node+" "+signal)
	return nil
}

func (e *stepEnv) Wait(_ context.Context, node, phase string, timeout time.Duration) error {
	e.calls = append(e.calls, fmt.Sprintf("wait %s %s %s", node, phase, timeout))
	if e.stuck && !strings.Contains(strings.Join(e.calls, "|"), "KILL") {
		return errors.New("did not reach down within the wait's timeout")
	}
	return nil
}

func (e *stepEnv) Relaunch(_ context.Context, node string) error {
	e.calls = append(e.calls, "relaunch "+node)
	return nil
}

func (e *stepEnv) Record(ev rundir.Event) error {
	e.calls = append(e.calls, "event "+string(ev.Action.Name))
	return nil
}

// An engine whose status says step_down: relaunch is stepped down by SIGTERM, its exit and a
// relaunch, recorded as step_down then relaunch; one that does not say so gets POST /step-down;
// one that does not stop within the bound is killed, relaunched, and named.
func TestStepDownByRelaunch(t *testing.T) {
	bound := engine.StepDownStopBound.String()
	for _, c := range []struct {
		name, status string
		stuck        bool
		want         string
		err          string
	}{
		{"relaunch", `{"role":"leader","step_down":"relaunch"}`, false,
			"status node-0|event step_down|signal node-0 TERM|wait node-0 down " + bound + "|event relaunch|relaunch node-0", ""},
		{"in process", `{"role":"leader"}`, false, "status node-0|event step_down|admin /step-down", ""},
		{"stuck", `{"step_down":"relaunch"}`, true,
			"status node-0|event step_down|signal node-0 TERM|wait node-0 down " + bound + "|signal node-0 KILL|wait node-0 down " + bound + "|event relaunch|relaunch node-0",
			"node-0 did not stop within " + bound + " of SIGTERM: its engine cannot be stopped gracefully"},
	} {
		env := &stepEnv{status: c.status, stuck: c.stuck}
		err := (&StepDown{}).Run(t.Context(), env)
		if got := strings.Join(env.calls, "|"); got != c.want {
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
