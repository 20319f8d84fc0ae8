package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/rundir"
)

// ActSnapshot is the snapshot action's name in playbooks and events.
const ActSnapshot rundir.ActionName = "snapshot"

// Snapshot asks the leader for a cluster-wide snapshot at one log index.
type Snapshot struct{}

// SnapshotAction is the snapshot event's payload: a snapshot requested on the leader; Index is
// the log index the leader answered with (absent when it never answered).
type SnapshotAction struct {
	Leader       string   `json:"leader,omitempty"`
	Index        *uint64  `json:"index,omitempty"`
	LeaderTakeMs *float64 `json:"leader_take_ms,omitempty"`
}

// SnapshotOf is e's payload when e is a snapshot action, else nil.
func SnapshotOf(e rundir.Event) *SnapshotAction { return payloadOf[SnapshotAction](e, ActSnapshot) }

func (*Snapshot) Kind() string { return string(ActSnapshot) }
func (*Snapshot) Events() []EventKind {
	return []EventKind{{Name: ActSnapshot, Payload: func() any { return &SnapshotAction{} },
		Marker: color.RGBA{R: 0x1f, G: 0x5f, B: 0xd0, A: 0xff}, Snapshot: snapshotAsked}}
}

func snapshotAsked(e rundir.Event) (leader string, index *uint64, ok bool) {
	sa := SnapshotOf(e)
	if sa == nil {
		return "", nil, false
	}
	return sa.Leader, sa.Index, true
}
func (*Snapshot) Fields() []Field                     { return nil }
func (*Snapshot) Check(Context) []Problem             { return nil }
func (*Snapshot) Describe(Varied) string              { return "snapshot (cluster-wide, at one log index)" }
func (*Snapshot) String() string                      { return "snapshot on the leader" }
func (*Snapshot) AddWrites(w *driver.Workload, _ int) { w.Snapshots++ }
func (*Snapshot) Touches() Touch                      { return Touch{Leader: true} }

// Run asks the leader; the event is stamped with the request's time and written once the index
// is known (or the request failed).
func (*Snapshot) Run(ctx context.Context, env Env) (err error) {
	leader := env.Leader()
	if leader == "" {
		return fmt.Errorf("no leader to snapshot on")
	}
	act, at := &SnapshotAction{Leader: leader}, time.Now()
	defer func() {
		if rerr := record(env, at, leader, ActSnapshot, "", act); err == nil {
			err = rerr
		}
	}()
	body, err := env.Admin(ctx, leader, engine.AdminSnapshot)
	if err != nil {
		return err
	}
	var s engine.Snapshot
	if err := json.Unmarshal(body, &s); err != nil {
		return fmt.Errorf("snapshot answer %q: %w", body, err)
	}
	act.Index, act.LeaderTakeMs = &s.Index, &s.TakeMs
	env.Progress("snapshot at index %d: leader %s took %.1f ms (orders %s, %d bytes, syncs %s)", s.Index, leader, s.TakeMs, counted(s.Orders), s.Bytes, counted(s.Syncs))
	return nil
}

// counted prints a figure the engine may leave out: absent is not a zero.
func counted[T int | int64](v *T) string {
	if v == nil {
		return engine.NotSupported
	}
	return fmt.Sprint(*v)
}
