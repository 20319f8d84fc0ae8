package runner

import (
	"errors"
	"strings"
	"testing"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/playbooks"
)

// A setting the engine already reports at "starting" with another value fails the wait for
// readiness at once, naming node, setting, in effect and asked; one it does not report yet is
// left for the check after readiness, and a node that has not answered is not checked.
func TestEffectBeforeReady(t *testing.T) {
	pb, err := playbooks.Parse("hb.yaml", []byte("name: hb\ncluster: {servers: 3, clients: 1}\nengine: {heartbeat_timeout: 2s}\nload: {probe_rate: 100/s}\nduration: 10s\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := &run{pb: pb, nodes: map[string]*server{
		"node-0": {status: engine.Status{Phase: engine.PhaseStarting, Config: engine.Reported{"heartbeat_timeout": "2000ns"}}},
		"node-1": {status: engine.Status{Phase: engine.PhaseStarting, Config: engine.Reported{"node": "node-1"}}},
		"node-2": {},
	}}
	check := r.effectBeforeReady()
	if check == nil {
		t.Fatal("no check for the reference engine's settings")
	}
	err = check("node-0")
	if !errors.Is(err, ErrSettingNotInEffect) {
		t.Fatalf("node-0 reports heartbeat_timeout 2µs: got %v, want ErrSettingNotInEffect", err)
	}
	want := "node-0: engine.heartbeat_timeout is 2µs in effect (GET /status config.heartbeat_timeout), the playbook asked for 2s"
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "phase starting") {
		t.Errorf("error %q does not say %q and the phase", err, want)
	}
	for _, n := range []string{"node-1", "node-2"} {
		if err := check(n); err != nil {
			t.Errorf("%s (setting not reported yet / no answer): %v", n, err)
		}
	}
}
