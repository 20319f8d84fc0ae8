package rundir_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/agent/disk"
	"github.com/rig-dev/rig/agent/facts"
	"github.com/rig-dev/rig/agent/sample"
	"github.com/rig-dev/rig/agent/supervise"
	"github.com/rig-dev/rig/agent/tune"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/rundir"
)

var t0 = time.Date(2026, 12, 2, 21, 0, 0, 123456789, time.UTC)

func ptr[T any](v T) *T { return &v }

// Every event kind, and an action's payload kept as written, written with EventLog and read with
// ReadEvents (the kinds' payloads are actions/'s, tested there).
func TestEventsRoundTrip(t *testing.T) {
	exit := &rundir.ExitStatus{T: t0, Code: -1, Signal: "KILL", Desc: "signal: killed"}
	want := []rundir.Event{
		{T: t0, Run: &rundir.Run{Phase: rundir.LoadStart}},
		{T: t0.Add(1), Node: "node-0", Action: &rundir.Action{Name: "toy", Payload: json.RawMessage(`{"leader":"node-0","index":415}`)}},
		{T: t0.Add(2), Node: "node-2", Action: &rundir.Action{Name: "toy", Moves: rundir.MovesIfLeader, Payload: json.RawMessage(`{"signal":"KILL"}`)}},
		{T: t0.Add(3), Node: "node-2", Action: &rundir.Action{Name: "toy_end"}},
		{T: t0.Add(7), Node: "node-2", Phase: &rundir.PhaseChange{From: engine.PhaseReady, To: rundir.PhaseDown, Exit: exit}},
		{T: t0.Add(8), Node: "node-2", Phase: &rundir.PhaseChange{To: engine.PhaseStarting, Launch: 2, PID: 4242}},
		{T: t0.Add(9), Node: "node-2", Phase: &rundir.PhaseChange{From: engine.PhaseStarting, To: engine.PhaseRestoring}},
		{T: t0.Add(10), Node: "node-0", Role: &rundir.RoleChange{From: engine.RoleFollower, To: engine.RoleLeader}},
		{T: t0.Add(11), Node: "node-1", Snapshot: &rundir.SnapshotTaken{From: "415", Snapshot: engine.Snapshot{Index: 1216, Term: 2, TakeMs: 2.1, PersistedMs: 2.2, Bytes: 320176, Orders: new(int64(10000)), Syncs: new(1)}}},
		{T: t0.Add(12), Node: "node-2", Snapshot: &rundir.SnapshotTaken{Snapshot: engine.Snapshot{Index: 415, Restored: true, RestoreMs: 1.3}}},
		{T: t0.Add(13), Note: &rundir.Note{Warning: "engine.sync_level read back as 1"}},
		{T: t0.Add(14), Node: "node-0", Note: &rundir.Note{From: engine.PhaseReady, Signal: "TERM"}},
		{T: t0.Add(15), Node: "node-0", Note: &rundir.Note{Text: "cpu: 3"}},
		{T: t0.Add(16), Node: "node-1", Election: &rundir.ElectionChange{From: "CLOSED", To: "CANVASS"}},
	}
	path := filepath.Join(t.TempDir(), rundir.EventsFile)
	log, err := rundir.CreateEventLog(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range want {
		if err := log.Add(e); err != nil {
			t.Fatalf("add %+v: %v", e, err)
		}
	}
	if err := log.Add(rundir.Event{T: t0}); err == nil {
		t.Error("an event without a payload was written")
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	got, bad, err := rundir.ReadEvents(path)
	if err != nil || len(bad) > 0 {
		t.Fatalf("read: %v, bad lines %v", err, bad)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d events, wrote %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			g, _ := json.Marshal(got[i])
			w, _ := json.Marshal(want[i])
			t.Errorf("event %d (%s):\n got  %s\n want %s", i, want[i].Kind(), g, w)
		}
	}
}

// Lines as rigs before this package wrote them: a note that carried an action's detail after
// it (kept as written, for actions.Reader to fold), a line of an unknown kind and a torn last line.
func TestEventsReadsOlderLines(t *testing.T) {
	lines := `{"t":"2026-12-02T21:14:01.461Z","kind":"action","node":"node-1","action":"snapshot","detail":{"leader":"node-1"}}
{"t":"2026-12-02T21:14:01.470Z","kind":"phase","node":"node-0","phase":"ready","from":"catching-up"}
{"t":"2026-12-02T21:14:01.472Z","kind":"note","node":"node-1","action":"snapshot","detail":{"index":415,"leader":"node-1","leader_take_ms":6.359}}
{"t":"2026-12-02T21:14:02.000Z","kind":"note","node":"node-2","from":"ready","detail":{"signal":"KILL"}}
{"t":"2026-12-02T21:14:03.000Z","kind":"gossip"}
{"t":"2026-12-02T21:14:04.000Z","kind":"action","action":"snap`
	path := filepath.Join(t.TempDir(), rundir.EventsFile)
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	got, bad, err := rundir.ReadEvents(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("read %d events, want 4 (action, phase, action note, signal note): %+v", len(got), got)
	}
	if a := got[0].Action; a == nil || a.Name != "snapshot" || string(a.Payload) != `{"leader":"node-1"}` {
		t.Errorf("action: %+v", a)
	}
	if n := got[2].Note; n == nil || n.Action != "snapshot" || !strings.Contains(string(n.Detail), `"index":415`) {
		t.Errorf("action note: %+v", n)
	}
	if got[3].Note == nil || got[3].Note.Signal != "KILL" || got[3].Note.From != "ready" {
		t.Errorf("signal note: %+v", got[3].Note)
	}
	if len(bad) != 2 || !strings.Contains(bad[0].Error(), rundir.EventsFile+":5:") || !strings.Contains(bad[1].Error(), ":6:") {
		t.Errorf("bad lines: %v, want lines 5 (unknown kind) and 6 (torn)", bad)
	}
	// A filter sees each event with those kept before it, may drop it, and may refuse it (a bad
	// line, with its place).
	got, bad, err = rundir.ReadEventsWith(path, func(e *rundir.Event, kept []rundir.Event) (bool, error) {
		if e.Note != nil && e.Note.Action != "" {
			return false, nil
		}
		if e.Phase != nil {
			return false, errors.New("no phases here")
		}
		return true, nil
	})
	if err != nil || len(got) != 2 || len(bad) != 3 || !strings.Contains(bad[0].Error(), rundir.EventsFile+":2: no phases here") {
		t.Errorf("filtered: %d events, bad %v, %v; want the action and the signal note, line 2 refused", len(got), bad, err)
	}
}

func TestManifestRoundTrip(t *testing.T) {
	pb := json.RawMessage(`{"name":"golden","engine":{"sync_level":2}}`)
	want := &rundir.Manifest{
		RunID: "20261202-211358-golden", Status: rundir.StatusOK, Started: t0, Ended: t0.Add(time.Minute),
		Target: "local", Round: 1, Settings: map[string]string{"engine.sync_level": "2"},
		Playbook: pb, ConfigHash: rundir.Hash(pb), Rig: rundir.Build(), CPUs: 2,
		LoadAvg:   rundir.LoadAvg{Start: []float64{0.25, 0.65, 0.47}, End: []float64{0.79, 0.7, 0.5}},
		Inventory: &inventory.Inventory{Target: "local", Nodes: []inventory.Node{{Name: "node-0", Role: inventory.RoleServer, Address: "127.0.21.11"}}},
		Facts:     map[string]facts.Facts{"node-0": {Kernel: "6.1.0", CPUs: 2}},
		Tuning: map[string]rundir.Tuning{"node-0": {
			Applied:  &tune.Report{Changes: []tune.Change{{Name: "vm.dirty_ratio", Before: "20", Want: "10", After: "10"}}},
			Reverted: &tune.Report{},
		}},
		Engines:      map[string]engine.Reported{"node-0": {"node": "node-0", "sync_level": float64(2), "snapshot_block": float64(16 << 20)}},
		Loadgen:      &rundir.ProbeStats{Start: t0, Rate: 200, Scheduled: 3200, Answered: 3200, Bursts: []rundir.BurstStats{{Messages: 2000, Bursts: []rundir.BurstResult{{Due: t0, Sent: 2000, DrainNs: 40e6}}}}},
		AgentCPU:     map[string]rundir.CPUShare{"node-0": {MeanPct: 0.4, MaxPct: 2}},
		ClockOffsets: map[string]rundir.ClockOffset{"node-0": {OffsetUs: -12, RTTUs: 80}},
		Disks:        map[string]disk.Result{"node-0": {Device: "/dev/vdb", FS: "xfs"}},
		Warnings:     []string{"w"},
		Phases:       []rundir.PhaseMark{{Name: "start", T: t0, LoadAvg: []float64{0.25, 0.65, 0.47}}},
	}
	dir := t.TempDir()
	if err := rundir.WriteManifest(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := rundir.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The playbook is stored as its owner encoded it; indentation is the manifest's.
	var g, w bytes.Buffer
	json.Compact(&g, got.Playbook)
	json.Compact(&w, want.Playbook)
	if g.String() != w.String() {
		t.Errorf("playbook %s, want %s", g.String(), w.String())
	}
	got.Playbook = want.Playbook
	if !reflect.DeepEqual(got, want) {
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		t.Errorf("manifest:\n got  %s\n want %s", gb, wb)
	}
}

func TestProbesRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), rundir.ProbesFile)
	w, err := rundir.CreateProbes(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []rundir.Probe{
		{IntendedNs: t0.UnixNano(), LatencyNs: 1_850_000, Outcome: rundir.ProbeOK},
		{IntendedNs: t0.UnixNano() + 5e6, LatencyNs: 5e9, Outcome: rundir.ProbeLost},
	}
	for _, p := range want {
		if err := w.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// A writer killed mid-record leaves a partial record: dropped, the rest kept.
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte{1, 2, 3})
	f.Close()
	got, err := rundir.ReadProbes(path)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ReadProbes = %+v, %v; want %+v", got, err, want)
	}
	os.WriteFile(path, []byte("not a probe file"), 0o644)
	if _, err := rundir.ReadProbes(path); err == nil {
		t.Fatal("a file without the magic was read as probes")
	}
}

