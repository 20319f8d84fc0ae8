package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/sweep"
	"github.com/rig-dev/rig/target/targettest"
)

// basePlaybook is a short run on three servers; tests append a timeline.
const basePlaybook = `name: fake
cluster: {servers: 3, clients: 1}
engine: {sync_level: 1}
preload: {orders: 1k}
load: {probe_rate: 100/s}
warmup: 100ms
duration: %s
`

func plan(t *testing.T, duration, rest string) *playbooks.Plan {
	t.Helper()
	pb, err := playbooks.Parse("fake.yaml", []byte(fmt.Sprintf(basePlaybook, duration)+rest), testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := pb.Plan()
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

type result struct {
	outs   []Outcome
	err    error
	man    rundir.Manifest
	events []rundir.Event
}

func runFake(t *testing.T, ctx context.Context, tgt *targettest.Target, pl *playbooks.Plan, opts ...func(*Options)) result {
	t.Helper()
	var res result
	o := Options{Target: tgt, ResultsDir: t.TempDir(), Binary: "rig", Analyze: analysis.AnalyzeRun}
	for _, f := range opts {
		f(&o)
	}
	if o.OpenSweep == nil { // as cmd/rig opens one
		o.OpenSweep = func() (Sweep, error) {
			return sweep.Start(o.ResultsDir, pl, safeName(pl.Playbook.Name), sweep.StartOptions{Progress: o.Progress, Target: o.Target.Name()})
		}
	}
	res.outs, res.err = Run(ctx, pl, o)
	if len(res.outs) == 0 {
		return res
	}
	dir := res.outs[len(res.outs)-1].Dir
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res.man); err != nil {
		t.Fatal(err)
	}
	var bad []error
	if res.events, bad, err = rundir.ReadEvents(filepath.Join(dir, "events.jsonl")); err != nil || len(bad) > 0 {
		t.Fatal(err, bad)
	}
	return res
}

func (r result) actions() []string {
	var out []string
	for _, e := range r.events {
		if e.Action != nil {
			out = append(out, string(e.Action.Name)+" "+e.Node)
		}
	}
	return out
}

func (r result) phases() []string {
	var out []string
	for _, p := range r.man.Phases {
		out = append(out, p.Name)
	}
	return out
}

// Every action kind runs against the cluster in timeline order, and the run folder records it.
func TestEveryAction(t *testing.T) {
	c := targettest.NewCluster()
	res := runFake(t, context.Background(), &targettest.Target{Cluster: c}, plan(t, "3s", `timeline:
  - {at: 200ms, snapshot: {}}
  - {at: 300ms, kill: {node: follower, signal: KILL, relaunch_after: 200ms}}
  - {at: 400ms, wait_for: {phase: ready, timeout: 2s}}
  - {at: 600ms, step_down: {}}
  - {at: 700ms, burst: {messages: 500, count: 2, every: 100ms}}
  - {at: 800ms, wait_for: {phase: ready, node: node-2, timeout: 1s}}
`))
	if res.err != nil || res.outs[0].Status != rundir.StatusOK {
		t.Fatalf("run: %v (%+v)", res.err, res.outs)
	}
	want := []string{"snapshot node-0", "kill node-2", "wait_for ", "relaunch node-2", "step_down node-0", "burst ", "wait_for node-2"}
	if got := res.actions(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("actions %q, want %q", got, want)
	}
	for _, e := range res.events {
		if e.IsAction(actions.ActSnapshot) {
			if s := actions.SnapshotOf(e); s.Index == nil || *s.Index != 100 || s.Leader != "node-0" {
				t.Errorf("snapshot event %+v: want index 100 and the leader", s)
			}
		}
	}
	for _, call := range []string{
		"node-0 POST /engine/proxy /snapshot",
		"node-2 POST /engine/signal",
		"node-2 POST /engine/relaunch",
		"node-0 POST /engine/proxy /step-down",
		`client-0 loadgen burst {"messages":500,"every_ns":100000000,"count":2,"udp":true,"size":170,"senders":1}`,
		"client-0 loadgen preload",
		" stop",
	} {
		if !c.Called(call) {
			t.Errorf("no call %q; calls:\n%s", call, strings.Join(c.Calls(), "\n"))
		}
	}
	wantPhases := "start engines_started preload_start preload_end load_start warmup_end load_end end"
	if got := strings.Join(res.phases(), " "); got != wantPhases {
		t.Errorf("stages %q, want %q", got, wantPhases)
	}
	if res.man.Status != rundir.StatusOK || res.man.Target != "fake" {
		t.Errorf("manifest status %q target %q", res.man.Status, res.man.Target)
	}
	// The settings resolved at plan time, kept beside those in effect for whatever reads the run.
	if r := res.man.Resolved; r == nil || r.Driver != "reference" || len(r.Table) == 0 || r.Asked["sync_level"] == "" {
		t.Errorf("manifest engine_settings %+v", r)
	}
	// Engines stopped, data removed, then the cluster: in that order.
	if i, j := indexOf(c.Calls(), "node-0 POST /engine/stop"), indexOf(c.Calls(), " stop"); i < 0 || j < i {
		t.Errorf("engines must stop before the cluster: %q", c.Calls())
	}
}

// An engine whose status says step_down: relaunch is stepped down by SIGTERM and a relaunch once
// it is down, not POST /step-down: the run counts its exit as the timeline's (no fault) and
// records the step-down and the relaunch.
func TestStepDownByRelaunch(t *testing.T) {
	c := targettest.NewCluster()
	c.StepDown = engine.StepDownRelaunch
	res := runFake(t, context.Background(), &targettest.Target{Cluster: c}, plan(t, "1s", "timeline:\n  - {at: 200ms, step_down: {}}\n"))
	if res.err != nil || res.outs[0].Status != rundir.StatusOK {
		t.Fatalf("run: %v (%+v)", res.err, res.outs)
	}
	if got, want := strings.Join(res.actions(), "|"), "step_down node-0|relaunch node-0"; got != want {
		t.Errorf("actions %q, want %q", got, want)
	}
	signal, relaunch := indexOf(c.Calls(), "node-0 POST /engine/signal"), indexOf(c.Calls(), "node-0 POST /engine/relaunch")
	if signal < 0 || relaunch < signal || c.Called("node-0 POST /engine/proxy /step-down") {
		t.Errorf("want SIGTERM, then a relaunch, and no POST /step-down; calls:\n%s", strings.Join(c.Calls(), "\n"))
	}
	if j := c.Journal("node-0"); !slices.ContainsFunc(j, func(tr rundir.Transition) bool { return tr.Kind == rundir.TransSignal && tr.To == "TERM" }) {
		t.Errorf("node-0 got no SIGTERM: %+v", j)
	}
}

func indexOf(calls []string, prefix string) int {
	for i, c := range calls {
		if strings.HasPrefix(c, prefix) {
			return i
		}
	}
	return -1
}

// A plan of several runs names them r01, r02, ... (the plan counts from 1).
func TestRunIDsCountFromOne(t *testing.T) {
	pl := plan(t, "1s", "matrix: {preload.orders: [1k, 2k]}\n")
	res := runFake(t, context.Background(), &targettest.Target{Cluster: targettest.NewCluster()}, &playbooks.Plan{Runs: pl.Runs[:1]})
	if res.err != nil {
		t.Fatal(res.err)
	}
	// Each run of the plan starts the cluster afresh (the fake refuses a start while it runs).
	var progress bytes.Buffer
	resDir := t.TempDir()
	open := func() (Sweep, error) {
		return sweep.Start(resDir, pl, safeName(pl.Playbook.Name), sweep.StartOptions{Progress: &progress, Target: "multi"})
	}
	outs, err := Run(context.Background(), pl, Options{Target: &targettest.Target{}, ResultsDir: resDir, Binary: "rig", Progress: &progress, Analyze: analysis.AnalyzeRun, OpenSweep: open})
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 2 || !regexp.MustCompile(`-r01$`).MatchString(outs[0].RunID) || !regexp.MustCompile(`-r02$`).MatchString(outs[1].RunID) {
		t.Fatalf("run ids %q %q", outs[0].RunID, outs[1].RunID)
	}
	// They are one sweep: resDir/<sweep-id>/r01, r02, sweep.json and the sweep report.
	sw := outs[0].SweepDir
	if filepath.Dir(sw) != resDir || outs[0].Dir != filepath.Join(sw, "r01") || outs[1].Dir != filepath.Join(sw, "r02") {
		t.Fatalf("sweep %s, run dirs %s %s", sw, outs[0].Dir, outs[1].Dir)
	}
	got, err := sweep.Read(sw)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != rundir.StatusOK || len(got.Runs) != 2 || got.Runs[1].Settings["preload.orders"] != "2k" || got.Runs[1].Status != rundir.StatusOK {
		t.Errorf("sweep.json: %+v", got)
	}
	if _, err := os.Stat(filepath.Join(sw, sweep.ReportName)); err != nil {
		t.Error(err)
	}
	for _, want := range []string{"run 1/2 (preload.orders=1k, round 1), ETA", "run 2/2 (preload.orders=2k, round 1), ETA", filepath.Join(sw, sweep.ReportName)} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}
	if strings.Contains(res.outs[0].RunID, "-r") {
		t.Errorf("a plan of one run has no -rNN: %s", res.outs[0].RunID)
	}
}

