package gatewaybench

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine/command"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/engine/driver/reference"
	"github.com/rig-dev/rig/playbooks"
)

// The figures per rate are medians over the takes, each side's own; what the gateway adds is
// the difference of those medians, and the goal holds only when it holds at every rate.
func TestSummarize(t *testing.T) {
	r := Report{CPUs: 2, Load1: 1.5, Load1After: 1.9, Points: []Point{
		{Rate: 1000,
			Gateway: Side{Phases: []Phase{{P50Us: 90, P99Us: 400, CPUUsPerMsg: 30}, {P50Us: 70, P99Us: 300, CPUUsPerMsg: 20}, {P50Us: 500, P99Us: 900, CPUUsPerMsg: 25, Lost: 2}}},
			Client:  Side{Phases: []Phase{{P50Us: 60, P99Us: 100, CPUUsPerMsg: 10}, {P50Us: 65, P99Us: 150, CPUUsPerMsg: 12}, {P50Us: 10, P99Us: 200, CPUUsPerMsg: 11}}}},
		{Rate: 20000,
			Gateway: Side{Phases: []Phase{{P50Us: 50, P99Us: 80}, {P50Us: 54, P99Us: 120}}},
			Client:  Side{Phases: []Phase{{P50Us: 40, P99Us: 60}, {P50Us: 44, P99Us: 100}}}},
	}}
	r.summarize()
	p := r.Points[0]
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"gateway p50", p.Gateway.P50Us, 90}, {"client p50", p.Client.P50Us, 60}, {"added p50", p.AddedP50Us, 30},
		{"added p99", p.AddedP99Us, 250}, {"ratio p50", p.RatioP50, 1.5}, {"ratio p99", p.RatioP99, 400.0 / 150},
		{"added cpu", p.AddedCPUUs, 14}, {"gateway lost", float64(p.Gateway.Lost), 2},
		{"20k added p50", r.Points[1].AddedP50Us, 10}, {"20k added p99", r.Points[1].AddedP99Us, 20},
	} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if r.MeetsGoal {
		t.Errorf("meets the goal with %v us added at 1k/s; want it missed (goal %v us)", p.AddedP50Us, float64(GoalP50Us))
	}
	r.Points = r.Points[1:]
	if r.summarize(); !r.MeetsGoal || r.Loaded {
		t.Errorf("misses the goal with %v us added at load %v -> %v on %d CPUs; want it met", r.Points[0].AddedP50Us, r.Load1, r.Load1After, r.CPUs)
	}
	// Above the CPU count the latencies are the machine's: no verdict either way.
	r.Load1After = 2.5
	if r.summarize(); r.MeetsGoal || !r.Loaded {
		t.Errorf("load %v -> %v on %d CPUs: meets %v, loaded %v; want no verdict (loaded)", r.Load1, r.Load1After, r.CPUs, r.MeetsGoal, r.Loaded)
	}
}

// Bad options are refused before anything starts, naming the field.
func TestOptionsCheck(t *testing.T) {
	pb, err := playbooks.Open("../examples/aeron-cluster/engine.yaml", driver.NewRegistry(reference.Driver{}, command.Driver{}))
	if err != nil {
		t.Fatal(err)
	}
	quick, err := playbooks.Open("quickstart", driver.NewRegistry(reference.Driver{}, command.Driver{}))
	if err != nil {
		t.Fatal(err)
	}
	good := Options{Playbook: pb, ClientArgs: []string{"--gateway-bench"}, Rates: []float64{1000}, For: time.Second, Takes: 1, Dir: t.TempDir()}
	for _, c := range []struct {
		change func(*Options)
		want   string
	}{
		{func(o *Options) { o.Playbook = quick }, "playbook: want one whose engine has a command"},
		{func(o *Options) { o.ClientArgs = nil }, "client args: none"},
		{func(o *Options) { o.Rates = nil }, "rates: none"},
		{func(o *Options) { o.Rates = []float64{0.5} }, "rate 0.5/s: want 1/s..200k/s"},
		{func(o *Options) { o.For = time.Millisecond }, "for 1ms: want at least 100ms"},
		{func(o *Options) { o.Takes = 0 }, "takes 0: want at least 1"},
		{func(o *Options) { o.ClientIdle = "nap" }, `client idle "nap": want backoff or spin`},
		{func(o *Options) { o.Dir = "" }, "dir: none"},
	} {
		o := good
		c.change(&o)
		_, err := Run(t.Context(), o)
		if !errors.Is(err, ErrBadOptions) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Run: %v; want ErrBadOptions with %q", err, c.want)
		}
	}
}
