package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/infra/automation"
	"github.com/rig-dev/rig/infra/awsconf"
	"github.com/rig-dev/rig/infra/cloudgc"
)

type cloudOptions struct {
	regions []string
	orphans bool
	delete  bool // --yes: delete what is marked; otherwise a dry run
	// clients builds a region's AWS clients; nil means the SDK's default chain.
	clients func(ctx context.Context, region string) (cloudgc.Clients, error)
}

// cloudGC asks AWS, in every account (aws:profile) and region the project's stacks use, for
// resources tagged by the rig, gives each a verdict with its cost per hour, deletes those marked
// in dependency order with --yes, scans again and fails with cloudgc.ErrBillableLeft when any of
// them still costs money.
func cloudGC(cmd *cobra.Command, d *automation.Driver, o cloudOptions) error {
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	stacks, err := d.KnownStacks(ctx)
	if err != nil {
		return err
	}
	known := cloudgc.Known{Stacks: map[string]cloudgc.Stack{}, Owners: d.Owners()}
	for name, id := range stacks {
		known.Stacks[name] = cloudgc.Stack{Generation: id.Generation, Owner: id.Owner}
	}
	accounts := d.Accounts(o.regions)
	if len(accounts) == 0 {
		fmt.Fprintln(out, "cloud side: no region to scan (no Pulumi.<stack>.yaml with aws:region; pass --region)")
		return nil
	}
	var errs []error
	for _, a := range accounts {
		if err := cloudGCAccount(ctx, out, a, known, o); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cloudGCAccount is cloudGC in one account: the one the profile's credentials belong to, which
// it names (sts:GetCallerIdentity) before anything else.
func cloudGCAccount(ctx context.Context, out io.Writer, a automation.Account, known cloudgc.Known, o cloudOptions) error {
	t := awsconf.Target{Profile: a.Profile, Region: a.Regions[0]}
	_, id, err := t.Check(ctx)
	if err != nil {
		return fmt.Errorf("cloud side not scanned (--no-cloud skips it): %w", err)
	}
	who := "the default chain"
	if a.Profile != "" {
		who = "profile " + a.Profile
	}
	fmt.Fprintf(out, "cloud side: account %s (%s, as %s): resources tagged rig-stack in %s (tagging API + EC2)\n",
		id.Account, who, id.ARN, strings.Join(a.Regions, ", "))
	opts := cloudgc.Options{Regions: a.Regions, Profile: a.Profile, Clients: o.clients}
	rs, scanErr := cloudgc.Scan(ctx, opts)
	found := cloudgc.Classify(rs, known, time.Now(), o.orphans)
	if len(found) == 0 {
		fmt.Fprintln(out, "cloud side: no resource tagged rig-stack")
		return scanErr
	}
	writeFindings(out, found)
	var marked, gone int
	var hourly float64
	for _, f := range found {
		if f.Delete {
			marked++
			hourly += max(f.Hourly, 0)
		}
		if f.Verdict == cloudgc.Gone {
			gone++
		}
	}
	switch {
	case marked == 0:
		fmt.Fprintf(out, "cloud side: nothing to delete (%d listed by the tagging API but already gone)\n", gone)
	case !o.delete:
		fmt.Fprintf(out, "dry run: %d resource(s) costing $%.4f/h would be deleted; rig gc --yes deletes them\n", marked, hourly)
	default:
		tally, delErr := cloudgc.Delete(ctx, found, opts, out)
		fmt.Fprintf(out, "cloud side: %s\n", tally)
		left, leftErr := cloudgc.Remaining(ctx, found, opts)
		for _, r := range left {
			fmt.Fprintf(out, "cloud side: still billing: %s %s %s %s (stack %s)\n", r.Region, r.Kind, r.ID, r.State, r.Stack)
		}
		if err := errors.Join(delErr, leftErr); err != nil {
			return fmt.Errorf("cloud-side gc: %w", err)
		}
	}
	return scanErr
}

func writeFindings(out io.Writer, fs []cloudgc.Finding) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "STACK\tGENERATION\tOWNER\tREGION\tKIND\tID\tDETAIL\t$/H\tEXPIRES\tVERDICT")
	for _, f := range fs {
		cost := "?"
		if f.Hourly >= 0 {
			cost = fmt.Sprintf("%.4f", f.Hourly)
		}
		exp := "no tag"
		if !f.ExpiresAt.IsZero() {
			exp = f.ExpiresAt.Format(time.RFC3339)
		}
		verdict := f.Verdict
		if f.Delete {
			verdict += ": delete"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Stack, orDash(f.Generation), orDash(f.Owner), f.Region, f.Kind, f.ID,
			f.Detail, cost, exp, verdict)
	}
	w.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
