package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/infra/cloudgc"
	"github.com/rig-dev/rig/infra/driver"
)

type cloudOptions struct {
	regions []string
	orphans bool
	delete  bool // --yes: delete what is marked; otherwise a dry run
}

// cloudGC asks AWS, in every region the project's stacks use, for resources tagged by the rig,
// lists those that are expired or belong to no stack of this backend with their cost per hour,
// and deletes them in dependency order with --yes.
func cloudGC(cmd *cobra.Command, d *driver.Driver, o cloudOptions) error {
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	known, err := d.KnownStacks(ctx)
	if err != nil {
		return err
	}
	regions := d.Regions(o.regions)
	if len(regions) == 0 {
		fmt.Fprintln(out, "cloud side: no region to scan (no Pulumi.<stack>.yaml with aws:region; pass --region)")
		return nil
	}
	if err := driver.CheckAWSCredentials(ctx, regions[0]); err != nil {
		return fmt.Errorf("cloud side not scanned (--no-cloud skips it): %w", err)
	}
	fmt.Fprintf(out, "cloud side: resources tagged rig-stack in %s (tagging API + EC2)\n", strings.Join(regions, ", "))
	opts := cloudgc.Options{Regions: regions}
	rs, scanErr := cloudgc.Scan(ctx, opts)
	found := cloudgc.Classify(rs, known, time.Now(), o.orphans)
	if len(found) == 0 {
		fmt.Fprintln(out, "cloud side: nothing expired, orphaned or retained")
		return scanErr
	}
	writeFindings(out, found)
	var marked int
	var hourly float64
	for _, f := range found {
		if f.Delete {
			marked++
			hourly += max(f.Hourly, 0)
		}
	}
	switch {
	case marked == 0:
		fmt.Fprintln(out, "cloud side: nothing to delete")
	case !o.delete:
		fmt.Fprintf(out, "dry run: %d resource(s) costing $%.4f/h would be deleted; rig gc --yes deletes them\n", marked, hourly)
	default:
		if err := cloudgc.Delete(ctx, found, opts, out); err != nil {
			return fmt.Errorf("cloud-side gc: %w", err)
		}
		fmt.Fprintf(out, "cloud side: %d resource(s) deleted ($%.4f/h)\n", marked, hourly)
	}
	return scanErr
}

func writeFindings(out io.Writer, fs []cloudgc.Finding) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "STACK\tREGION\tKIND\tID\tDETAIL\t$/H\tEXPIRES\tVERDICT")
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
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Stack, f.Region, f.Kind, f.ID, f.Detail, cost, exp, verdict)
	}
	w.Flush()
}
