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
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "engine, loadgen") {
			t.Errorf("rig %v: %v; want a usage error listing engine, loadgen", args, err)
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
