package actions

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/actions/actionstest"
	"github.com/rig-dev/rig/rundir"
)

// cutEnv is the fake env plus a LinkCutter that cuts 4 links of a node and heals them.
type cutEnv struct{ *actionstest.Env }

func (e cutEnv) Isolate(_ context.Context, nodes ...string) (int, error) {
	e.Note("isolate %s", strings.Join(nodes, ","))
	return 4, nil
}

func (e cutEnv) Heal(_ context.Context, nodes ...string) (int, error) {
	e.Note("heal %s", strings.Join(nodes, ","))
	return 4, nil
}

// A partition cuts the resolved node's links, records them, and heals them after for, recorded
// as heal; a timeline that ends first heals them at once.
func TestPartitionCutsAndHeals(t *testing.T) {
	env := cutEnv{actionstest.NewEnv()}
	const d = 40 * time.Millisecond
	if err := (&Partition{Node: "leader", For: d}).Run(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	if err := env.Settle(); err != nil {
		t.Fatal(err)
	}
	want := []string{"resolve leader", "isolate node-0", "record partition", "heal node-0", "record heal"}
	if got := env.Calls(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	evs := env.Events()
	if len(evs) != 2 {
		t.Fatalf("events %+v", evs)
	}
	pa := PartitionOf(evs[0])
	if pa == nil || pa.As != "leader" || pa.Links != 4 || pa.ForMs != 40 || evs[0].Action.Moves != rundir.MovesIfLeader {
		t.Errorf("partition %+v; want the leader's 4 links for 40 ms, moving the leader", pa)
	}
	if !evs[1].IsAction(ActHeal) || evs[1].Node != "node-0" || evs[1].T.Sub(evs[0].T) < d {
		t.Errorf("heal %+v, %s after; want node-0's heal at least %s after", evs[1], evs[1].T.Sub(evs[0].T), d)
	}

	early := cutEnv{actionstest.NewEnv()}
	ctx, cancel := context.WithCancel(t.Context())
	if err := (&Partition{Node: "node-2", For: time.Hour}).Run(ctx, early); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := early.Settle(); err != nil {
		t.Fatal(err)
	}
	if got := early.Calls(); !slices.Contains(got, "heal node-2") || got[len(got)-1] != "record heal" {
		t.Errorf("a timeline over before the heal: calls %q; want node-2 healed and recorded", got)
	}
}

// wait_for resolves its node, records itself, then waits with the entry's phase and timeout;
// without a node it waits for every server; the wait's error is the entry's.
func TestWaitForWaits(t *testing.T) {
	env := actionstest.NewEnv()
	if err := (&WaitFor{Node: "follower", Phase: "ready", Timeout: 7 * time.Second}).Run(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	if got, want := env.Calls(), []string{"resolve follower", "record wait_for", "wait node-1 ready 7s"}; !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	all := actionstest.NewEnv()
	all.OnWait = func(node, phase string, timeout time.Duration) error { return errors.New("node-2 not ready") }
	err := (&WaitFor{Phase: "ready", Timeout: time.Second}).Run(t.Context(), all)
	if err == nil || !strings.Contains(err.Error(), "node-2 not ready") {
		t.Errorf("a wait that fails: %v", err)
	}
	if got, want := all.Calls(), []string{"record wait_for", "wait  ready 1s"}; !slices.Equal(got, want) {
		t.Errorf("every server: calls %q, want %q", got, want)
	}
}
