package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/agent/facts"
	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/sweep"
	"github.com/rig-dev/rig/target/local"
)

func newReportCmd() *cobra.Command {
	var baseline string
	cmd := &cobra.Command{
		Use:   "report RUN_DIR|SWEEP_DIR",
		Short: "Re-analyse a run folder or a sweep folder: rewrite summary.json, report.md and plots/",
		Long: "Reads RUN_DIR (events.jsonl, loadgen/probes.bin, <node>/status.json, manifest.json) the way\n" +
			"`rig run` does at the end of every run, and rewrites summary.json, report.md and plots/*.png.\n" +
			"Nothing else in the folder is changed; the dead disk model mounts a killed run left are\n" +
			"detached and named in the warnings (docs/disks.md, \"Who owns a mount\").\n\n" +
			"Every file is read and written inside RUN_DIR (a symlink leading out is refused, named);\n" +
			"loadgen/probes.bin is read up to the count loadgen/stats.json declares, and refused beyond\n" +
			"it; a folder whose analysis would not fit in MemAvailable is refused before anything is read\n" +
			"(docs/results.md, \"Re-analysing a run\").\n\n" +
			"Given a SWEEP_DIR (a folder with sweep.json), re-analyses each of its runs (r01, r02, …) the\n" +
			"same way, then rewrites the sweep's report.md (one table per experiment, every combination's\n" +
			"rounds pooled, differences from the baseline) and its plots/.",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("%w: report takes one RUN_DIR or SWEEP_DIR (e.g. results/<run-id>), got %d arguments", errUsage, len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := os.Stat(filepath.Join(args[0], sweep.FileName)); err == nil {
				return reportSweep(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], sweep.Options{Baseline: baseline})
			}
			if baseline != "" {
				return fmt.Errorf("%w: --baseline is for a SWEEP_DIR; %s has no %s", errUsage, args[0], sweep.FileName)
			}
			return report(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0])
		},
	}
	cmd.Flags().StringVar(&baseline, "baseline", "", "sweep only: the combination the others are tested against, as key=value[,key=value] (default: the first)")
	return cmd
}

// reportSweep re-analyses every run of a sweep that has a folder, then writes the sweep report.
func reportSweep(stdout, stderr io.Writer, dir string, opts sweep.Options) error {
	sw, err := sweep.Read(dir)
	if err != nil {
		return fmt.Errorf("%w: SWEEP_DIR %s: %v", errUsage, dir, err)
	}
	if opts.Baseline != "" { // bad input is found before anything is rewritten
		if _, err := sweep.ParseSelector(opts.Baseline); err != nil {
			return fmt.Errorf("%w: --baseline: %v", errUsage, err)
		}
	}
	for _, r := range sw.Runs {
		rd := filepath.Join(dir, r.Dir)
		if _, err := os.Stat(rd); err != nil {
			continue // never ran; the sweep report says so
		}
		if err := report(io.Discard, stderr, rd); err != nil {
			fmt.Fprintf(stderr, "warning: %s: %v\n", r.Dir, err)
		}
	}
	set, err := sweep.Load(dir)
	if err != nil {
		return fmt.Errorf("read sweep %s: %w", dir, err)
	}
	rep, err := sweep.WriteReport(set, opts)
	if errors.Is(err, sweep.ErrBadBaseline) {
		return fmt.Errorf("%w: --baseline: %v", errUsage, err)
	}
	if err != nil && rep == nil {
		return fmt.Errorf("write sweep report of %s: %w", dir, err)
	}
	if err != nil {
		fmt.Fprintln(stderr, "warning:", err)
	}
	fmt.Fprintf(stdout, "sweep %s: %d combination(s), %d of %d run(s) with figures\n", sw.ID, len(rep.Groups), countRan(set), len(sw.Runs))
	fmt.Fprintln(stdout, filepath.Join(dir, sweep.ReportName))
	return nil
}

func countRan(set *sweep.Set) int {
	n := 0
	for _, r := range set.Runs {
		if r.Summary != nil {
			n++
		}
	}
	return n
}

// runFolderFiles are what `rig run` writes first; a folder with none of them is not a run folder,
// and `rig report` must not litter it with a report.
var runFolderFiles = []string{rundir.ManifestFile, rundir.EventsFile, filepath.Join(rundir.LoadgenDir, rundir.ProbesFile)}

// checkReportMemory refuses a run folder whose analysis would not fit in this machine's memory
// (analysis.EstimateMemory: the probes, ledger and line files it reads, from their sizes and what
// the run declared), as rig validate refuses a book that would not fit; nothing is written then.
func checkReportMemory(stderr io.Writer, dir string) error {
	need, _ := analysis.EstimateMemory(dir) // what it cannot size leads outside: the analysis names it
	_, avail, err := facts.Memory("/")
	if err != nil || avail == 0 {
		fmt.Fprintf(stderr, "note: analysing %s needs %s; this machine's MemAvailable is not known (%v): not checked\n", dir, need, err)
		return nil
	}
	if err := need.Check(int64(min(avail, math.MaxInt64)), "MemAvailable in this machine's /proc/meminfo"); err != nil {
		return fmt.Errorf("RUN_DIR %s: %w", dir, err)
	}
	return nil
}

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
		if _, err := (rundir.Folder{Dir: dir}).Stat(f); err == nil {
			found = true
			break
		}
	}
	if !found {
		return fmt.Errorf("%w: RUN_DIR %s is not a run folder: it holds none of %s", errUsage, dir, strings.Join(runFolderFiles, ", "))
	}
	if err := checkReportMemory(stderr, dir); err != nil {
		return err
	}
	s, err := analysis.Analyze(dir)
	if errors.Is(err, analysis.ErrNotRunDir) {
		return fmt.Errorf("%w: RUN_DIR %s: %v", errUsage, dir, err)
	}
	if err != nil {
		return fmt.Errorf("analyze %s: %w", dir, err)
	}
	// A controller killed during a disk: run leaves its models mounted, dead (every access fails
	// with ENOTCONN): detached here, and named.
	left, err := local.ReclaimDisks(dir, s.RunID)
	for _, l := range left {
		s.Warnings = append(s.Warnings, local.Detached(l))
	}
	if err != nil {
		s.Warnings = append(s.Warnings, fmt.Sprintf("dead disk model mounts: %v", err))
	}
	werr := analysis.WriteOutputs(dir, s)
	for _, w := range s.Warnings { // what was refused is named even when a plot could not be written
		fmt.Fprintln(stderr, "warning:", w)
	}
	if werr != nil {
		return fmt.Errorf("write report of %s: %w", dir, werr)
	}
	p50 := "—"
	if s.Probes.P50Us != nil {
		p50 = fmt.Sprintf("%.2f ms", *s.Probes.P50Us/1e3)
	}
	agree := s.StateHashes.Result
	fmt.Fprintf(stdout, "%s: %s · probes n=%d lost=%d p50 %s · %d snapshot(s) · %d restart(s) · state hashes %s · %d warning(s)\n",
		s.RunID, s.Status, s.Probes.N, s.Probes.Lost, p50, len(s.Snapshots), len(s.Restarts), agree, len(s.Warnings))
	fmt.Fprintln(stdout, filepath.Join(dir, rundir.ReportFile))
	return nil
}
