package actions

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

func ptr[T any](v T) *T { return &v }

// Every built-in kind's payload, written with rundir's EventLog and read back through Reader as
// its own type.
func TestPayloadsRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 21, 0, 0, 0, time.UTC)
	ev := func(i int, node string, name rundir.ActionName, moves rundir.LeaderMove, p any) rundir.Event {
		e, err := NewEvent(t0.Add(time.Duration(i)), node, name, moves, p)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	want := []rundir.Event{
		ev(0, "node-0", ActSnapshot, "", SnapshotAction{Leader: "node-0", Index: ptr(uint64(415)), LeaderTakeMs: ptr(6.36)}),
		ev(1, "node-2", ActKill, rundir.MovesIfLeader, KillAction{Signal: "KILL", As: "follower"}),
		ev(2, "node-2", ActRelaunch, "", nil),
		ev(3, "node-1", ActStepDown, rundir.MovesLeader, nil),
		ev(4, "", ActWaitFor, "", WaitForAction{Phase: engine.PhaseReady}),
		ev(5, "", ActBurst, "", rundir.BurstSeries{Messages: 2000, Every: time.Second, Count: 2}),
		ev(6, "node-1", ActPartition, rundir.MovesIfLeader, PartitionAction{As: "leader", ForMs: 40, Links: 4}),
		ev(7, "node-1", ActHeal, "", PartitionAction{As: "leader", Links: 4}),
		ev(8, "node-0", ActDelay, "", DelayAction{As: "leader", DelayMs: 3, Links: 5}),
		ev(9, "node-0", ActDelayHeal, "", DelayAction{As: "leader", DelayMs: 3, Links: 5}),
	}
	path := filepath.Join(t.TempDir(), rundir.EventsFile)
	log, err := rundir.CreateEventLog(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range want {
		if err := log.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	got, bad, err := ReadEvents(path)
	if err != nil || len(bad) > 0 || len(got) != len(want) {
		t.Fatalf("read %d events of %d, bad %v, %v", len(got), len(want), bad, err)
	}
	if s := SnapshotOf(got[0]); s == nil || *s.Index != 415 || *s.LeaderTakeMs != 6.36 || s.Leader != "node-0" {
		t.Errorf("snapshot %+v", s)
	}
	if k := KillOf(got[1]); k == nil || *k != (KillAction{Signal: "KILL", As: "follower"}) || got[1].Action.Moves != rundir.MovesIfLeader {
		t.Errorf("kill %+v", got[1].Action)
	}
	if KillOf(got[2]) != nil || got[2].Action.Payload != nil || got[3].Action.Moves != rundir.MovesLeader {
		t.Errorf("relaunch %+v, step_down %+v", got[2].Action, got[3].Action)
	}
	if w := payloadOf[WaitForAction](got[4], ActWaitFor); w == nil || w.Phase != engine.PhaseReady {
		t.Errorf("wait_for %+v", w)
	}
	if b := BurstOf(got[5]); b == nil || *b != (rundir.BurstSeries{Messages: 2000, Every: time.Second, Count: 2}) {
		t.Errorf("burst %+v", b)
	}
	if p, h := PartitionOf(got[6]), PartitionOf(got[7]); p == nil || h == nil || *p != (PartitionAction{As: "leader", ForMs: 40, Links: 4}) || h.Links != 4 {
		t.Errorf("partition %+v, heal %+v", p, h)
	}
	if d := DelayOf(got[9]); d == nil || !reflect.DeepEqual(*d, DelayAction{As: "leader", DelayMs: 3, Links: 5}) || DelayOf(got[6]) != nil {
		t.Errorf("delay_heal %+v", d)
	}
}

// Reader reads folders older rigs wrote: a snapshot's index from the note that carried it after
// the action (the note itself dropped), what kills, step-downs and partitions did to leadership
// from their kinds where the event does not say; and it refuses a payload that is not its kind's,
// at its line.
func TestReaderOlderFolders(t *testing.T) {
	lines := `{"t":"2026-12-02T21:14:01.461Z","kind":"action","node":"node-1","action":"snapshot","detail":{"leader":"node-1"}}
{"t":"2026-12-02T21:14:01.470Z","kind":"phase","node":"node-0","phase":"ready","from":"catching-up"}
{"t":"2026-12-02T21:14:01.472Z","kind":"note","node":"node-1","action":"snapshot","detail":{"index":415,"leader":"node-1","leader_take_ms":6.359}}
{"t":"2026-12-02T21:14:02.000Z","kind":"action","node":"node-2","action":"kill","detail":{"signal":"KILL"}}
{"t":"2026-12-02T21:14:03.000Z","kind":"action","node":"node-1","action":"step_down"}
{"t":"2026-12-02T21:14:04.000Z","kind":"action","node":"node-1","action":"partition","detail":{"links":4}}
{"t":"2026-12-02T21:14:05.000Z","kind":"action","node":"node-1","action":"delay","detail":{"links":4}}
{"t":"2026-12-02T21:14:06.000Z","kind":"action","node":"node-1","action":"kill","detail":{"signal":7}}
{"t":"2026-12-02T21:14:07.000Z","kind":"action","node":"node-1","action":"toy","detail":{"signal":7}}
`
	path := filepath.Join(t.TempDir(), rundir.EventsFile)
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	got, bad, err := ReadEvents(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 7 {
		t.Fatalf("read %d events, want 7 (the note folded, the bad kill refused): %+v", len(got), got)
	}
	if s := SnapshotOf(got[0]); s == nil || s.Index == nil || *s.Index != 415 || s.LeaderTakeMs == nil || *s.LeaderTakeMs != 6.359 || s.Leader != "node-1" {
		t.Errorf("snapshot action after folding the note: %+v", s)
	}
	for i, want := range []rundir.LeaderMove{"", "", rundir.MovesIfLeader, rundir.MovesLeader, rundir.MovesIfLeader, "", ""} {
		if a := got[i].Action; a != nil && a.Moves != want {
			t.Errorf("event %d (%s) moves %q, want %q", i, a.Name, a.Moves, want)
		}
	}
	if len(bad) != 1 || !strings.Contains(bad[0].Error(), rundir.EventsFile+":8: kill event detail") {
		t.Errorf("bad lines %v; want line 8, a kill whose signal is a number", bad)
	}
	if string(got[6].Action.Payload) != `{"signal":7}` {
		t.Errorf("an unknown kind's payload %s; want it kept as written", got[6].Action.Payload)
	}
}

// A folder written by an older rig (analysis's golden run: snapshot indexes in notes, no
// moves_leader) reads with every snapshot's index and the moves of its kill and step-down.
func TestReaderGoldenFolder(t *testing.T) {
	got, bad, err := ReadEvents(filepath.Join("..", "analysis", "testdata", "golden-run", rundir.EventsFile))
	if err != nil || len(bad) > 0 {
		t.Fatalf("read: %v, bad %v", err, bad)
	}
	snaps, moves := 0, map[rundir.ActionName]rundir.LeaderMove{}
	for _, e := range got {
		if e.Note != nil && e.Note.Action != "" {
			t.Errorf("a note about an action was kept: %+v", e.Note)
		}
		if s := SnapshotOf(e); s != nil {
			snaps++
			if s.Index == nil || s.Leader == "" {
				t.Errorf("snapshot at %s without its index: %+v", e.T, s)
			}
		}
		if e.Action != nil && e.Action.Moves != "" {
			moves[e.Action.Name] = e.Action.Moves
		}
	}
	if want := map[rundir.ActionName]rundir.LeaderMove{ActKill: rundir.MovesIfLeader, ActStepDown: rundir.MovesLeader}; snaps != 2 || !reflect.DeepEqual(moves, want) {
		b, _ := json.Marshal(moves)
		t.Errorf("%d snapshots, moves %s; want 2 and %v", snaps, b, want)
	}
}
