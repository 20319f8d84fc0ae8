package analysis

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// stuntKind is a kind of this test's alone whose events declare the shapes of their windows
// (actions.Shape) and what the analysis builds the snapshot rows, the restart rows, their fault
// windows and the gc cause from: none of its event names is a built-in kind's, so a row the
// analysis makes of them it made from the declarations.
type stuntKind struct{}

const (
	stuntCheckpoint rundir.ActionName = "stunt_checkpoint"
	stuntCrash      rundir.ActionName = "stunt_crash"
	stuntRevive     rundir.ActionName = "stunt_revive"
	stuntSweep      rundir.ActionName = "stunt_sweep"
)

type stuntPayload struct {
	Leader string  `json:"leader"`
	Index  *uint64 `json:"index"`
	Signal string  `json:"signal"`
	engine.GCAnswer
}

func stuntOf(e rundir.Event) stuntPayload {
	var p stuntPayload
	json.Unmarshal(e.Action.Payload, &p)
	return p
}

func (*stuntKind) Kind() string                            { return "stunt" }
func (*stuntKind) Fields() []actions.Field                 { return nil }
func (*stuntKind) Check(actions.Context) []actions.Problem { return nil }
func (*stuntKind) Describe(actions.Varied) string          { return "stunt" }
func (*stuntKind) String() string                          { return "stunt" }
func (*stuntKind) Run(context.Context, actions.Env) error  { return nil }
func (*stuntKind) Events() []actions.EventKind {
	return []actions.EventKind{
		{Name: stuntCheckpoint, Snapshot: func(e rundir.Event) (string, *uint64, bool) {
			p := stuntOf(e)
			return p.Leader, p.Index, true
		}},
		{Name: stuntCrash, Moves: rundir.MovesIfLeader, NodePhase: rundir.PhaseDown,
			Down: func(e rundir.Event) (string, string) { return "stunt", stuntOf(e).Signal }},
		{Name: stuntRevive, NodePhase: engine.PhaseStarting},
		{Name: stuntSweep, Collected: func(e rundir.Event) (engine.GCAnswer, bool) { return stuntOf(e).GCAnswer, true }},
	}
}

var registerStunt sync.Once

// A kind's declarations, not its name, make the snapshot rows (its request's index matched to the
// nodes' takes), the restart rows (its signal, its relaunch, the phases to ready), the fault
// window named as the kind that took the node down, and the gc cause of a collection it asked for.
func TestRowsFromDeclaredEvents(t *testing.T) {
	registerStunt.Do(func() { actions.Register(func() actions.Spec { return &stuntKind{} }) })
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(20_000, 60, 12_000))
	f.action(3000, string(stuntCheckpoint), "node-0", map[string]any{"leader": "node-0", "index": 9})
	f.snap(3200, "node-0", 9, 150, nil)
	f.snap(3300, "node-2", 9, 170, nil)
	f.action(6000, string(stuntCrash), "node-1", map[string]any{"signal": "BOOM"})
	f.action(8000, string(stuntRevive), "node-1", nil)
	f.phase(8100, "node-1", engine.PhaseStarting)
	f.phase(9000, "node-1", engine.PhaseReady)
	f.action(12_000, string(stuntSweep), "node-0", map[string]any{"wall_ms": 60, "collections": 1, "pause_ms": 0.5})
	f.run(20_000, "load_end")
	f.run(20_500, "end")
	f.status("node-0", engine.Status{Phase: "ready"})
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Snapshots) != 1 || s.Snapshots[0].Index == nil || *s.Snapshots[0].Index != 9 || s.Snapshots[0].Leader != "node-0" ||
		s.Snapshots[0].TakeMs["node-2"] != 170 {
		t.Errorf("snapshots %+v, want one of index 9 asked of node-0 with node-2's take 170 ms", s.Snapshots)
	}
	if len(s.Restarts) != 1 {
		t.Fatalf("restarts %+v, want the crash's", s.Restarts)
	}
	r := s.Restarts[0]
	if r.Node != "node-1" || r.Signal != "BOOM" || r.KillS != 6 {
		t.Errorf("restart %+v, want node-1's BOOM at 6 s", r)
	}
	checkF(t, "relaunch", r.RelaunchS, 8)
	checkF(t, "launch to ready", r.LaunchToReadyMs, 1000)
	var named []string
	for _, w := range s.NormalLeftOut {
		named = append(named, w.What+" "+w.Node)
	}
	if !strings.Contains(strings.Join(named, ", "), "stunt node-1") {
		t.Errorf("fault windows %q, want the crash's named stunt", named)
	}
	if s.Excursions == nil || s.Excursions.Count != 1 {
		t.Fatalf("excursions %+v, want the stall at 12 s", s.Excursions)
	}
	var causes []string
	for _, c := range s.Excursions.List[0].Causes {
		causes = append(causes, string(c.Kind)+" "+c.Node+": "+c.Evidence)
	}
	if !strings.Contains(strings.Join(causes, "\n"), "gc node-0: gc_action: 1 span(s) covering 60.000 ms") {
		t.Errorf("causes of the stall at 12 s: %q, want gc from the answer its event declares", causes)
	}
}

// A power loss records kill events; its restart's fault window is named power_loss, a plain
// kill's kill, as the kill kind's Down says.
func TestFaultWindowNamedAsTheKindThatTookTheNodeDown(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(20_000, 1))
	f.action(4000, "kill", "node-1", map[string]any{"signal": "KILL", "power_loss": true})
	f.action(5000, "relaunch", "node-1", nil)
	f.phase(6000, "node-1", engine.PhaseReady)
	f.action(10_000, "kill", "node-2", map[string]any{"signal": "TERM"})
	f.action(11_000, "relaunch", "node-2", nil)
	f.phase(12_000, "node-2", engine.PhaseReady)
	f.run(20_000, "load_end")
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, w := range s.NormalLeftOut {
		named = append(named, w.What+" "+w.Node)
	}
	if got := strings.Join(named, ", "); !strings.Contains(got, "power_loss node-1") || !strings.Contains(got, "kill node-2") {
		t.Errorf("fault windows %q, want power_loss node-1 and kill node-2", got)
	}
	if len(s.Restarts) != 2 || s.Restarts[0].Signal != "KILL" || s.Restarts[1].Signal != "TERM" {
		t.Errorf("restarts %+v, want KILL then TERM", s.Restarts)
	}
}
