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
