package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/archive"
	"github.com/rig-dev/rig/history"
	"github.com/rig-dev/rig/infra/stack"
	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/internal/mdtext"
	"github.com/rig-dev/rig/internal/untrusted"
	"github.com/rig-dev/rig/runner"
	"github.com/rig-dev/rig/stats"
	"github.com/rig-dev/rig/sweep"
)

// resultsIndex is the index `rig run` adds to: --index, else RESULTS/index.db; "" for none.
func resultsIndex(flag, resultsDir string) string {
	switch flag {
	case "none":
		return ""
	case "":
		return filepath.Join(resultsDir, history.DefaultFile)
	}
	return flag
}

// runIndexer adds each run to the results index as it ends. A failure is a warning: the run
// folders are the record, and `rig history import` rebuilds the index from them.
type runIndexer struct {
	ctx    context.Context
	stderr io.Writer
	path   string
	x      *history.Index
	added  int
	broken bool
}

func newRunIndexer(ctx context.Context, stderr io.Writer, path string) *runIndexer {
	return &runIndexer{ctx: context.WithoutCancel(ctx), stderr: stderr, path: path}
}

// add indexes one run that ended; the index is opened (made) with the first run that left a
// folder, so a refused plan makes none.
func (ri *runIndexer) add(o runner.Outcome) {
	if ri.path == "" || ri.broken || o.Dir == "" {
		return
	}
	if ri.x == nil {
		x, err := history.Open(ri.path)
		if err != nil {
			fmt.Fprintf(ri.stderr, "warning: results index: %v (rig history import rebuilds it)\n", err)
			ri.broken = true
			return
		}
		ri.x = x
	}
	added, why, err := history.AddRun(ri.ctx, ri.x, o.Dir)
	switch {
	case err != nil:
		fmt.Fprintf(ri.stderr, "warning: results index: %s: %v\n", o.Dir, err)
	case !added:
		fmt.Fprintf(ri.stderr, "results index: %s not indexed: %s\n", o.Dir, why)
	default:
		ri.added++
	}
}

func (ri *runIndexer) close() {
	if ri.x == nil {
		return
	}
	ri.x.Close()
	if ri.added > 0 {
		fmt.Fprintf(ri.stderr, "results index: %d run(s) added to %s\n", ri.added, ri.path)
	}
}

// historyFlags are the index and the filters every `rig history` verb takes.
type historyFlags struct {
	index, results  string
	playbook, sweep string
	target, engine  string
	where           []string
	since, until    string
	status          string
}

func (h *historyFlags) add(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&h.results, "results", "results", "the results folder whose index is read ("+history.DefaultFile+" in it)")
	f.StringVar(&h.index, "index", "", "the results index (default RESULTS/"+history.DefaultFile+")")
	f.StringVar(&h.playbook, "playbook", "", "only runs of this playbook (its name)")
	f.StringVar(&h.sweep, "sweep", "", "only runs of this sweep id")
	f.StringVar(&h.target, "target", "", "only runs on this target (local, inventory:FILE) or with this instance type (c6in.16xlarge)")
	f.StringVar(&h.engine, "engine", "", "only runs of this engine version label, or commit or binary sha256 prefix")
	f.StringArrayVar(&h.where, "where", nil, "only runs with these settings, key=value[,key=value] by playbook path (repeatable), e.g. engine.sync_level=2")
	f.StringVar(&h.since, "since", "", "only runs started from this date (2006-01-02 or RFC 3339, UTC)")
	f.StringVar(&h.until, "until", "", "only runs started before this date")
	f.StringVar(&h.status, "status", "ok", "only runs of this status: ok, failed or all")
}

func (h *historyFlags) path() string {
	if h.index != "" {
		return h.index
	}
	return filepath.Join(h.results, history.DefaultFile)
}

func parseDate(flag, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: --%s %q: want a date 2006-01-02 or a time 2006-01-02T15:04:05Z", errUsage, flag, s)
}

