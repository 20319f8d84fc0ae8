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
	"github.com/rig-dev/rig/rundir"
)

// A kill resolves its node, records the kill before it signals, and relaunches the node after
// relaunch_after beside the timeline, recording the relaunch before it asks for it.
func TestKillRelaunchesAfter(t *testing.T) {
	env := actionstest.NewEnv()
	const after = 30 * time.Millisecond
	if err := (&Kill{Node: "follower", Signal: "TERM", RelaunchAfter: after}).Run(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	if err := env.Settle(); err != nil {
		t.Fatal(err)
	}
	want := []string{"resolve follower", "record kill", "signal node-1 TERM", "record relaunch", "relaunch node-1"}
	if got := env.Calls(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	evs := env.Events()
	if len(evs) != 2 {
		t.Fatalf("events %+v; want kill and relaunch", evs)
	}
	k := KillOf(evs[0])
	if evs[0].Node != "node-1" || k == nil || k.Signal != "TERM" || k.As != "follower" || evs[0].Action.Moves != rundir.MovesIfLeader {
		t.Errorf("kill event %+v %+v; want node-1 (follower) by TERM, moving the leader if it led", evs[0], k)
	}
	if !evs[1].IsAction(ActRelaunch) || evs[1].Node != "node-1" || evs[1].T.Sub(evs[0].T) < after {
		t.Errorf("relaunch event %+v, %s after the kill; want node-1's at least %s after", evs[1], evs[1].T.Sub(evs[0].T), after)
	}
}

// A kill without relaunch_after, one whose signal fails, and one whose timeline ends before the
// relaunch leave the node down.
func TestKillLeavesDown(t *testing.T) {
	env := actionstest.NewEnv()
	if err := (&Kill{Node: "leader", Signal: "KILL"}).Run(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	if err := env.Settle(); err != nil || slices.Contains(env.Calls(), "relaunch node-0") {
		t.Errorf("no relaunch_after: calls %q (%v)", env.Calls(), err)
	}

	failing := actionstest.NewEnv()
	failing.OnSignal = func(node, as, signal string) error { return errors.New("agent gone") }
	err := (&Kill{Node: "node-2", Signal: "KILL", RelaunchAfter: time.Millisecond}).Run(t.Context(), failing)
	if err == nil || !strings.Contains(err.Error(), "agent gone") {
		t.Errorf("a failed signal: %v", err)
	}
	if serr := failing.Settle(); serr != nil || slices.Contains(failing.Calls(), "relaunch node-2") {
		t.Errorf("a failed signal: calls %q (%v); want no relaunch", failing.Calls(), serr)
	}

	ended := actionstest.NewEnv()
	ctx, cancel := context.WithCancel(t.Context())
	if err := (&Kill{Node: "leader", Signal: "KILL", RelaunchAfter: time.Hour}).Run(ctx, ended); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := ended.Settle(); err != nil || slices.Contains(ended.Calls(), "relaunch node-0") {
		t.Errorf("a timeline over before the relaunch: calls %q (%v)", ended.Calls(), err)
	}
}

// A gc asks the resolved node's engine, and records the engine's answer stamped when it asked.
func TestGCRecordsAnswer(t *testing.T) {
	env := actionstest.NewEnv()
	env.OnAdmin = func(node, path string) ([]byte, error) {
		return []byte(`{"wall_ms":3.5,"collections":2,"pause_ms":1.25}`), nil
	}
	before := time.Now()
	if err := (&GC{Node: "other-follower"}).Run(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	want := []string{"resolve other-follower", "admin node-2 " + engine.AdminGC, "record gc"}
	if got := env.Calls(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	evs := env.Events()
	if len(evs) != 1 || evs[0].Node != "node-2" || !evs[0].IsAction(ActGC) || evs[0].T.Before(before) {
		t.Fatalf("events %+v; want node-2's gc", evs)
	}
	var p GCAction
	if err := json.Unmarshal(evs[0].Action.Payload, &p); err != nil ||
		p != (GCAction{As: "other-follower", GCAnswer: engine.GCAnswer{WallMs: 3.5, Collections: 2, PauseMs: 1.25}}) {
		t.Errorf("payload %s (%v)", evs[0].Action.Payload, err)
	}

	bad := actionstest.NewEnv()
	bad.OnAdmin = func(node, path string) ([]byte, error) { return []byte("not json"), nil }
	if err := (&GC{Node: "leader"}).Run(t.Context(), bad); err == nil || !strings.Contains(err.Error(), "not json") || len(bad.Events()) != 0 {
		t.Errorf("an answer that is not JSON: %v, events %+v", err, bad.Events())
	}
}
