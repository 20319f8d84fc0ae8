package main

import (
	"errors"
	"strings"
	"testing"
)

// rig bench registers its benchmarks like every other verb; without one, or with an unknown
// one, it is a usage error listing them.
func TestBenchNamesItsBenchmarks(t *testing.T) {
	for _, args := range [][]string{{"bench"}, {"bench", "nope"}} {
		_, _, err := runRig(t, args...)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "engine, gateway, loadgen") {
			t.Errorf("rig %v: %v; want a usage error listing engine, gateway, loadgen", args, err)
		}
	}
}

// rig bench recording refuses bad flags before starting any engine, naming the flag and what is
// valid.
func TestBenchRecordingFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--window", "5h"}, "--window: "},
		{[]string{"--orders", "0"}, "--orders: "},
		{[]string{"--probe-rate", "5"}, "--probe-rate: "},
		{[]string{"--sync-level", "3"}, "--sync-level 3: want 0, 1 or 2"},
		{[]string{"--rounds", "0"}, "--rounds 0: want 1..100"},
		{[]string{"--window-every", "10s"}, "--window-every 10s --window-for 0s: give both above 0, or neither"},
		{[]string{"--window-every", "3s", "--window-for", "2s"}, "want every at least for + 2s"},
	} {
		_, _, err := runRig(t, append([]string{"bench", "recording"}, c.args...)...)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rig bench recording %v: %v; want a usage error with %q", c.args, err, c.want)
		}
	}
}

// rig bench gateway refuses bad flags before starting any engine, naming the flag and what is
// valid.
func TestBenchGatewayFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--rates", "1k/s,fast"}, `--rates "fast": `},
		{[]string{"--rates", "500k/s"}, `--rates "500k/s": out of range; want 1/s..200k/s`},
		{[]string{"--for", "10ms"}, "--for 10ms: want 100ms..10m"},
		{[]string{"--warmup", "-1s"}, "--warmup -1s: want 0..10m"},
		{[]string{"--takes", "0"}, "--takes 0: want 1..100"},
		{[]string{"--spin", "5ms"}, `--spin "5ms": out of range; want 0..`},
		{[]string{"--client-idle", "sleep"}, `--client-idle "sleep": want backoff or spin`},
		{[]string{"--client-args", " "}, "--client-args: empty; want the arguments"},
		{[]string{"--playbook", "no/such/engine.yaml"}, "--playbook: "},
		{[]string{"--playbook", "quickstart"}, "--playbook quickstart: its engine has no engine.command"},
	} {
		_, _, err := runRig(t, append([]string{"bench", "gateway"}, c.args...)...)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rig bench gateway %v: %v; want a usage error with %q", c.args, err, c.want)
		}
	}
}
