package main

import (
	"fmt"
	"io"
	"time"

	"github.com/rig-dev/rig/infra/spec"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/runner"
)

// stackPrice is the hourly price of the cluster a stack config describes (infra/spec.EstimateCost:
// instances, addresses and volumes; no S3, transfer or taxes) and the stack's name.
func stackPrice(path string) (float64, string, error) {
	sc, err := spec.ReadStackConfig(path)
	if err != nil {
		return 0, "", err
	}
	s, probs := sc.Spec()
	if errs := probs.Errors(); len(errs) > 0 {
		return 0, "", fmt.Errorf("%d problem(s), the first: %v", len(errs), errs[0])
	}
	est, err := spec.EstimateCost(s)
	if err != nil {
		return 0, "", err
	}
	return est.Hourly, sc.Stack, nil
}

// printSweepCost writes the plan's expected cost: its time estimate times the price per hour.
func printSweepCost(w io.Writer, pl *playbooks.Plan, perHour float64) {
	d := pl.ExpectedDuration()
	fmt.Fprintf(w, "expected cost: ~$%.2f (%d run(s), ~%s at $%.2f/h; the cluster's time outside the runs, rig up to rig down, not included)\n",
		d.Hours()*perHour, len(pl.Runs), d.Round(time.Second), perHour)
}

// printCrossAZCost writes, for a multi-az stack, what the plan's replicated log costs crossing
// AZs: each run's log (runner.EstimateLogBytes) sent by a leader in node-0's AZ to each follower
// in another AZ, billed leaving one AZ and again arriving in the other.
func printCrossAZCost(w io.Writer, pl *playbooks.Plan, s spec.Spec) {
	if !s.MultiAZ() {
		return
	}
	var perServer int64
	for _, r := range pl.Runs {
		b, ok := runner.EstimateLogBytes(r.Playbook)
		if !ok {
			fmt.Fprintf(w, "expected cross-AZ cost: not estimated (the %s engine does not say what it writes): $%.2f/GB each way\n",
				r.Playbook.Engine.DriverName(), spec.CrossAZPerGB)
			return
		}
		perServer += b
	}
	followers := s.CrossAZFollowers()
	gb := float64(perServer) * float64(followers) / 1e9
	fmt.Fprintf(w, "expected cross-AZ cost: ~$%.4f (the replicated log, ~%.3f GB over %d run(s) with the preload through the log, "+
		"sent by a leader in node-0's AZ to %d follower(s) in other AZs: %.3f GB at $%.2f/GB each way; client traffic not included)\n",
		gb*2*spec.CrossAZPerGB, float64(perServer)/1e9, len(pl.Runs), followers, gb, spec.CrossAZPerGB)
}