func (h *historyFlags) filter() (history.Filter, error) {
	f := history.Filter{Playbook: h.playbook, Sweep: h.sweep, Target: h.target, Engine: h.engine, Status: h.status}
	switch h.status {
	case "ok", "failed", "all":
	default:
		return f, fmt.Errorf("%w: --status %q: want ok, failed or all", errUsage, h.status)
	}
	for _, w := range h.where {
		sel, err := sweep.ParseSelector(w)
		if err != nil {
			return f, fmt.Errorf("%w: --where: %v", errUsage, err)
		}
		if f.Where == nil {
			f.Where = map[string]string{}
		}
		for k, v := range sel {
			f.Where[k] = v
		}
	}
	if err := f.Check(); err != nil {
		return f, fmt.Errorf("%w: --where: %v", errUsage, err)
	}
	var err error
	if f.Since, err = parseDate("since", h.since); err != nil {
		return f, err
	}
	if f.Until, err = parseDate("until", h.until); err != nil {
		return f, err
	}
	return f, nil
}

// open opens an existing index read-only: reading verbs never create one, nor write to it.
func (h *historyFlags) open() (*history.Index, error) {
	p := h.path()
	x, err := history.OpenReadOnly(p)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, history.ErrEmpty):
		return nil, fmt.Errorf("%w: no results index at %s: rig run adds to it, rig history import %s builds it from the run folders", errUsage, p, h.results)
	case errors.Is(err, history.ErrNotRegular):
		return nil, fmt.Errorf("%w: --index: %v", errUsage, err)
	}
	return x, err
}

// checkOut refuses an output path that exists and is not a regular file (a symlink, a FIFO, a
// device, a folder) without opening it; outputs are then written atomically (atomicfile), so a
// reader or a crash sees the old file or the new one.
func checkOut(flag, p string) error {
	fi, err := os.Lstat(p)
	switch {
	case err == nil && !fi.Mode().IsRegular():
		return fmt.Errorf("%w: --%s %s is a %s, not a regular file; want a regular file or a new name", errUsage, flag, p, fileKind(fi.Mode()))
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: --%s: %v", errUsage, flag, err)
	}
	return nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m.IsDir():
		return "folder"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return "device"
}

// openFiltered is what every reading verb starts with: the runs its flags select, in the index.
func (h *historyFlags) openFiltered() (*history.Index, history.Filter, error) {
	f, err := h.filter()
	if err != nil {
		return nil, f, err
	}
	x, err := h.open()
	return x, f, err
}

func newHistoryCmd() *cobra.Command {
	var h historyFlags
	cmd := &cobra.Command{
		Use:   "history",
		Short: "The results index: list runs, a figure over time, its trend across engine versions, a benchmark log",
		Long: "Every run rig runs is added to a results index (RESULTS/" + history.DefaultFile + ", SQLite) with its command line,\n" +
			"playbook hash and settings, machine, rig and engine versions, load average and every summary figure\n" +
			"with n and spread; `rig history import` rebuilds it from run folders or archives (docs/results.md).\n\n" +
			"Without a subcommand: list the runs the filters select, oldest first.",
		Args:        cobra.NoArgs,
		Annotations: map[string]string{exitOnInterrupt: "yes"}, // it only reads
		RunE: func(cmd *cobra.Command, args []string) error {
			x, f, err := h.openFiltered()
			if err != nil {
				return err
			}
			defer x.Close()
			runs, err := x.Runs(cmd.Context(), f)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "STARTED\tRUN\tPLAYBOOK\tCOMBINATION\tSTATUS\tENGINE\tRIG\tWHERE\tLOAD")
			for _, r := range runs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Started.Format("2006-01-02 15:04"), mdtext.Plain(r.RunID),
					mdtext.Plain(r.Playbook), mdtext.Plain(orNone(r.Combination)), mdtext.Plain(r.Status), mdtext.Plain(r.EngineLabel()),
					mdtext.Plain(rigLabel(r)), mdtext.Plain(r.Target+" "+r.InstanceTypes), load(r.Load1Start))
			}
			tw.Flush()
			fmt.Fprintf(cmd.ErrOrStderr(), "%d run(s) in %s\n", len(runs), mdtext.Plain(x.Path))
			return nil
		},
	}
	h.add(cmd)
	cmd.AddCommand(historyImportCmd(&h), historyTableCmd(&h), historyTrendCmd(&h), historyLogCmd(&h))
	return cmd
}

