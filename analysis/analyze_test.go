package analysis

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// none marks a figure that must be absent (nil) in want().
var none = math.NaN()

func opt(v float64) *float64 {
	if math.IsNaN(v) {
		return nil
	}
	return &v
}

// want builds the expected Stats; latencies in µs.
func want(n, lost int, p50, p99, p999, max float64) Stats {
	return Stats{N: n, Lost: lost, P50Us: opt(p50), P99Us: opt(p99), P999Us: opt(p999), MaxUs: opt(max)}
}

func checkStats(t *testing.T, name string, got, exp Stats) {
	t.Helper()
	got.P90Us = nil // checked on its own in TestPercentileThresholds
	if !reflect.DeepEqual(got, exp) {
		t.Errorf("%s:\n got  %s\n want %s", name, fmtStats(got), fmtStats(exp))
	}
}

func fmtStats(s Stats) string {
	f := func(p *float64) string {
		if p == nil {
			return "nil"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("n=%d lost=%d p50=%s p99=%s p999=%s max=%s", s.N, s.Lost, f(s.P50Us), f(s.P99Us), f(s.P999Us), f(s.MaxUs))
}

func checkF(t *testing.T, name string, got *float64, exp float64) {
	t.Helper()
	switch {
	case math.IsNaN(exp) && got != nil:
		t.Errorf("%s = %v, want absent", name, *got)
	case !math.IsNaN(exp) && got == nil:
		t.Errorf("%s absent, want %v", name, exp)
	case got != nil && *got != exp:
		t.Errorf("%s = %v, want %v", name, *got, exp)
	}
}

func TestAnalyzeFollowerRestart(t *testing.T) {
	s, err := Analyze(followerRestartRun(t))
	if err != nil {
		t.Fatal(err)
	}
	if s.RunID != "20250301-120000-follower-restart" || s.Playbook != "follower-restart" || s.Status != "interrupted" {
		t.Errorf("header: %q %q %q", s.RunID, s.Playbook, s.Status)
	}

	st := s.Settings
	if st.CPUs != 2 || st.ServerNodes != 3 || st.LoadS != 60.5 || st.WarmupS != 2 || st.ProbeRate != 99.2 {
		t.Errorf("settings: %+v", st)
	}
	if *st.SyncLevel != 2 || *st.SnapshotBlock != 16<<20 || *st.EncodeThreads != 8 || *st.PreloadOrders != 5_000_000 || *st.PlannedProbeRate != 100 {
		t.Errorf("playbook settings: %+v", st)
	}

	// 200 warm-up probes at 100 ms would move p99 if they counted.
	if s.WarmupProbes != 200 {
		t.Errorf("warmup probes = %d, want 200", s.WarmupProbes)
	}
	checkStats(t, "probes", s.Probes, want(5797, 3, 1500, 3000, 3000, 450_000))
	// Outside the snapshot windows [9, 11.5] and [49, 51.6] and the fault windows: node-2's kill
	// [19, 31] (ready at 31 s, answered at the pre-kill median at once after it) and node-1's
	// kill from 39 s on (never ready again). Left: [2, 9), (11.5, 19), (31, 39) at 1 ms, with
	// the 7 ms probe at 5.0 s; the 450 ms stall, the down and rejoining latencies and the lost
	// probes are gone.
	checkStats(t, "normal", s.Normal, want(2248, 0, 1000, 1000, 1000, 7000))
	wantOut := []FaultWindow{{"snapshot", "", 9, 11.5}, {"kill", "node-2", 19, 31}, {"kill", "node-1", 39, 60.5}, {"snapshot", "", 49, 51.6}}
	if !reflect.DeepEqual(s.NormalLeftOut, wantOut) {
		t.Errorf("normal left out %+v, want %+v", s.NormalLeftOut, wantOut)
	}

	if len(s.Snapshots) != 2 {
		t.Fatalf("snapshots: %d rows", len(s.Snapshots))
	}
	s1, s2 := s.Snapshots[0], s.Snapshots[1]
	if s1.AtS != 10 || s1.Index == nil || *s1.Index != 500 || s1.Leader != "node-0" {
		t.Errorf("snapshot 1 header: %+v", s1)
	}
	if !reflect.DeepEqual(s1.TakeMs, map[string]float64{"node-0": 150, "node-1": 180, "node-2": 200}) {
		t.Errorf("snapshot 1 takes (the restore on node-2 at 30.3 s must not count): %v", s1.TakeMs)
	}
	if s1.PersistedMs["node-0"] != 160 || s1.Bytes != 1_000_000 {
		t.Errorf("snapshot 1 persisted/bytes: %v %d", s1.PersistedMs, s1.Bytes)
	}
	checkF(t, "snapshot 1 finished", s1.FinishedS, 10.5)
	// The exclusion window opens 1 s early; the pause is taken from the trigger on.
	if s1.WindowFromS != 9 || s1.WindowToS != 11.5 || s1.PauseFromS != 10 || s1.PauseToS != 11.5 || s1.WindowProbes != 151 || s1.WindowLost != 0 {
		t.Errorf("snapshot 1 window: [%v, %v] pause [%v, %v] probes %d lost %d, want [9, 11.5] [10, 11.5] 151 0",
			s1.WindowFromS, s1.WindowToS, s1.PauseFromS, s1.PauseToS, s1.WindowProbes, s1.WindowLost)
	}
	checkF(t, "snapshot 1 pause", s1.ClientPauseMs, 450)
	checkF(t, "snapshot 1 pause at", s1.PauseAtS, 10)
	checkF(t, "snapshot 1 normal p50", s1.NormalP50Us, 1000)
	if s1.PauseLowerBound {
		t.Error("snapshot 1: pause marked a lower bound without a lost probe")
	}

	if s2.AtS != 50 || s2.Index == nil || *s2.Index != 900 {
		t.Errorf("snapshot 2: index from the runner's note: %+v", s2)
	}
	if !reflect.DeepEqual(s2.TakeMs, map[string]float64{"node-0": 300, "node-1": 250, "node-2": 320}) {
		t.Errorf("snapshot 2 takes: %v", s2.TakeMs)
	}
	// node-1 was restoring at the action: its late take must not stretch the window to 59 s.
	checkF(t, "snapshot 2 finished", s2.FinishedS, 50.6)
	if s2.WindowFromS != 49 || s2.WindowToS != 51.6 || s2.WindowProbes != 161 || s2.WindowLost != 1 {
		t.Errorf("snapshot 2 window: [%v, %v] probes %d lost %d, want [49, 51.6] 161 1", s2.WindowFromS, s2.WindowToS, s2.WindowProbes, s2.WindowLost)
	}
	// The probe lost at 50.5 s counts as waiting until load end at 60.5 s.
	checkF(t, "snapshot 2 pause", s2.ClientPauseMs, 10_000)
	checkF(t, "snapshot 2 pause at", s2.PauseAtS, 50.5)
	if !s2.PauseLowerBound {
		t.Error("snapshot 2: a pause set by a lost probe must be a lower bound")
	}

	if len(s.Restarts) != 2 {
		t.Fatalf("restarts: %d rows", len(s.Restarts))
	}
	r1, r2 := s.Restarts[0], s.Restarts[1]
	allUp := Window{Stats: want(1549, 0, 1000, 1000, 1000, 7000), FromS: 2, ToS: 20, ExcludedS: 2.5}
	if r1.Node != "node-2" || r1.Signal != "KILL" || r1.KillS != 20 {
		t.Errorf("restart 1 header: %+v", r1)
	}
	checkF(t, "restart 1 relaunch", r1.RelaunchS, 30)
	checkF(t, "restart 1 ready", r1.ReadyS, 31)
	checkF(t, "restart 1 launch->ready", r1.LaunchToReadyMs, 1000)
	if exp := map[string]float64{"starting": 200, "restoring": 200, "replaying": 100, "catching-up": 500}; !reflect.DeepEqual(r1.PhasesMs, exp) || r1.OpenPhase != "" {
		t.Errorf("restart 1 phases: %v open %q, want %v", r1.PhasesMs, r1.OpenPhase, exp)
	}
	checkWindow(t, "restart 1 all_up", r1.Windows.AllUp, allUp)
	// [20, 30): 29.99 s (2.5 ms) is in, 30.0 s (4 ms) is not; p99.9 needs n >= 1000 and n is 999.
	checkWindow(t, "restart 1 one_down", r1.Windows.OneDown, Window{Stats: want(999, 1, 2000, 2000, none, 2500), FromS: 20, ToS: 30})
	// [30, 31): 99 answered + 1 lost: p99 needs n >= 100.
	checkWindow(t, "restart 1 rejoining", deref(t, r1.Windows.Rejoining), Window{Stats: want(99, 1, 3000, none, none, 4000), FromS: 30, ToS: 31})

	if r2.Node != "node-1" || r2.KillS != 40 || r2.ReadyS != nil || r2.LaunchToReadyMs != nil {
		t.Errorf("restart 2 (never ready): %+v", r2)
	}
	checkF(t, "restart 2 relaunch", r2.RelaunchS, 45)
	if exp := map[string]float64{"starting": 1000, "restoring": 15000}; !reflect.DeepEqual(r2.PhasesMs, exp) || r2.OpenPhase != "restoring" {
		t.Errorf("restart 2 phases: %v open %q, want %v open restoring", r2.PhasesMs, r2.OpenPhase, exp)
	}
	checkWindow(t, "restart 2 all_up", r2.Windows.AllUp, allUp)
	checkWindow(t, "restart 2 one_down", r2.Windows.OneDown, Window{Stats: want(500, 0, 2000, 2000, none, 2000), FromS: 40, ToS: 45})
	checkWindow(t, "restart 2 rejoining", deref(t, r2.Windows.Rejoining),
		Window{Stats: want(1499, 1, 1500, 1500, 1500, 1500), FromS: 45, ToS: 60.5, Open: true, OverlapsSnapshot: true})

	expNodes := map[string]NodeFinal{
		"node-0": {StateHash: "h1", StateHashAt: 1000, Phase: "ready", Role: "leader", AppliedIndex: 1000, Orders: ptr(42)},
		"node-1": {StateHash: "h1", StateHashAt: 1000, Phase: "restoring", Role: "follower", AppliedIndex: 1000, Orders: ptr(42)},
		"node-2": {StateHash: "h2", StateHashAt: 999, Phase: "ready", Role: "follower", AppliedIndex: 999, Orders: ptr(41)},
	}
	if !reflect.DeepEqual(s.Nodes, expNodes) {
		t.Errorf("nodes (the client's folder node-3 is not a server):\n got  %+v\n want %+v", s.Nodes, expNodes)
	}
	// node-2's h2 is of another position than the others' h1: nothing to compare it with.
	if s.StateHashAgree || s.StateHashes.Result != AgreementNotChecked || !strings.Contains(s.StateHashes.Reason, "node-2 at 999; node-0, node-1 at 1000") {
		t.Errorf("state hashes h1, h1 at 1000, h2 at 999: %+v", s.StateHashes)
	}

	if s.LeaderAtLoadStart != "node-0" || len(s.LeaderChanges) != 0 {
		t.Errorf("leader: %q changes %v", s.LeaderAtLoadStart, s.LeaderChanges)
	}
	expActs := []ActionMark{{10, "snapshot", "node-0", ""}, {20, "kill", "node-2", rundir.MovesIfLeader}, {30, "relaunch", "node-2", ""},
		{40, "kill", "node-1", rundir.MovesIfLeader}, {45, "relaunch", "node-1", ""}, {50, "snapshot", "node-0", ""}}
	if !reflect.DeepEqual(s.Actions, expActs) {
		t.Errorf("actions: %v", s.Actions)
	}

	expWarn := []string{
		"run interrupted",
		"load average 3.50 at end exceeds 2 CPUs",
		"engine.sync_level read back as 1 (at 15.0 s on node-1)",
		"node-1 relaunched at 45.0 s never reached ready (still restoring at 61.0 s)",
	}
	if len(s.Warnings) != len(expWarn) {
		t.Errorf("warnings: got %d, want %d:\n%s", len(s.Warnings), len(expWarn), strings.Join(s.Warnings, "\n"))
	}
	for _, w := range expWarn {
		if !slices.ContainsFunc(s.Warnings, func(g string) bool { return strings.Contains(g, w) }) {
			t.Errorf("no warning containing %q in:\n%s", w, strings.Join(s.Warnings, "\n"))
		}
	}
	for _, w := range s.Warnings {
		if strings.Contains(w, "at start exceeds") {
			t.Errorf("load 1.00 at start on 2 CPUs flagged: %q", w)
		}
	}
}

func deref(t *testing.T, w *Window) Window {
	t.Helper()
	if w == nil {
		t.Fatal("window missing")
	}
	return *w
}

func checkWindow(t *testing.T, name string, got, exp Window) {
	t.Helper()
	checkStats(t, name, got.Stats, exp.Stats)
	got.Stats, exp.Stats = Stats{}, Stats{}
	if got != exp {
		t.Errorf("%s bounds:\n got  %+v\n want %+v", name, got, exp)
	}
}

func TestPercentileThresholds(t *testing.T) {
	seq := func(n int) []int64 { // 1..n µs, shuffled order does not matter: statsOf sorts
		v := make([]int64, n)
		for i := range v {
			v[len(v)-1-i] = int64(i+1) * 1000
		}
		return v
	}
	checkStats(t, "n=1", statsOf(seq(1), 0), want(1, 0, 1, none, none, 1))
	checkStats(t, "n=99", statsOf(seq(99), 2), want(99, 2, 50, none, none, 99))
	checkStats(t, "n=100", statsOf(seq(100), 0), want(100, 0, 50, 99, none, 100))
	checkStats(t, "n=999", statsOf(seq(999), 0), want(999, 0, 500, 990, none, 999))
	// Rank 999 of 1000, not 1000: the rank is integer arithmetic, 0.999*1000 in floating point is not.
	checkStats(t, "n=1000", statsOf(seq(1000), 0), want(1000, 0, 500, 990, 999, 1000))
	checkStats(t, "n=0", statsOf(nil, 5), want(0, 5, none, none, none, none))
	for _, c := range []struct {
		n    int
		want *float64
	}{{9, nil}, {10, opt(9)}, {100, opt(90)}, {1000, opt(900)}} {
		if got := statsOf(seq(c.n), 0).P90Us; !reflect.DeepEqual(got, c.want) {
			t.Errorf("n=%d: p90 %v, want %v", c.n, fmtPtr(got), fmtPtr(c.want))
		}
	}
}

func fmtPtr(p *float64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

// TestSnapshotTakesNotRestores: without an index in the action or a note, the index comes from
// the first take after the action; a node relaunched after the action reports the snapshot it
// restored, which is not a take, flagged or not.
func TestSnapshotTakesNotRestores(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(100, "warmup_end")
	f.snap(500, "node-0", 3, 40, nil) // an earlier snapshot, before the action: not this one
	f.action(600, "kill", "node-1", map[string]any{"signal": "KILL"})
	f.action(1000, "snapshot", "node-0", map[string]any{"leader": "node-0", "index": 7})
	f.snap(1200, "node-0", 7, 120, nil)
	f.snap(1250, "node-2", 7, 130, nil)
	f.action(3000, "relaunch", "node-1", nil)
	f.snap(4000, "node-1", 7, 15, nil)                              // restored, though not flagged
	f.snap(4100, "node-2", 7, 99, map[string]any{"restored": true}) // flagged restore
	f.phase(5000, "node-1", engine.PhaseReady)
	f.run(6000, "load_end")
	ps := []rundir.Probe{}
	for ms := int64(0); ms < 6000; ms += 50 {
		ps = append(ps, rundir.Probe{IntendedNs: at(ms).UnixNano(), LatencyNs: 2_000_000, Outcome: rundir.ProbeOK})
	}
	f.probes(ps)
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Snapshots) != 1 {
		t.Fatalf("snapshots: %+v", s.Snapshots)
	}
	r := s.Snapshots[0]
	if r.Index == nil || *r.Index != 7 || !reflect.DeepEqual(r.TakeMs, map[string]float64{"node-0": 120, "node-2": 130}) {
		t.Errorf("index %v takes %v, want 7 and node-0 120, node-2 130", r.Index, r.TakeMs)
	}
	checkF(t, "finished", r.FinishedS, 1.25)
	// Window [0, 2.25]; the pause over [1, 2.25] (from the trigger), closed, probes every 50 ms:
	// 1.0 .. 2.25 is 26 probes.
	if r.WindowFromS != 0 || r.WindowToS != 2.25 || r.PauseFromS != 1 || r.WindowProbes != 26 {
		t.Errorf("window [%v, %v], pause from %v, with %d probes, want [0, 2.25] from 1 with 26", r.WindowFromS, r.WindowToS, r.PauseFromS, r.WindowProbes)
	}
	checkF(t, "pause", r.ClientPauseMs, 2)
	// The kill has a relaunch and a ready: one restart; the node-1 folder is absent so its
	// final state is unknown and the hashes cannot agree.
	if len(s.Restarts) != 1 || s.Restarts[0].LaunchToReadyMs == nil || *s.Restarts[0].LaunchToReadyMs != 2000 {
		t.Errorf("restart: %+v", s.Restarts)
	}
	if s.StateHashAgree || !s.Nodes["node-1"].StatusMissing {
		t.Errorf("nodes %+v agree %v", s.Nodes, s.StateHashAgree)
	}
}

func TestStateHashAgree(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		f.status(n, engine.Status{Phase: "ready", AppliedIndex: 77, StateHash: "abc"})
	}
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	if !s.StateHashAgree || len(s.Nodes) != 3 {
		t.Errorf("agree %v nodes %v", s.StateHashAgree, s.Nodes)
	}
	for _, w := range s.Warnings {
		if strings.Contains(w, "hash") {
			t.Errorf("hash warning on agreeing nodes: %q", w)
		}
	}

	// One node with an empty hash: no agreement.
	f = newFixture(t)
	f.status("node-0", engine.Status{StateHash: "abc"})
	f.status("node-1", engine.Status{StateHash: ""})
	s, err = Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	if s.StateHashAgree {
		t.Error("agree with an empty hash")
	}
}

// TestStateHashesByPosition: hashes are compared only at one log position; a snapshot's hash is
// shown at its own position; no hash at all is "not checked", never a difference; unsupported
// orders are never a zero.
func TestStateHashesByPosition(t *testing.T) {
	aeron := func(hash string, at uint64) engine.Status {
		return engine.Status{Phase: "ready", AppliedIndex: 9000, StateHash: hash, StateHashIndex: at,
			Unsupported: []string{engine.UnsupportedStateHash, engine.UnsupportedOrders}}
	}
	for _, c := range []struct {
		name    string
		st      [3]engine.Status
		result  string
		reason  string // in Agreement.Reason
		report  []string
		differs bool // a "final state hashes differ" warning
	}{
		{name: "no snapshot, no live hash", st: [3]engine.Status{aeron("", 0), aeron("", 0), aeron("", 0)},
			result: AgreementNotChecked, reason: "no node reported a state hash",
			report: []string{"| node-0 | — | ready | 9000 | n/a (not supported by the engine) | `—` | — |", "agree on every node: not checked — no node reported"}},
		{name: "snapshot bytes agree", st: [3]engine.Status{aeron("ab", 1216), aeron("ab", 1216), aeron("ab", 1216)},
			result: AgreementAgree,
			report: []string{"| `ab` | snapshot bytes at 1216 |", "yes (snapshot bytes at log position 1216)"}},
		{name: "snapshot bytes differ", st: [3]engine.Status{aeron("ab", 1216), aeron("ab", 1216), aeron("cd", 1216)},
			result: AgreementDiffer, reason: "node-2 cd at log position 1216: " + engine.SnapshotHashNote, differs: true,
			report: []string{"**no** — node-0 ab, node-1 ab, node-2 cd at log position 1216: these are hashes of the bytes"}},
		{name: "snapshots of different positions", st: [3]engine.Status{aeron("ab", 1216), aeron("ab", 1216), aeron("cd", 2000)},
			result: AgreementNotChecked, reason: "hashes of different log positions (node-0, node-1 at 1216; node-2 at 2000)"},
		{name: "one node without a hash", st: [3]engine.Status{aeron("ab", 1216), aeron("ab", 1216), aeron("", 0)},
			result: AgreementNotChecked, reason: "no state hash from node-2"},
		{name: "live state differs", st: [3]engine.Status{{AppliedIndex: 5, StateHash: "x"}, {AppliedIndex: 5, StateHash: "x"}, {AppliedIndex: 5, StateHash: "y"}},
			result: AgreementDiffer, reason: "node-2 y at log position 5", differs: true,
			report: []string{"| `y` | state at 5 |"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			for i, st := range c.st {
				f.status(fmt.Sprintf("node-%d", i), st)
			}
			s, err := Analyze(f.close())
			if err != nil {
				t.Fatal(err)
			}
			a := s.StateHashes
			if a.Result != c.result || !strings.Contains(a.Reason, c.reason) || s.StateHashAgree != (c.result == AgreementAgree) {
				t.Errorf("agreement %+v (agree %v), want %s with %q", a, s.StateHashAgree, c.result, c.reason)
			}
			if c.result == AgreementDiffer && c.st[0].StateHashIndex > 0 && !strings.Contains(a.Reason, engine.SnapshotHashNote) {
				t.Errorf("snapshot bytes differ without saying what they are: %q", a.Reason)
			}
			differs := slices.ContainsFunc(s.Warnings, func(w string) bool { return strings.Contains(w, "final state hashes differ") })
			if differs != c.differs {
				t.Errorf("warnings %q: differ warning %v, want %v", s.Warnings, differs, c.differs)
			}
			if c.st[0].Supports(engine.UnsupportedOrders) != (s.Nodes["node-0"].Orders != nil) {
				t.Errorf("orders %v with unsupported %v", s.Nodes["node-0"].Orders, c.st[0].Unsupported)
			}
			report := renderReport(s)
			for _, want := range c.report {
				if !strings.Contains(report, want) {
					t.Errorf("report lacks %q:\n%s", want, report[strings.Index(report, "## Nodes"):])
				}
			}
		})
	}
}

// TestAnalyzeToleratesGaps: an interrupted run with no probes, no manifest, no status files and
// a torn last event line still analyses.
func TestAnalyzeToleratesGaps(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.action(1000, "snapshot", "node-0", map[string]any{"index": 4})
	f.action(2000, "kill", "node-1", map[string]any{"signal": "KILL"})
	dir := f.close()
	ef, err := os.OpenFile(filepath.Join(dir, "events.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	ef.WriteString(`{"t":"2025-03-01T12:00:03Z","kind":"ac`)
	ef.Close()

	s, err := Analyze(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != "unknown" || s.RunID != filepath.Base(dir) {
		t.Errorf("status %q run id %q", s.Status, s.RunID)
	}
	checkStats(t, "probes", s.Probes, want(0, 0, none, none, none, none))
	if len(s.Snapshots) != 1 || s.Snapshots[0].ClientPauseMs != nil || s.Snapshots[0].FinishedS != nil {
		t.Errorf("snapshot without probes or takes: %+v", s.Snapshots)
	}
	if len(s.Restarts) != 1 || s.Restarts[0].RelaunchS != nil || s.Restarts[0].Windows.Rejoining != nil || !s.Restarts[0].Windows.OneDown.Open {
		t.Errorf("kill without relaunch: %+v", s.Restarts)
	}
	for _, w := range []string{"no manifest.json", "no loadgen/probes.bin", "skipped 1 unreadable event line(s), first events.jsonl:4", "node-1: no readable status.json", "no node that was ready"} {
		if !slices.ContainsFunc(s.Warnings, func(g string) bool { return strings.Contains(g, w) }) {
			t.Errorf("no warning containing %q in:\n%s", w, strings.Join(s.Warnings, "\n"))
		}
	}
	// A latency plot left by an earlier analysis (when the probes were still there) goes.
	os.MkdirAll(filepath.Join(dir, "plots"), 0o755)
	os.WriteFile(filepath.Join(dir, PlotLatency), []byte("stale"), 0o644)
	if err := WriteOutputs(dir, s); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"summary.json", "report.md"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, PlotLatency)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale latency plot kept: %v", err)
	}
	if slices.Contains(s.Plots, PlotLatency) {
		t.Errorf("plots: %v", s.Plots)
	}
}

func TestAnalyzeNotRunDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	for _, p := range []string{filepath.Join(dir, "missing"), file} {
		if _, err := Analyze(p); !errors.Is(err, ErrNotRunDir) {
			t.Errorf("Analyze(%s) = %v, want ErrNotRunDir", p, err)
		}
	}
}

// TestRestartCutByNextKill: a node killed again before it became ready (a restart that never
// closed) has an open rejoin window cut at the second kill, and the second
// relaunch belongs to the second kill.
func TestRestartCutByNextKill(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.action(5000, "kill", "node-1", map[string]any{"signal": "KILL"})
	f.phase(5010, "node-1", "down")
	f.action(7000, "relaunch", "node-1", nil)
	f.phase(7050, "node-1", engine.PhaseStarting)
	f.phase(8000, "node-1", engine.PhaseRestoring)
	f.phase(9000, "node-1", engine.PhaseCatchingUp)
	f.action(12000, "kill", "node-1", map[string]any{"signal": "KILL"})
	f.phase(12010, "node-1", "down")
	f.action(14000, "relaunch", "node-1", nil)
	f.phase(15000, "node-1", engine.PhaseReady)
	f.run(20000, "load_end")
	var ps []rundir.Probe
	for ms := int64(0); ms < 20000; ms += 100 {
		ps = append(ps, rundir.Probe{IntendedNs: at(ms).UnixNano(), LatencyNs: 1_000_000})
	}
	f.probes(ps)
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Restarts) != 2 {
		t.Fatalf("restarts: %+v", s.Restarts)
	}
	r1, r2 := s.Restarts[0], s.Restarts[1]
	checkF(t, "restart 1 relaunch", r1.RelaunchS, 7)
	checkF(t, "restart 1 ready", r1.ReadyS, none)
	if exp := map[string]float64{"starting": 1000, "restoring": 1000, "catching-up": 3000}; !reflect.DeepEqual(r1.PhasesMs, exp) || r1.OpenPhase != "catching-up" {
		t.Errorf("restart 1 phases %v open %q, want %v open catching-up", r1.PhasesMs, r1.OpenPhase, exp)
	}
	checkWindow(t, "restart 1 rejoining", deref(t, r1.Windows.Rejoining), Window{Stats: want(50, 0, 1000, none, none, 1000), FromS: 7, ToS: 12, Open: true})
	checkWindow(t, "all up", r1.Windows.AllUp, Window{Stats: want(40, 0, 1000, none, none, 1000), FromS: 1, ToS: 5})
	checkF(t, "restart 2 relaunch", r2.RelaunchS, 14)
	checkF(t, "restart 2 launch->ready", r2.LaunchToReadyMs, 1000)
	if exp := map[string]float64{"starting": 1000}; !reflect.DeepEqual(r2.PhasesMs, exp) {
		t.Errorf("restart 2 phases %v, want %v (no phase seen between launch and ready)", r2.PhasesMs, exp)
	}
	checkWindow(t, "restart 2 one_down", r2.Windows.OneDown, Window{Stats: want(20, 0, 1000, none, none, 1000), FromS: 12, ToS: 14})
	checkWindow(t, "restart 2 rejoining", deref(t, r2.Windows.Rejoining), Window{Stats: want(10, 0, 1000, none, none, 1000), FromS: 14, ToS: 15})
	if !slices.ContainsFunc(s.Warnings, func(w string) bool { return strings.Contains(w, "never reached ready (still catching-up at 12.0 s)") }) {
		t.Errorf("warnings: %q", s.Warnings)
	}
}

// TestAllUpLeavesOutTheDrain: after a snapshot's window closes, latency stays high while the
// queue drains; the all-up window leaves that stretch out until latency is back at its median
// of the 5 s before the snapshot.
func TestAllUpLeavesOutTheDrain(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.phase(500, "node-0", engine.PhaseReady)
	f.action(5000, "snapshot", "node-0", map[string]any{"index": 7})
	f.snap(5200, "node-0", 7, 150, nil) // window [4.0, 6.2] s
	f.action(15000, "kill", "node-1", map[string]any{"signal": "KILL"})
	f.phase(15010, "node-1", "down")
	f.run(20000, "load_end")
	var ps []rundir.Probe
	for ms := int64(0); ms < 20000; ms += 10 {
		lat := int64(1_000_000)
		if ms > 6200 && ms < 8000 { // the drain: 50 ms until 8.0 s
			lat = 50_000_000
		}
		ps = append(ps, rundir.Probe{IntendedNs: at(ms).UnixNano(), LatencyNs: lat})
	}
	f.probes(ps)
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	au := s.Restarts[0].Windows.AllUp
	if au.DrainS < 1.78 || au.DrainS > 1.8 || au.MaxUs == nil || *au.MaxUs != 1000 {
		t.Errorf("all up: drain %v s, max %v µs; want about 1.79 s of drain left out and max 1000 µs", au.DrainS, fmtPtr(au.MaxUs))
	}
}
