package runner

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/target/targettest"
)

// With engine.recording: on, every server's recording is taken after each timeline action
// (deferred: not read during the load) and at the end (read), before the engines stop; the
// start request names the format (the reference engine's: its Go flight recorder), and a take's
// note is warned about once per node. Off, nothing is taken.
func TestRecordingTakes(t *testing.T) {
	timeline := `timeline:
  - {at: 200ms, snapshot: {}}
  - {at: 400ms, kill: {node: follower, signal: KILL, relaunch_after: 100ms}}
`
	parse := func(rec string) *playbooks.Plan {
		pb, err := playbooks.Parse("fake.yaml", []byte(strings.Replace(fmt.Sprintf(basePlaybook, "2s"),
			"engine: {sync_level: 1}", "engine: {sync_level: 1, recording: "+rec+"}", 1)+timeline), testDrivers)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := pb.Plan()
		if err != nil {
			t.Fatal(err)
		}
		return pl
	}
	c := targettest.NewCluster()
	res := runFake(t, context.Background(), &targettest.Target{Cluster: c}, parse(`"on"`))
	if res.err != nil || res.outs[0].Status != rundir.StatusOK {
		t.Fatalf("run: %v (%+v)", res.err, res.outs)
	}
	for _, n := range []string{"node-0", "node-1"} {
		for _, call := range []string{n + " take go_trace 01-snapshot defer=true", n + " take go_trace end defer=false"} {
			if !c.Called(call) {
				t.Errorf("no call %q; calls:\n%s", call, strings.Join(c.Calls(), "\n"))
			}
		}
		if i, j := indexOf(c.Calls(), n+" take go_trace end"), indexOf(c.Calls(), n+" POST /engine/stop"); i < 0 || j < i {
			t.Errorf("%s: the last take must come before the engine stops: %q", n, c.Calls())
		}
	}
	if !c.Called("node-0 take go_trace 02-kill defer=true") {
		t.Errorf("no take after the kill; calls:\n%s", strings.Join(c.Calls(), "\n"))
	}
	notes := 0
	for _, w := range res.man.Warnings {
		if strings.Contains(w, "engine recording on node-0: a note from node-0") {
			notes++
		}
	}
	if notes != 1 {
		t.Errorf("node-0's note warned %d times, want once: %q", notes, res.man.Warnings)
	}

	c = targettest.NewCluster()
	res = runFake(t, context.Background(), &targettest.Target{Cluster: c}, parse(`"off"`))
	if res.err != nil || c.Called("node-0 POST /engine/recording") {
		t.Errorf("recording off: %v; calls:\n%s", res.err, strings.Join(c.Calls(), "\n"))
	}
}