// An interrupt at any stage stops what was started, keeps the run folder, and says interrupted.
func TestInterruptAtEachStage(t *testing.T) {
	// The kill comes well after the warm-up (100 ms), so the warm-up mark is always in.
	timeline := `timeline:
  - {at: 400ms, kill: {node: follower, signal: KILL, relaunch_after: 100ms}}
  - {at: 450ms, wait_for: {phase: ready, timeout: 5s}}
  - {at: 500ms, snapshot: {}}
`
	stages := []struct {
		name   string
		hook   string // the agent call that interrupts ("" : see setup)
		setup  func(c *targettest.Cluster, tgt *targettest.Target, cancel func())
		marks  string // the stages recorded
		engine bool   // engines were started, so they are stopped
	}{
		{name: "cluster start", setup: func(c *targettest.Cluster, tgt *targettest.Target, cancel func()) { tgt.OnStart = cancel },
			marks: "end"},
		{name: "engine start", hook: "POST /engine/start", marks: "start end", engine: true},
		// The samplers start right after the engines, while the runner waits for them to be ready.
		{name: "ready wait", hook: "POST /samples", marks: "start engines_started end", engine: true},
		{name: "preload", setup: func(c *targettest.Cluster, _ *targettest.Target, cancel func()) {
			c.Loadgen.Preload = func(ctx context.Context) error { cancel(); <-ctx.Done(); return ctx.Err() }
		}, marks: "start engines_started preload_start end", engine: true},
		{name: "timeline kill", hook: "POST /engine/signal", marks: "start engines_started preload_start preload_end load_start warmup_end load_end end", engine: true},
		{name: "wait_for", hook: "POST /engine/relaunch", marks: "start engines_started preload_start preload_end load_start warmup_end load_end end", engine: true},
	}
	for _, s := range stages {
		t.Run(s.name, func(t *testing.T) {
			c := targettest.NewCluster()
			tgt := &targettest.Target{Cluster: c}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if s.setup != nil {
				s.setup(c, tgt, cancel)
			}
			if s.hook != "" {
				c.OnCall = func(_, call string) {
					if strings.HasPrefix(call, s.hook) {
						cancel()
					}
				}
			}
			start := time.Now()
			res := runFake(t, ctx, tgt, plan(t, "30s", timeline))
			if !errors.Is(res.err, ErrInterrupted) || !errors.Is(res.outs[0].Err, ErrInterrupted) {
				t.Fatalf("err %v, want ErrInterrupted", res.err)
			}
			// The load is 30 s: a run that stopped took a fraction of it, whatever the machine's load.
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("the interrupted run took %s: it waited out the load instead of stopping", d)
			}
			if res.man.Status != rundir.StatusInterrupted {
				t.Errorf("manifest status %q", res.man.Status)
			}
			if got := strings.Join(res.phases(), " "); got != s.marks {
				t.Errorf("stages %q, want %q", got, s.marks)
			}
			if c.Started() != c.Stopped() {
				t.Errorf("cluster started %v, stopped %v", c.Started(), c.Stopped())
			}
			if s.engine && !c.Called("node-0 POST /engine/stop") {
				t.Errorf("engines not stopped: %q", c.Calls())
			}
		})
	}
}

