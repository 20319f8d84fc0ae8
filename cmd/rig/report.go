package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/results"
)

func init() {
	cmd := &cobra.Command{
		Use:   "report RUN_DIR",
		Short: "Re-analyse a run folder: rewrite its summary.json, report.md and plots/",
		Long: "Reads RUN_DIR (events.jsonl, loadgen/probes.bin, <node>/status.json, manifest.json) the way\n" +
			"`rig run` does at the end of every run, and rewrites summary.json, report.md and plots/*.png.\n" +
			"Nothing else in the folder is changed.",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("%w: report takes one RUN_DIR (e.g. results/<run-id>), got %d arguments", errUsage, len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return report(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0])
		},
	}
	rootCmd.AddCommand(cmd)
}

// runFolderFiles are what `rig run` writes first; a folder with none of them is not a run folder,
// and `rig report` must not litter it with a report.
var runFolderFiles = []string{"manifest.json", "events.jsonl", filepath.Join("loadgen", "probes.bin")}

func report(stdout, stderr io.Writer, dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("%w: RUN_DIR %s: %v", errUsage, dir, err)
	case !fi.IsDir():
		return fmt.Errorf("%w: RUN_DIR %s is a file, not a run folder", errUsage, dir)
	}
	found := false
	for _, f := range runFolderFiles {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			found = true
			break
		}
	}
	if !found {
		return fmt.Errorf("%w: RUN_DIR %s is not a run folder: it holds none of %s", errUsage, dir, strings.Join(runFolderFiles, ", "))
	}
	s, err := results.Analyze(dir)
	if errors.Is(err, results.ErrNotRunDir) {
		return fmt.Errorf("%w: RUN_DIR %s: %v", errUsage, dir, err)
	}
	if err != nil {
		return fmt.Errorf("analyze %s: %w", dir, err)
	}
	if err := results.WriteOutputs(dir, s); err != nil {
		return fmt.Errorf("write report of %s: %w", dir, err)
	}
	for _, w := range s.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	p50 := "—"
	if s.Probes.P50Us != nil {
		p50 = fmt.Sprintf("%.2f ms", *s.Probes.P50Us/1e3)
	}
	agree := "differ"
	if s.StateHashAgree {
		agree = "agree"
	}
	fmt.Fprintf(stdout, "%s: %s · probes n=%d lost=%d p50 %s · %d snapshot(s) · %d restart(s) · state hashes %s · %d warning(s)\n",
		s.RunID, s.Status, s.Probes.N, s.Probes.Lost, p50, len(s.Snapshots), len(s.Restarts), agree, len(s.Warnings))
	fmt.Fprintln(stdout, filepath.Join(dir, "report.md"))
	return nil
}
