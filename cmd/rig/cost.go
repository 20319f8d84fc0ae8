package main

import (
	"fmt"
	"io"
	"time"

	"github.com/rig-dev/rig/infra/spec"
	"github.com/rig-dev/rig/playbooks"
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