// Each way a run can fail leaves a failed run folder that says why, and stops the cluster.
func TestFailures(t *testing.T) {
	cases := []struct {
		name     string
		timeline string
		setup    func(c *targettest.Cluster, tgt *targettest.Target)
		want     string
	}{
		{name: "target does not start", setup: func(_ *targettest.Cluster, tgt *targettest.Target) { tgt.StartErr = errors.New("no nodes today") },
			want: "no nodes today"},
		{name: "engine exits at start", setup: func(c *targettest.Cluster, _ *targettest.Target) { c.ExitAtStart = "node-1" },
			want: "cluster did not become ready: engine exited outside the schedule: node-1 (no role yet): exit code 1"},
		{name: "agent gone mid-run", timeline: "timeline:\n  - {at: 100ms, kill: {node: node-1, signal: KILL}}\n",
			setup: func(c *targettest.Cluster, _ *targettest.Target) {
				c.OnCall = func(node, call string) {
					if node == "node-1" && strings.HasPrefix(call, "POST /engine/signal") {
						c.Gone("node-1")
					}
				}
			},
			want: "timeline[0] kill -KILL node-1 at 100ms: agent node-1 POST /engine/signal"},
		{name: "load generator exits before its first probe", setup: func(c *targettest.Cluster, _ *targettest.Target) {
			c.Loadgen.ExitEarly = errors.New("exit status 3")
		}, want: "load generator exited before its first probe: exit status 3"},
		{name: "load generator exits mid-run", setup: func(c *targettest.Cluster, _ *targettest.Target) {
			c.Loadgen.ExitEarly, c.Loadgen.ExitAfter = errors.New("exit status 4"), 200*time.Millisecond
		}, want: "load generator: exit status 4"},
		{name: "a leader steps down and exits", timeline: "timeline:\n  - {at: 100ms, step_down: {}}\n",
			// As a leader whose disk fails does: raft steps it down, then the engine stops.
			setup: func(c *targettest.Cluster, _ *targettest.Target) {
				c.OnCall = func(node, call string) {
					if !strings.HasSuffix(call, " /step-down") {
						return
					}
					time.AfterFunc(50*time.Millisecond, func() { c.Exit(node, 1) })
				}
			},
			want: "engine exited outside the schedule: node-0 (follower, leader until "},
		{name: "wait_for times out", timeline: "timeline:\n  - {at: 100ms, wait_for: {phase: catching-up, timeout: 200ms}}\n",
			want: "timeline[0] wait until all servers is catching-up (timeout 200ms) at 100ms: all servers did not reach catching-up within the wait's timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Each case has a fake cluster of its own, and most of a failed run's time is
			// finish's wait for an exit the failure may cause (exitAfterFailure): they overlap.
			t.Parallel()
			c := targettest.NewCluster()
			tgt := &targettest.Target{Cluster: c}
			if tc.setup != nil {
				tc.setup(c, tgt)
			}
			res := runFake(t, context.Background(), tgt, plan(t, "2s", tc.timeline))
			if res.err == nil || !strings.Contains(res.err.Error(), tc.want) {
				t.Fatalf("err %v, want it to say %q", res.err, tc.want)
			}
			if res.man.Status != rundir.StatusFailed || !strings.Contains(res.man.Error, tc.want) {
				t.Errorf("manifest status %q error %q", res.man.Status, res.man.Error)
			}
			if c.Started() != c.Stopped() {
				t.Errorf("cluster started %v, stopped %v", c.Started(), c.Stopped())
			}
		})
	}
}

