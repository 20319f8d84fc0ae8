package actions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// rotateKind lives in this file alone: a maintenance step that snapshots the cluster and then
// hands leadership on. It declares what its events are (a snapshot's request with its reader, a
// step-down listed, leadership moved), from which their windows' shapes follow (a snapshot's
// pause, a step-down and its failover); nothing in the analysis names it or its events.
type rotateKind struct{}

const (
	rotateName       = "rotate"
	rotateCheckpoint = rundir.ActionName("rotate_checkpoint")
	rotateHandOff    = rundir.ActionName("rotate_handoff")
)

type rotatePayload struct {
	Leader string  `json:"leader"`
	Index  *uint64 `json:"index,omitempty"`
}

func (*rotateKind) Kind() string                            { return rotateName }
func (*rotateKind) Fields() []actions.Field                 { return nil }
func (*rotateKind) Check(actions.Context) []actions.Problem { return nil }
func (*rotateKind) Describe(actions.Varied) string {
	return "rotate: snapshot, then hand leadership on"
}
func (*rotateKind) String() string { return rotateName }
func (*rotateKind) Events() []actions.EventKind {
	return []actions.EventKind{
		{Name: rotateCheckpoint, Payload: func() any { return &rotatePayload{} },
			Snapshot: func(e rundir.Event) (string, *uint64, bool) {
				var p rotatePayload
				if json.Unmarshal(e.Action.Payload, &p) != nil {
					return "", nil, false
				}
				return p.Leader, p.Index, true
			}},
		{Name: rotateHandOff, Moves: rundir.MovesLeader, Shapes: []actions.Shape{actions.ShapeStepDown}},
	}
}

func (*rotateKind) Run(ctx context.Context, env actions.Env) error {
	leader := env.Leader()
	if leader == "" {
		return fmt.Errorf("no leader to rotate")
	}
	body, err := env.Admin(ctx, leader, engine.AdminSnapshot)
	if err != nil {
		return err
	}
	var s engine.Snapshot
	if err := json.Unmarshal(body, &s); err != nil {
		return fmt.Errorf("snapshot answer %q: %w", body, err)
	}
	if err := actions.RecordAction(env, leader, string(rotateCheckpoint), rotatePayload{Leader: leader, Index: &s.Index}); err != nil {
		return err
	}
	ev, err := actions.NewEvent(time.Time{}, leader, rotateHandOff, rundir.MovesLeader, nil)
	if err == nil {
		err = env.Record(ev)
	}
	if err != nil {
		return err
	}
	_, err = env.Admin(ctx, leader, engine.AdminStepDown)
	return err
}

var registerRotate sync.Once

