package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/sweep"
)

func newCompareCmd() *cobra.Command {
	var opts sweep.CompareOptions
	cmd := &cobra.Command{
		Use:   "compare BASE CONTENDER",
		Short: "Compare two runs or two sweeps, figure by figure, with a verdict that knows the noise",
		Long: "BASE and CONTENDER are run folders or sweep folders (results/<id>). Every figure of the\n" +
			"summaries is pooled over each side's rounds and compared: baseline, contender, the difference\n" +
			"with its 95 % confidence interval (Welch), the Mann–Whitney p, and a verdict (better, worse,\n" +
			"no difference) that follows the figure's direction (lower latency is better, higher throughput\n" +
			"is better). With one value a side there is no estimate of the noise, so no verdict: use rounds.\n" +
			"Every difference in environment (instance type, kernel, rig version, config hash, placement:\n" +
			"single-az or multi-az and each node's AZ) and every run whose load average exceeded its CPUs\n" +
			"is warned about first.\n\n" +
			"Sweeps are compared combination by combination; --base-where and --contender-where pick\n" +
			"combinations by their settings, e.g. one sweep against itself, each book size with itself:\n" +
			"  rig compare results/S results/S --base-where engine.sync_level=0 --contender-where engine.sync_level=2\n" +
			"and with --pool every book size at sync 0 against every book size at sync 2, as one sample each.",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return fmt.Errorf("%w: compare takes BASE and CONTENDER (run or sweep folders), got %d arguments", errUsage, len(args))
			}
			return nil
		},
		Annotations: map[string]string{exitOnInterrupt: "yes"}, // it only reads
		RunE: func(cmd *cobra.Command, args []string) error {
			var sets [2]*sweep.Set
			for i, dir := range args {
				if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
					return fmt.Errorf("%w: %s is not a folder", errUsage, dir)
				}
				s, err := sweep.Load(dir)
				if err != nil {
					return fmt.Errorf("%w: %v", errUsage, err)
				}
				sets[i] = s
			}
			c, err := sweep.Compare(sets[0], sets[1], opts)
			if err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			c.Text(cmd.OutOrStdout())
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.BaseWhere, "base-where", "", "only the baseline runs with these settings, key=value[,key=value]")
	cmd.Flags().BoolVar(&opts.Pool, "pool", false, "merge each side's combinations (after the filters) into one sample")
	cmd.Flags().StringVar(&opts.ContenderWhere, "contender-where", "", "only the contender runs with these settings, key=value[,key=value]")
	return cmd
}