// A timeline the runner cannot run is refused before anything starts.
func TestBadTimelineStartsNothing(t *testing.T) {
	pl := plan(t, "2s", "timeline:\n  - {at: 100ms, kill: {node: node-1, signal: KILL}}\n")
	pl.Runs[0].Playbook.Timeline[0].Spec.(*actions.Kill).Node = "node-7"
	c := targettest.NewCluster()
	dir := t.TempDir()
	outs, err := Run(context.Background(), pl, Options{Target: &targettest.Target{Cluster: c}, ResultsDir: dir, Analyze: analysis.AnalyzeRun})
	if err == nil || !strings.Contains(err.Error(), "timeline[0] kill") || !strings.Contains(err.Error(), "node-7") {
		t.Fatalf("err %v", err)
	}
	if len(outs) != 0 || c.Started() {
		t.Fatal("a refused plan started something")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("a refused plan created %d entries in the results folder", len(ents))
	}
}

// wait_for stable_leader holds the timeline until no server has become leader for that long:
// after a step-down the next action waits out the stable time from the new leader's election.
func TestWaitForStableLeader(t *testing.T) {
	res := runFake(t, context.Background(), &targettest.Target{Cluster: targettest.NewCluster()}, plan(t, "3s", `timeline:
  - {at: 200ms, step_down: {}}
  - {at: 250ms, wait_for: {stable_leader: 600ms, timeout: 2s}}
  - {at: 300ms, snapshot: {}}
`))
	if res.err != nil || res.outs[0].Status != rundir.StatusOK {
		t.Fatalf("run: %v (%+v)", res.err, res.outs)
	}
	var stepDown, elected, snap time.Time
	for _, e := range res.events {
		switch {
		case e.IsAction(actions.ActStepDown):
			stepDown = e.T
		case e.Role != nil && e.Role.To == engine.RoleLeader && !stepDown.IsZero() && elected.IsZero():
			elected = e.T
		case e.IsAction(actions.ActSnapshot):
			snap = e.T
		}
	}
	if elected.IsZero() || snap.IsZero() {
		t.Fatalf("no election after the step-down (%v) or no snapshot (%v)", elected, snap)
	}
	if d := snap.Sub(elected); d < 600*time.Millisecond {
		t.Errorf("snapshot %s after the new leader, want >= 600ms of stable leader", d)
	}
}

