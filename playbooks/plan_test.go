package playbooks

import (
	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/internal/units"

	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

const matrixPlaybook = base + `timeline:
  - {at: 10s, kill: {node: follower, relaunch_after: 5s}}
  - {at: 20s, burst: {messages: 1k}}
matrix:
  preload.orders: [1M, 5M]
  engine.sync_level: [0, 1, 2]
  timeline[1].burst.messages: [10k, 50k]
  tuning.vm.dirty_ratio: [10, 40]
rounds: 3
`

func TestPlanExpandsAndInterleaves(t *testing.T) {
	p := mustParse(t, matrixPlaybook)
	pl, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
	const combos = 2 * 3 * 2 * 2
	if len(pl.Runs) != combos*3 {
		t.Fatalf("%d runs, want %d", len(pl.Runs), combos*3)
	}
	var first []string
	for i, r := range pl.Runs {
		if r.Index != i+1 {
			t.Errorf("run %d has Index %d", i, r.Index)
		}
		if want := i/combos + 1; r.Round != want {
			t.Errorf("run %d is round %d, want %d: rounds must be interleaved", r.Index, r.Round, want)
		}
		key := strings.Join(r.SortedSettings(), " ")
		if i < combos {
			first = append(first, key)
		} else if first[i%combos] != key {
			t.Errorf("run %d settings %q, want the same order as round 1 (%q)", r.Index, key, first[i%combos])
		}
		// The values are applied to the run's own playbook, in base units.
		rp := r.Playbook
		if got := units.FormatCount(rp.Preload.Orders); got != r.Settings["preload.orders"] {
			t.Errorf("run %d: orders %s, setting %s", r.Index, got, r.Settings["preload.orders"])
		}
		if got := rp.Engine.Settings()["sync_level"]; got != r.Settings["engine.sync_level"] {
			t.Errorf("run %d: sync level %s, setting %s", r.Index, got, r.Settings["engine.sync_level"])
		}
		if got := units.FormatCount(int64(rp.Timeline[1].Spec.(*actions.Burst).Messages)); got != r.Settings["timeline[1].burst.messages"] {
			t.Errorf("run %d: burst %s, setting %s", r.Index, got, r.Settings["timeline[1].burst.messages"])
		}
		if len(rp.Tuning) != 1 || rp.Tuning[0] != (Setting{"vm.dirty_ratio", r.Settings["tuning.vm.dirty_ratio"]}) {
			t.Errorf("run %d: tuning %v, setting %s", r.Index, rp.Tuning, r.Settings["tuning.vm.dirty_ratio"])
		}
		if rp.Matrix != nil || rp.Rounds != 1 {
			t.Errorf("run %d: a run's playbook keeps matrix %v rounds %d; want it resolved", r.Index, rp.Matrix, rp.Rounds)
		}
	}
	// The first axis varies slowest.
	if first[0] != "engine.sync_level=0 preload.orders=1M timeline[1].burst.messages=10k tuning.vm.dirty_ratio=10" ||
		first[1] != "engine.sync_level=0 preload.orders=1M timeline[1].burst.messages=10k tuning.vm.dirty_ratio=40" ||
		first[combos-1] != "engine.sync_level=2 preload.orders=5M timeline[1].burst.messages=50k tuning.vm.dirty_ratio=40" {
		t.Errorf("combination order: %q ... %q", first[:2], first[combos-1])
	}
}

// Every run owns its playbook: changing one changes no other run and not the source.
func TestPlanRunsAreDeepCopies(t *testing.T) {
	p := mustParse(t, matrixPlaybook)
	pl, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
	a, b := pl.Runs[0].Playbook, pl.Runs[len(pl.Runs)/3].Playbook // same combination, rounds 1 and 2
	a.Timeline[0].Spec.(*actions.Kill).Node = "node-2"
	a.Timeline[1].Spec.(*actions.Burst).Messages = 7
	a.Tuning[0].Value = "99"
	a.Timeline[0].At = time.Minute
	pl.Runs[0].Settings["preload.orders"] = "changed"
	for _, q := range []*Playbook{b, p, pl.Playbook} {
		if q.Timeline[0].Spec.(*actions.Kill).Node != "follower" || q.Timeline[1].Spec.(*actions.Burst).Messages == 7 || q.Timeline[0].At != 10*time.Second {
			t.Errorf("a change to run 1 leaked: %+v %+v", q.Timeline[0].Spec, q.Timeline[1].Spec)
		}
	}
	if b.Tuning[0].Value == "99" || pl.Runs[len(pl.Runs)/3].Settings["preload.orders"] == "changed" {
		t.Error("runs share tuning or settings")
	}
}

func TestPlanWithoutMatrix(t *testing.T) {
	p := mustParse(t, base+"rounds: 2\n")
	pl, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Runs) != 2 || pl.Runs[0].Settings != nil || pl.Runs[1].Round != 2 || pl.Runs[0].Playbook == pl.Runs[1].Playbook {
		t.Errorf("runs = %+v", pl.Runs)
	}
}

