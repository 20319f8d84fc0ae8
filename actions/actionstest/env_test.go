package actionstest_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/actions/actionstest"
	"github.com/rig-dev/rig/rundir"
)

var _ actions.Env = (*actionstest.Env)(nil)

// References resolve as the runner resolves them: followers in name order, skipping the leader
// and servers that are down; a node the cluster lacks and a leaderless cluster are errors.
func TestResolveNode(t *testing.T) {
	e := actionstest.NewEnv()
	e.Servers, e.LeaderNode, e.Down = 4, "node-1", map[string]bool{"node-0": true}
	for ref, want := range map[string]string{"leader": "node-1", "follower": "node-2", "other-follower": "node-3", "node-0": "node-0"} {
		if got, err := e.ResolveNode(ref); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %s", ref, got, err, want)
		}
	}
	for _, ref := range []string{"node-4", "client-0", "node-x"} {
		if got, err := e.ResolveNode(ref); err == nil {
			t.Errorf("%s resolved to %s", ref, got)
		}
	}
	e.LeaderNode = ""
	if got, err := e.ResolveNode("follower"); err == nil {
		t.Errorf("follower without a leader: %s", got)
	}
}

// Events are kept through their JSON and stamped when unstamped; a scripted Record error keeps
// nothing; every call is noted in order, and Settle returns what Go's functions failed with.
func TestRecordCallsAndSettle(t *testing.T) {
	e := actionstest.NewEnv()
	before := time.Now()
	kill, err := actions.NewEvent(time.Time{}, "node-0", actions.ActKill, "", actions.KillAction{Signal: "TERM"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Record(kill); err != nil {
		t.Fatal(err)
	}
	e.OnRecord = func(rundir.Event) error { return errors.New("disk full") }
	if err := e.Record(rundir.Event{Note: &rundir.Note{Text: "lost"}}); err == nil {
		t.Error("a scripted Record error was not returned")
	}
	evs := e.Events()
	if len(evs) != 1 || evs[0].T.Before(before) || actions.KillOf(evs[0]).Signal != "TERM" {
		t.Errorf("events %+v", evs)
	}
	e.Go(t.Context(), func(ctx context.Context) error { return e.Relaunch(ctx, "node-2") })
	e.Go(t.Context(), func(context.Context) error { return errors.New("boom") })
	if err := e.Settle(); err == nil || err.Error() != "boom" {
		t.Errorf("Settle: %v; want boom", err)
	}
	if got, want := e.Calls(), []string{"record kill", "record note", "relaunch node-2"}; !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
}