func orNone(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func rigLabel(r *history.Run) string {
	s := r.Rig.Version
	if r.Rig.Commit != "" {
		s += " " + r.Rig.Commit[:min(12, len(r.Rig.Commit))]
	}
	return s
}

func load(l *float64) string {
	if l == nil {
		return "—"
	}
	return fmt.Sprintf("%.2f", *l)
}

func historyImportCmd(h *historyFlags) *cobra.Command {
	var fresh bool
	var region, projectDir string
	cmd := &cobra.Command{
		Use:   "import DIR|s3://bucket/prefix ...",
		Short: "Add every run under DIR (run folders, sweep folders, a folder of archives) or an S3 archive to the index",
		Long: "Walks DIR: a sweep folder's runs, run folders, and a folder of archives (rig archive --to DIR: each\n" +
			"verified against its manifest and unpacked to be read); with s3://bucket/prefix the stack driver\n" +
			"downloads and verifies every archive there first. One transaction per run: a run is indexed whole or\n" +
			"not at all. A run still running, abandoned or interrupted, a truncated summary.json or manifest.json,\n" +
			"a sweep's run that never started and an archive that does not match its manifest are skipped and named.\n" +
			"--fresh builds a new index and puts it in place of the old one only once every source is read.",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("%w: import takes one or more folders or s3://bucket/prefix, e.g. rig history import results", errUsage)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var roots []string
			sources := map[string]string{} // an unpacked S3 archive's folder -> where it came from
			for _, a := range args {
				loc, err := archive.ParseLocation(a)
				if err != nil {
					return fmt.Errorf("%w: %v", errUsage, err)
				}
				if loc.Bucket == "" {
					if fi, err := os.Stat(a); err != nil || !fi.IsDir() {
						return fmt.Errorf("%w: %s is not a folder", errUsage, a)
					}
					roots = append(roots, a)
					continue
				}
				// S3 archives are read by the stack driver, which links the AWS SDK (archive/s3dest).
				tmp, err := os.MkdirTemp("", "rig-history-s3-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				dargs := []string{"fetch", "--from", a, "--out", tmp}
				if region != "" {
					dargs = append(dargs, "--region", region)
				}
				err = stack.RunDriver(ctx, stack.DriverOptions{ProjectDir: projectDir, Stdout: cmd.ErrOrStderr(), Stderr: cmd.ErrOrStderr()}, dargs...)
				var ee *stack.ExitError
				if errors.As(err, &ee) && ee.Code == 2 {
					return fmt.Errorf("%w: %w", errUsage, err)
				}
				if err != nil {
					return fmt.Errorf("fetch %s: %w", a, err)
				}
				roots, sources[tmp] = append(roots, tmp), strings.TrimSuffix("s3://"+loc.Bucket+"/"+loc.Prefix, "/")+"/"
			}
			opts := func(root string) history.ImportOptions { return history.ImportOptions{Source: sources[root]} }
			var rep *history.ImportReport
			var err error
			if fresh {
				rep, err = history.Rebuild(ctx, h.path(), roots, opts)
			} else {
				var x *history.Index
				if x, err = history.Open(h.path()); err == nil {
					defer x.Close()
					rep, err = history.ImportAll(ctx, x, roots, opts)
				}
			}
			if rep != nil {
				history.PrintReport(cmd.OutOrStdout(), rep, h.path())
			}
			if errors.Is(err, history.ErrNotRegular) {
				return fmt.Errorf("%w: --index: %v", errUsage, err)
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&fresh, "fresh", false, "build a new index from these sources instead of adding to the existing one")
	cmd.Flags().StringVar(&region, "region", "", "AWS region of an s3:// bucket (default: the SDK's configured region)")
	cmd.Flags().StringVar(&projectDir, "project-dir", ".", "the repository root, where the stack driver is built from (s3:// only)")
	return cmd
}

func historyTableCmd(h *historyFlags) *cobra.Command {
	return &cobra.Command{
		Use:         "table FIGURE",
		Short:       "One figure of every selected run over time: its values with n and spread",
		Annotations: map[string]string{exitOnInterrupt: "yes"}, // it only reads
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("%w: table takes one FIGURE, e.g. snapshot.take (rig history trend lists them when it is unknown)", errUsage)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			x, f, err := h.openFiltered()
			if err != nil {
				return err
			}
			defer x.Close()
			pts, err := x.Figure(cmd.Context(), f, args[0])
			if errors.Is(err, history.ErrUnknownFigure) {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if len(pts) > 0 {
				fmt.Fprintf(w, "%s (%s), %s\n\n", mdtext.Inline(pts[0].Figure.Label), mdtext.Inline(pts[0].Figure.Unit), pts[0].Figure.Dir)
			}
			fmt.Fprintln(w, "| started | run | combination | engine | where | value: median [min–max] n | mean ± stdev | load |")
			fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
			for _, p := range pts {
				s := p.Figure.Sample
				fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %.4g ± %.3g | %s |\n", p.Run.Started.Format("2006-01-02 15:04"), mdtext.Inline(p.Run.RunID),
					mdtext.Inline(orNone(p.Run.Combination)), mdtext.Inline(p.Run.EngineLabel()), mdtext.Inline(p.Run.Where()), sweep.Cell(sweep.Metric{}, s),
					s.Mean, s.Stdev, load(p.Run.Load1Start))
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%d run(s)\n", len(pts))
			return nil
		},
	}
}

func historyTrendCmd(h *historyFlags) *cobra.Command {
	var o history.TrendOptions
	var commitsFile, plotPath string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "trend FIGURE [--where k=v ...]",
		Short: "A figure across engine versions, with its change points (E-divisive means, permutation test)",
		Long: "Pools the figure's values by engine version (rig run --engine-version, else the engine's commit or\n" +
			"binary hash), orders the versions by their first run (--order date), by label as version numbers\n" +
			"(--order version) or by git history (--order commit --commits FILE), and looks for change points in\n" +
			"the series of version medians (or one point per run with --per-run) by E-divisive means, each\n" +
			"kept when a permutation test gives p ≤ --max-p.\n" +
			"For each: the version it starts at, its size (difference of means before and after, Welch's 95 % CI)\n" +
			"and p. Narrow the runs to one experiment with the filters (--playbook, --where): a trend over mixed\n" +
			"settings finds the settings, not the versions.",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("%w: trend takes one FIGURE, e.g. snapshot.take", errUsage)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := h.filter()
			if err != nil {
				return err
			}
			if o.Order != history.OrderDate && o.Order != history.OrderCommit && o.Order != history.OrderVersion {
				return fmt.Errorf("%w: --order %q: want date, version or commit", errUsage, o.Order)
			}
			if o.MaxP <= 0 || o.MaxP >= 1 {
				return fmt.Errorf("%w: --max-p %g: want a p-value between 0 and 1, e.g. 0.05", errUsage, o.MaxP)
			}
			if o.Permutations < 19 {
				return fmt.Errorf("%w: --permutations %d: want at least 19 (p cannot go below 1/(permutations+1))", errUsage, o.Permutations)
			}
			if o.Permutations > history.MaxPermutations {
				return fmt.Errorf("%w: --permutations %d: %v", errUsage, o.Permutations, history.ErrPermutations)
			}
			if plotPath != "" {
				if !strings.HasSuffix(plotPath, ".png") && !strings.HasSuffix(plotPath, ".svg") {
					return fmt.Errorf("%w: --plot %s: want a .png or .svg file", errUsage, plotPath)
				}
				if err := checkOut("plot", plotPath); err != nil {
					return err
				}
			}
			if o.Order == history.OrderCommit {
				if commitsFile == "" {
					return fmt.Errorf("%w: --order commit needs --commits FILE, the engine's commits oldest first (git rev-list --reverse HEAD > FILE)", errUsage)
				}
				b, err := untrusted.ReadFileUpTo(commitsFile, "--commits", 64<<20)
				if err != nil {
					return fmt.Errorf("%w: --commits: %v", errUsage, err)
				}
				o.Commits = strings.Fields(string(b))
				if len(o.Commits) == 0 {
					return fmt.Errorf("%w: --commits %s holds no commit; want one per line, oldest first (git rev-list --reverse HEAD)", errUsage, commitsFile)
				}
			}
			x, err := h.open()
			if err != nil {
				return err
			}
			defer x.Close()
			o.Figure, o.Filter = args[0], f
			t, err := x.Trend(cmd.Context(), o)
			if errors.Is(err, history.ErrUnknownFigure) {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", " ")
				if err := enc.Encode(t); err != nil {
					return err
				}
			} else {
				t.Markdown(cmd.OutOrStdout(), o)
			}
			if plotPath != "" {
				if err := t.Plot(plotPath); err != nil {
					return err
				}
				fmt.Fprintln(cmd.ErrOrStderr(), plotPath)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Order, "order", history.OrderDate, "order of the versions: date (first run of each), version (labels as version numbers: v2 < v10) or commit (git history, with --commits)")
	fl.StringVar(&commitsFile, "commits", "", "for --order commit: a file of the engine's commits, one per line, oldest first (git rev-list --reverse HEAD > FILE)")
	fl.BoolVar(&o.PerRun, "per-run", false, "one point per run (its median) instead of one per engine version")
	fl.Float64Var(&o.MaxP, "max-p", stats.Alpha, "a change point is kept when its permutation p is at most this")
	fl.IntVar(&o.Permutations, "permutations", 199, "shuffles per candidate change point")
	fl.Uint64Var(&o.Seed, "seed", 1, "seed of the shuffles (the same seed, the same answer)")
	fl.BoolVar(&asJSON, "json", false, "write the trend as JSON (versions with every value, the series, the change points)")
	fl.StringVar(&plotPath, "plot", "", "also draw the trend to this .png or .svg file")
	return cmd
}

func historyLogCmd(h *historyFlags) *cobra.Command {
	var out, title, order string
	var figures []string
	cmd := &cobra.Command{
		Use:   "log",
		Short: "A Markdown benchmark log of the selected runs: per sweep its command, machine, date, versions, figures, change points, folder",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			x, f, err := h.openFiltered()
			if err != nil {
				return err
			}
			defer x.Close()
			if order != history.OrderDate && order != history.OrderVersion {
				return fmt.Errorf("%w: --order %q: want date or version", errUsage, order)
			}
			if out != "" {
				if err := checkOut("out", out); err != nil {
					return err
				}
			}
			o := history.LogOptions{Filter: f, Figures: figures, Title: title,
				Trend: history.TrendOptions{Order: order, EDivisiveOptions: stats.EDivisiveOptions{Seed: 1}}}
			if out != "" {
				o.LinkFrom = filepath.Dir(out)
			}
			md, err := x.Log(cmd.Context(), o)
			if err != nil {
				return err
			}
			if out == "" {
				_, err := io.WriteString(cmd.OutOrStdout(), md)
				return err
			}
			if err := atomicfile.WriteFile(out, []byte(md), 0o644); err != nil {
				return err
			}
			fmt.Fprintln(cmd.ErrOrStderr(), out)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "write the page to this file (links to run folders relative to it) instead of stdout")
	cmd.Flags().StringVar(&title, "title", "", "the page's title (default: Benchmark log)")
	cmd.Flags().StringVar(&order, "order", history.OrderDate, "order of the engine versions in the trends the change points come from: date or version (as rig history trend)")
	cmd.Flags().StringSliceVar(&figures, "figures", nil, "figure keys each entry shows (default: the headline figures the runs have)")
	return cmd
}