// A playbook built in code skips Parse; Plan still refuses what cannot run.
func TestPlanChecksPlaybooksBuiltInCode(t *testing.T) {
	p := &Playbook{Name: "x", Source: "code", Cluster: Cluster{Servers: 1, Clients: 1}, Duration: 10 * time.Second, Rounds: 1,
		Load: Load{ProbeRate: 100}, Timeline: []Action{{At: 20 * time.Second, Kind: "snapshot", Spec: &actions.Snapshot{}}}}
	_, err := p.Plan()
	var probs Problems
	if !errors.As(err, &probs) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("Plan err = %v, want Problems", err)
	}
	wantProblem(t, probs, "code: timeline[0].at", "20s is at or after the end of the run")
}

func TestPlanPrint(t *testing.T) {
	p := mustParse(t, matrixPlaybook)
	pl, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	pl.Print(&buf)
	out := buf.String()
	for _, want := range []string{
		"playbook   t (t.yaml)",
		"cluster    3 servers, 1 client\n",
		"engine     reference driver: sync_level [0, 1, 2], 9 more at the engine's default",
		"tuning     vm.dirty_ratio=[10, 40]",
		"preload    [1M, 5M] resting orders over 16 instruments",
		"load       1k/s probes, warm-up 2s excluded, duration 30s",
		"timeline   +10s     kill follower with SIGKILL, relaunch after 5s (at +15s)",
		"           +20s     burst of [10k, 50k] x 170 B UDP datagrams at wire speed from each of one sender per client node",
		"matrix     preload.orders: 1M, 5M",
		"runs       72 = 24 combinations x 3 rounds, rounds interleaved",
		"  start     default (this machine)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	// Every run's row shows its stage estimates; the total is their sum.
	var want time.Duration
	ests := pl.Estimates()
	for i, e := range ests {
		want += e.Total
		pat := fmt.Sprintf(`(?m)^  %d\s+%d\s+.*`, pl.Runs[i].Index, pl.Runs[i].Round)
		for _, st := range e.Stages {
			pat += `\s+` + regexp.QuoteMeta(units.FormatDuration(st.D))
		}
		if !regexp.MustCompile(pat + `\s+` + regexp.QuoteMeta(units.FormatDuration(e.Total)) + `$`).MatchString(out) {
			t.Errorf("run %d's row lacks its stage estimates %+v", pl.Runs[i].Index, e.Stages)
		}
	}
	// Each book (1M, 5M) is built by the first run that preloads it and reused by every later one.
	reused := pl.ReusesBook()
	for i, want := range map[int]bool{0: false, 1: true, 11: true, 12: false, 13: true, 71: true} {
		if reused[i] != want {
			t.Errorf("run %d reuses a book: %v, want %v", i+1, reused[i], want)
		}
	}
	if !(ests[12].Stage("preload") > ests[0].Stage("preload") && ests[13].Stage("preload") < ests[12].Stage("preload")) {
		t.Errorf("preload estimates: 1M built %v, 5M built %v, 5M reused %v", ests[0].Stage("preload"), ests[12].Stage("preload"), ests[13].Stage("preload"))
	}
	if !strings.Contains(out, "  1    1      preload.orders=1M") || !regexp.MustCompile(`(?m)^  2\s+1\s+.*reused`).MatchString(out) {
		t.Errorf("plan does not say which runs reuse a book:\n%s", out)
	}
	if got := pl.ExpectedDuration(); got != want {
		t.Errorf("ExpectedDuration = %v, want %v", got, want)
	}
	if !strings.Contains(out, "expected   "+units.FormatDuration(want)+" in total") {
		t.Errorf("plan does not state the total %v:\n%s", want, out)
	}
}

// BenchmarkOpenAndPlan: reading, checking (every combination) and planning the largest
// embedded playbook, as `rig validate` and `rig run` do once per invocation.
func BenchmarkOpenAndPlan(b *testing.B) {
	for b.Loop() {
		p, err := Open("snapshot-pause", testDrivers)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Plan(); err != nil {
			b.Fatal(err)
		}
	}
}

// A matrix far past the limit is refused without being expanded (10^12 combinations here).
func TestHugeMatrixIsRefusedQuickly(t *testing.T) {
	src := base + "matrix:\n"
	for _, k := range []string{"preload.orders", "preload.instruments", "cluster.clients", "engine.encode_threads",
		"warmup", "tuning.vm.swappiness", "tuning.vm.dirty_ratio", "engine.snapshot_block", "load.probe_rate", "tuning.net.core.rmem_max", "duration", "engine.heartbeat_timeout"} {
		var vals []string
		for i := 1; i <= 10; i++ {
			switch {
			case strings.HasPrefix(k, "warmup"), strings.HasPrefix(k, "duration"):
				vals = append(vals, fmt.Sprintf("%ds", i+1))
			case k == "engine.heartbeat_timeout":
				vals = append(vals, fmt.Sprintf("%dms", i*10))
			case k == "engine.snapshot_block", k == "tuning.net.core.rmem_max":
				vals = append(vals, fmt.Sprintf("%dMiB", i))
			case k == "load.probe_rate":
				vals = append(vals, fmt.Sprintf("%d/s", i))
			default:
				vals = append(vals, fmt.Sprint(i))
			}
		}
		src += "  " + k + ": [" + strings.Join(vals, ", ") + "]\n"
	}
	wantProblem(t, problemsOf(t, src), "t.yaml:5:1: matrix", "expands to more than 1000000 runs (combinations x 1 rounds); at most 1000")
	p := mustParse(t, base)
	p.Matrix = []Axis{{"preload.orders", []string{"1", "2", "3"}}}
	p.Rounds = 400
	if _, err := p.Plan(); !errors.Is(err, ErrInvalid) {
		t.Errorf("Plan of 1200 runs: err = %v, want ErrInvalid", err)
	}
}

// Every server down at once is an opt-in (allow_all_down), and the plan names each such
// moment with the entries that make it and when the first server is back; a matrix names the runs.
func TestPlanNamesAllDown(t *testing.T) {
	src := base + `allow_all_down: true
timeline:
  - {at: 1s, power_loss: {nodes: node-0+node-1, relaunch_after: 5s}}
  - {at: 2s, kill: {node: node-2, relaunch_after: 1s}}
matrix:
  timeline[1].at: [2s, 7s]
`
	p := mustParse(t, src)
	pl, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	pl.Print(&buf)
	want := "all 3 servers down at +2s (timeline[0], timeline[1]; the first back at +3s): nothing serves meanwhile, as allow_all_down allows, in run 1\n"
	if !strings.Contains(buf.String(), want) {
		t.Errorf("plan lacks %q:\n%s", want, buf.String())
	}
	if strings.Count(buf.String(), "all 3 servers down") != 1 {
		t.Errorf("plan names an all-down moment in the run at 7s, when node-0 and node-1 are back:\n%s", buf.String())
	}
	// Without the opt-in the same timeline is refused (TestRules "all servers down").
	if _, err := Parse("t.yaml", []byte(strings.Replace(src, "allow_all_down: true\n", "", 1)), testDrivers); err == nil || !strings.Contains(err.Error(), "allow_all_down: true") {
		t.Errorf("without allow_all_down: %v", err)
	}
}

// The plan shows what a delay's round-trip probe holds the timeline for, and its bound.
func TestPlanShowsDelayProbeBound(t *testing.T) {
	p := mustParse(t, base+"placement: {zones: {a: [node-0], b: [node-1, node-2, client-0]}, between_zones: {delay: 1ms}}\n"+
		"timeline:\n  - {at: 4s, delay: {node: node-1, delay: 5ms, for: 5s}}\n")
	pl, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	pl.Print(&buf)
	// 5 pairs (node-1 to and from node-0 and node-2, client-0 to node-1) x 5 round trips of
	// 2 x (1ms + 5ms); the bound is linkproxy.ProbeTimeout a pair.
	want := "then a probe of 5 round trips on each of up to 5 pairs holds the timeline about 300ms, at most 25.3s"
	if !strings.Contains(buf.String(), want) {
		t.Errorf("plan lacks %q:\n%s", want, buf.String())
	}
}

// A wait's bound in the plan is its timeout, or the end of the load when that comes first
// (the timeline is cancelled with the load).
func TestPlanShowsWaitBound(t *testing.T) {
	p := mustParse(t, base+"timeline:\n  - {at: 4s, wait_for: {phase: ready}}\n  - {at: 5s, wait_for: {phase: ready, timeout: 10s}}\n")
	pl, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	pl.Print(&buf)
	for _, want := range []string{"wait until every server is ready (timeout 1m0s, cut when the load ends at +30s)",
		"wait until every server is ready (timeout 10s); later"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, buf.String())
		}
	}
}