// A kind of its own whose events declare existing window shapes gets those shapes' rows, by the
// shapes' names, in summary.json (its lists and pooled figures) and in report.md's tables.
func TestKindOfDeclaredShapesGetsTheirRows(t *testing.T) {
	registerRotate.Do(func() { actions.Register(func() actions.Spec { return &rotateKind{} }) })
	dir := t.TempDir()
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

	log, err := rundir.CreateEventLog(filepath.Join(dir, rundir.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	add := func(ms int64, line string) {
		t.Helper()
		var e rundir.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("event %s: %v", line, err)
		}
		e.T = at(ms)
		if err := log.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	action := func(ms int64, node string, name rundir.ActionName, moves rundir.LeaderMove, payload any) {
		t.Helper()
		e, err := actions.NewEvent(at(ms), node, name, moves, payload)
		if err == nil {
			err = log.Add(e)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	index := uint64(9)
	add(-500, `{"kind":"role","node":"node-0","role":"leader"}`)
	add(0, `{"kind":"run","phase":"load_start"}`)
	add(1000, `{"kind":"run","phase":"warmup_end"}`)
	action(3000, "node-0", rotateCheckpoint, "", rotatePayload{Leader: "node-0", Index: &index})
	for i, n := range []string{"node-0", "node-1", "node-2"} {
		add(3100+int64(i)*50, fmt.Sprintf(`{"kind":"snapshot","node":%q,"detail":{"index":9,"take_ms":%d}}`, n, 20+i))
	}
	action(6000, "node-0", rotateHandOff, rundir.MovesLeader, nil)
	add(6040, `{"kind":"role","node":"node-1","role":"candidate"}`)
	add(6080, `{"kind":"role","node":"node-1","role":"leader"}`)
	add(6090, `{"kind":"role","node":"node-0","role":"follower"}`)
	add(20_000, `{"kind":"run","phase":"load_end"}`)
	add(20_100, `{"kind":"run","phase":"end"}`)
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}

	// A probe every 10 ms, answered in 1 ms but for the pause at each window.
	if err := os.MkdirAll(filepath.Join(dir, rundir.LoadgenDir), 0o755); err != nil {
		t.Fatal(err)
	}
	pw, err := rundir.CreateProbes(filepath.Join(dir, rundir.ProbesPath))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ms := int64(0); ms < 20_000; ms += 10 {
		lat := time.Millisecond
		if ms >= 3000 && ms < 3040 || ms >= 6000 && ms < 6080 {
			lat = 30 * time.Millisecond
		}
		if err := pw.Write(rundir.Probe{IntendedNs: at(ms).UnixNano(), LatencyNs: int64(lat), Outcome: rundir.ProbeOK}); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	st, _ := json.Marshal(rundir.ProbeStats{Scheduled: int64(n), Answered: int64(n)})
	if err := os.WriteFile(filepath.Join(dir, rundir.LoadgenDir, rundir.StatsFile), st, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"node-0", "node-1", "node-2"} {
		b, _ := json.Marshal(engine.Status{Node: node, Phase: engine.PhaseReady})
		if err := os.MkdirAll(filepath.Join(dir, node), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, node, rundir.StatusFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	if err := analysis.AnalyzeRun(dir, func(string) {}); err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Snapshots []struct {
			Index  *int64             `json:"index"`
			Leader string             `json:"leader"`
			TakeMs map[string]float64 `json:"take_ms"`
		} `json:"snapshots"`
		StepDowns []struct {
			From string `json:"from"`
			To   string `json:"to"`
		} `json:"step_downs"`
		Failovers []struct {
			Action string `json:"action"`
			To     string `json:"to"`
		} `json:"failovers"`
		Pooled map[string]json.RawMessage `json:"pooled"`
	}
	b, err := os.ReadFile(filepath.Join(dir, rundir.SummaryFile))
	if err == nil {
		err = json.Unmarshal(b, &sum)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Snapshots) != 1 || sum.Snapshots[0].Index == nil || *sum.Snapshots[0].Index != 9 || sum.Snapshots[0].Leader != "node-0" || sum.Snapshots[0].TakeMs["node-2"] != 22 {
		t.Errorf("summary.json snapshots %+v; want the checkpoint's, index 9 asked of node-0, node-2's take 22 ms", sum.Snapshots)
	}
	if len(sum.StepDowns) != 1 || sum.StepDowns[0].From != "node-0" || sum.StepDowns[0].To != "node-1" {
		t.Errorf("summary.json step_downs %+v; want the hand-off from node-0 to node-1", sum.StepDowns)
	}
	if len(sum.Failovers) != 1 || sum.Failovers[0].Action != string(rotateHandOff) || sum.Failovers[0].To != "node-1" {
		t.Errorf("summary.json failovers %+v; want the hand-off's, to node-1", sum.Failovers)
	}
	for _, sh := range []actions.Shape{actions.ShapeSnapshot, actions.ShapeStepDown, actions.ShapeFailover} {
		if len(sum.Pooled[string(sh)]) == 0 {
			t.Errorf("summary.json pooled %s missing (have %d kinds)", sh, len(sum.Pooled))
		}
	}

	rep, err := os.ReadFile(filepath.Join(dir, rundir.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## Snapshots", "| 1 | 3.0 s | 9 | 20.0 ms | 21.0 ms | 22.0 ms |",
		"## Step-downs", "| 1 | 6.0 s | node-0 | node-1 | 80.0 ms |",
		"## Failovers", "| 1 | 6.0 s | " + string(rotateHandOff) + " | node-0 | node-1 | 40.0 ms | 80.0 ms |",
	} {
		if !strings.Contains(string(rep), want) {
			t.Errorf("report.md lacks %q:\n%s", want, rep)
		}
	}
}

// A shape that follows from what an event declares is not also listed (Shapes), so no list can
// disagree with the reader or the phase its rows need.
func TestShapesListedOnlyWhereNothingElseSaysThem(t *testing.T) {
	for name, ek := range actions.Events() {
		for _, sh := range []actions.Shape{actions.ShapeSnapshot, actions.ShapeRestart, actions.ShapeFailover} {
			if slices.Contains(ek.Shapes, sh) {
				t.Errorf("%s: lists the %s shape, which follows from its Snapshot reader, NodePhase or Moves", name, sh)
			}
		}
	}
}