// A burst's senders are spread over every client node: client-0's probe process takes its
// share through the control API, the others run `rig loadgen burst`, all with one start time
// and one burst numbering per run.
func TestBurstSendersOverClients(t *testing.T) {
	c := targettest.NewCluster()
	pb, err := playbooks.Parse("fake.yaml", []byte(fmt.Sprintf(basePlaybook, "4s")+`timeline:
  - {at: 200ms, burst: {messages: 100, size: 200, senders: 3, count: 2, every: 100ms}}
  - {at: 500ms, burst: {messages: 50}}
`), testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	pb.Cluster.Clients = 2
	pl, err := pb.Plan()
	if err != nil {
		t.Fatal(err)
	}
	res := runFake(t, context.Background(), &targettest.Target{Cluster: c}, pl)
	if res.err != nil || res.outs[0].Status != rundir.StatusOK {
		t.Fatalf("run: %v (%+v)", res.err, res.outs)
	}
	var control []rundir.BurstSeries
	var remote []loadspec.BurstConfig
	for _, call := range c.Calls() {
		if body, ok := strings.CutPrefix(call, "client-0 loadgen burst "); ok {
			var b rundir.BurstSeries
			if err := json.Unmarshal([]byte(body), &b); err != nil {
				t.Fatal(err)
			}
			control = append(control, b)
		}
		if body, ok := strings.CutPrefix(call, "client-1 loadgen burst-config "); ok {
			var b loadspec.BurstConfig
			if err := json.Unmarshal([]byte(body), &b); err != nil {
				t.Fatal(err)
			}
			remote = append(remote, b)
		}
	}
	if len(control) != 2 || len(remote) != 2 {
		t.Fatalf("client-0 bursts %+v, client-1 bursts %+v: want two each", control, remote)
	}
	c0, c1 := control[0], remote[0]
	if !c0.UDP || c0.Senders != 2 || c0.Size != 200 || c0.FirstBurst != 0 || c0.Start.IsZero() ||
		!c1.UDP || c1.Senders != 1 || int(c1.Size) != 200 || c1.FirstBurst != 0 || !c1.Start.Equal(c0.Start) {
		t.Errorf("first burst: client-0 %+v, client-1 %+v", c0, c1)
	}
	// The second burst defaults to one sender per client node and numbers on after the first.
	if control[1].Senders != 1 || control[1].FirstBurst != 2 || remote[1].Senders != 1 || remote[1].FirstBurst != 2 {
		t.Errorf("second burst: client-0 %+v, client-1 %+v", control[1], remote[1])
	}
	for _, f := range []string{"bursts-0", "bursts-2"} {
		if _, err := os.Stat(filepath.Join(res.outs[0].Dir, "client-1", "loadgen", f, "bursts.json")); err != nil {
			t.Errorf("client-1's burst figures are not in the run folder: %v", err)
		}
	}
}

// Renewals to a node keep failing until its lease lapses, and its agent stops the engine: the
// run fails at once, its error (returned, in the manifest, summary.json and report.md) naming
// the lease, when it lapsed and why renewals failed, not the engine death that follows.
func TestLeaseLapseFailsTheRunNamed(t *testing.T) {
	c := targettest.NewCluster()
	var cut time.Time
	var afterLapse []string // calls to node-1 once it lapsed
	// A renewal the controller sent before its own count of the lease ran out (from the send)
	// may reach the agent after the agent's (from the arrival) on a loaded machine; one is a
	// race the agent refuses with 410, more would be a renewer that went on.
	var renewalsAfter int
	c.OnCall = func(node, call string) {
		if strings.HasPrefix(call, "POST /engine/proxy /snapshot") {
			cut = time.Now()
			c.CutLease("node-1")
		}
		if node == "node-1" && c.Lapsed(node) && !strings.HasPrefix(call, "GET ") {
			if call == "POST /lease" {
				renewalsAfter++
			} else {
				afterLapse = append(afterLapse, call)
			}
		}
	}
	const ttl = time.Second
	start := time.Now()
	res := runFake(t, context.Background(), &targettest.Target{Cluster: c}, plan(t, "30s", "timeline:\n  - {at: 200ms, snapshot: {}}\n"),
		func(o *Options) { o.LeaseTTL = ttl })
	ended := time.Now()
	want := regexp.MustCompile(`^lease on node-1 lapsed at \d\d:\d\d:\d\d\.\d{3} \(last renewed \d\d:\d\d:\d\d\.\d{3}, ` +
		`renewals failing: agent node-1 POST /lease: .+\): its agent stopped the engine and reverted tuning$`)
	if !errors.Is(res.err, ErrLeaseLapsed) || errors.Is(res.err, ErrEngineExited) || !want.MatchString(res.outs[0].Err.Error()) {
		t.Fatalf("err %v: want only the lapse, named", res.err)
	}
	if cut.IsZero() {
		t.Fatal("the lease was never cut")
	}
	// It waited for the lapse (not the first failed renewal), then stopped: the load was 30 s.
	if d := ended.Sub(cut); d < ttl/2 || ended.Sub(start) > 15*time.Second {
		t.Errorf("the run ended %s after the cut, %s after it started", d, ended.Sub(start))
	}
	if res.man.Status != rundir.StatusFailed || !want.MatchString(res.man.Error) || res.man.LeaseTTLS != ttl.Seconds() {
		t.Errorf("manifest status %q error %q lease %vs", res.man.Status, res.man.Error, res.man.LeaseTTLS)
	}
	dir := res.outs[0].Dir
	var sum struct{ Error string }
	if b, err := os.ReadFile(filepath.Join(dir, "summary.json")); err != nil || json.Unmarshal(b, &sum) != nil || !want.MatchString(sum.Error) {
		t.Errorf("summary.json error %q (%v)", sum.Error, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "report.md")); err != nil || !strings.Contains(string(b), "lease on node-1 lapsed at") {
		t.Errorf("report.md does not name the lapse (%v)", err)
	}
	if !c.Stopped() {
		t.Error("cluster not stopped")
	}
	// Its agent undid the run by itself: the cleanup leaves it alone (a hung one would hold up
	// every other node's).
	if len(afterLapse) != 0 || renewalsAfter > 1 {
		t.Errorf("calls to node-1 after its lease lapsed: %q, and %d renewals (one may race the lapse)", afterLapse, renewalsAfter)
	}
}

// An agent answers an action 410 before the renewer has given up on its lease: the lapse is
// the cause, not the engine the agent stopped, and no final state is asked for.
func TestLeaseLapseSeenByAnAction(t *testing.T) {
	c := targettest.NewCluster()
	c.OnCall = func(node, call string) {
		if strings.HasPrefix(call, "POST /engine/proxy /snapshot") {
			c.Lapse(node)
		}
	}
	res := runFake(t, context.Background(), &targettest.Target{Cluster: c}, plan(t, "30s", "timeline:\n  - {at: 200ms, snapshot: {}}\n"))
	if !errors.Is(res.err, agent.ErrLeaseLapsed) || errors.Is(res.err, ErrEngineExited) || !strings.Contains(res.err.Error(), "410") {
		t.Fatalf("err %v: want the agent's 410 as the cause", res.err)
	}
	if res.man.Status != rundir.StatusFailed || strings.Contains(res.man.Error, "engine exited outside the schedule") {
		t.Errorf("manifest status %q error %q", res.man.Status, res.man.Error)
	}
}

// A lease length the agents would refuse is refused before anything starts.
func TestBadLeaseStartsNothing(t *testing.T) {
	c := targettest.NewCluster()
	dir := t.TempDir()
	_, err := Run(context.Background(), plan(t, "2s", ""), Options{Target: &targettest.Target{Cluster: c}, ResultsDir: dir, LeaseTTL: time.Millisecond, Analyze: analysis.AnalyzeRun})
	if err == nil || !strings.Contains(err.Error(), "lease 1ms") || c.Started() {
		t.Fatalf("err %v, started %v", err, c.Started())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("created %d entries in the results folder", len(ents))
	}
}

// load.spin, as a matrix axis, reaches each run's load generator config.
func TestSpinReachesTheLoadGenerator(t *testing.T) {
	c := targettest.NewCluster()
	res := runFake(t, context.Background(), &targettest.Target{Cluster: c}, plan(t, "1s", "matrix:\n  load.spin: [0s, 100us]\n"))
	if res.err != nil || len(res.outs) != 2 {
		t.Fatalf("runs %d, err %v", len(res.outs), res.err)
	}
	for i, want := range []time.Duration{0, 100 * time.Microsecond} {
		b, err := os.ReadFile(filepath.Join(res.outs[i].Dir, "loadgen-probe.json"))
		var cfg loadspec.Config
		if err != nil || json.Unmarshal(b, &cfg) != nil || time.Duration(cfg.Probe.Spin) != want {
			t.Errorf("run %d: probe config %s (%v), want spin %v", i+1, b, err, want)
		}
	}
}

// The playbook field takes exactly the load generator's range (playbooks does not import loadgen).
func TestSpinRangeIsTheLoadGenerators(t *testing.T) {
	for _, c := range []struct {
		spin time.Duration
		ok   bool
	}{{loadspec.MaxSpin, true}, {loadspec.MaxSpin + time.Microsecond, false}} {
		_, err := playbooks.Parse("s.yaml", []byte(fmt.Sprintf("name: s\nload: {probe_rate: 1/s, spin: %s}\nduration: 9s\n", c.spin)), testDrivers)
		if (err == nil) != c.ok {
			t.Errorf("load.spin %v: err %v, want accepted %v", c.spin, err, c.ok)
		}
	}
}