// The agent's journal (agent/supervise) writes transitions.jsonl; ReadTransitions reads it back.
func TestTransitionsRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), rundir.TransitionsFile)
	j, err := supervise.OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	st := &engine.Status{Node: "node-0", Role: engine.RoleLeader, Phase: engine.PhaseReady, Term: 3, Now: t0}
	var want []rundir.Transition
	for _, tr := range []rundir.Transition{
		{T: t0, Node: "node-0", Launch: 1, PID: 10, Kind: rundir.TransLaunch},
		{T: t0.Add(time.Millisecond), PrevT: ptr(t0), Node: "node-0", Launch: 1, PID: 10, Kind: rundir.TransRole, From: engine.RoleFollower, To: engine.RoleLeader, Status: st},
		{T: t0.Add(2 * time.Millisecond), Node: "node-0", Launch: 1, PID: 10, Kind: rundir.TransPhase, From: engine.PhaseReady, To: rundir.PhaseDown, Exit: &rundir.ExitStatus{T: t0, Code: 1, Desc: "exit status 1"}},
	} {
		got, err := j.Append(tr)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, got)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := rundir.ReadTransitions(f)
	if err != nil || !reflect.DeepEqual(got, want) {
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		t.Fatalf("ReadTransitions: %v\n got  %s\n want %s", err, gb, wb)
	}
}

