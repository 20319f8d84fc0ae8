package runner

import (
	"context"
	"fmt"
	"slices"
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

// With engine.recording: windows the engines start with their recorders idle, and every server's
// recorder is started before each action (the lead), taken and stopped after its window (the
// tail), and off between windows far apart: the snapshot's window is recorded and stopped
// before the kill's starts. A kill's window waits for the relaunch.
func TestRecordingWindows(t *testing.T) {
	timeline := `timeline:
  - {at: 1200ms, snapshot: {}}
  - {at: 5s, kill: {node: follower, signal: KILL, relaunch_after: 300ms}}
`
	pb, err := playbooks.Parse("fake.yaml", []byte(strings.Replace(fmt.Sprintf(basePlaybook, "7s"),
		"engine: {sync_level: 1}", "engine: {sync_level: 1, recording: windows}", 1)+timeline), testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := pb.Plan()
	if err != nil {
		t.Fatal(err)
	}
	c := targettest.NewCluster()
	res := runFake(t, context.Background(), &targettest.Target{Cluster: c}, pl)
	if res.err != nil || res.outs[0].Status != rundir.StatusOK {
		t.Fatalf("run: %v (%+v)", res.err, res.outs)
	}
	// The stretches the recorders ran are in the manifest, for analysis to look for the
	// recording's causes only inside them.
	if len(res.man.Recorded) == 0 {
		t.Error("manifest has no recorded stretches")
	}
	for _, s := range res.man.Recorded {
		if s.ToNs <= s.FromNs {
			t.Errorf("recorded stretch %+v ends before it starts", s)
		}
	}
	calls := c.Calls()
	all := strings.Join(calls, "\n")
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		if !c.RecordingWindows(n) {
			t.Errorf("%s: started without recording_windows", n)
		}
	}
	for _, n := range []string{"node-0"} { // the first server: never the follower killed
		order := []string{
			n + " take go_trace start defer=false start",
			n + " take go_trace 01-snapshot defer=true stop",
			n + " take go_trace start defer=false start",
			n + " take go_trace 02-kill defer=true stop",
			n + " take go_trace end defer=false",
		}
		at := -1
		for _, want := range order {
			i := indexAfter(calls, want, at)
			if i < 0 {
				t.Fatalf("no %q after call %d; calls:\n%s", want, at, all)
			}
			at = i
		}
		if slices.Contains(calls, n+" take go_trace 01-snapshot defer=true") {
			t.Errorf("a take after the snapshot that did not stop the recorder; calls:\n%s", all)
		}
	}
}

// indexAfter is the index of the first call after from that starts with want, or -1.
func indexAfter(calls []string, want string, from int) int {
	for i := from + 1; i < len(calls); i++ {
		if strings.HasPrefix(calls[i], want) {
			return i
		}
	}
	return -1
}