// The agent's OS sampler (agent/sample) writes samples from this machine's /proc;
// ReadSamplesFile reads them back.
func TestSamplesRoundTrip(t *testing.T) {
	s, err := sample.New(sample.Options{Interval: 20 * time.Millisecond, PIDs: []int{os.Getpid()}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "os.ndjson")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	if err := s.Run(ctx, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, err := rundir.ReadSamplesFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, smp := range got {
		if smp.Seq != i+1 || smp.CPUs != runtime.NumCPU() || smp.Time.IsZero() || len(smp.Procs) != 1 || smp.Procs[0].PID != os.Getpid() {
			t.Fatalf("sample %d: %+v", i, smp)
		}
	}
	if _, err := rundir.ReadSamples(strings.NewReader("")); !errors.Is(err, rundir.ErrNoSamples) {
		t.Fatalf("empty stream: %v, want ErrNoSamples", err)
	}
}

// An event log on a full device returns the write's error from Add, keeps the first in Err and
// reports it again from Close; nothing is dropped silently.
func TestEventLogErrorsAreKept(t *testing.T) {
	log, err := rundir.CreateEventLog("/dev/full")
	if err != nil {
		t.Skipf("no /dev/full here: %v", err)
	}
	err = log.Add(rundir.Event{Note: &rundir.Note{Text: "lost"}})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Add on a full device: %v, want ENOSPC", err)
	}
	if !errors.Is(log.Err(), syscall.ENOSPC) {
		t.Fatalf("Err after a failed Add: %v", log.Err())
	}
	if err := log.Close(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Close after a failed Add: %v, want the flush error", err)
	}
	if err := log.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := log.Add(rundir.Event{Note: &rundir.Note{Text: "late"}}); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Add after Close: %v, want os.ErrClosed", err)
	}
}

// The load generator's ledger of acknowledged orders reads back field for field; a torn last
// record is dropped.
func TestAckedRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), rundir.AckedFile)
	w, err := rundir.CreateAcked(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []rundir.Acked{
		{ID: 1<<63 | 7<<32 | 1, Instrument: 3, Side: 0, Price: 1, Qty: 1, Index: 42, AckNs: t0.UnixNano()},
		{ID: 1<<63 | 7<<32 | 2, Instrument: 15, Side: 1, Price: -5, Qty: 1 << 40, Index: 1<<64 - 1, AckNs: t0.UnixNano() + 1},
	}
	for _, a := range want {
		if err := w.Write(a); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(make([]byte, 20))
	f.Close()
	got, err := rundir.ReadAcked(path)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ReadAcked = %+v, %v; want %+v", got, err, want)
	}
	os.WriteFile(path, []byte("RIGPRB01"), 0o644)
	if _, err := rundir.ReadAcked(path); err == nil {
		t.Fatal("a probes file was read as a ledger")
	}
}

// What an action does to leadership is the event's to say, kept as written (an older line that
// does not say is read by its kind: actions.Reader).
func TestActionMovesLeader(t *testing.T) {
	ev := rundir.Event{T: time.Unix(1, 0).UTC(), Node: "node-1", Action: &rundir.Action{Name: "toy", Moves: rundir.MovesLeader}}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var back rundir.Event
	if err := json.Unmarshal(b, &back); err != nil || back.Action.Moves != rundir.MovesLeader {
		t.Fatalf("%s read back as %+v (%v)", b, back.Action, err)
	}
}
