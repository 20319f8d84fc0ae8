package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/history"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/playbooks/estimate"
	"github.com/rig-dev/rig/runner"
	"github.com/rig-dev/rig/sweep"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/target/local"
	sshtarget "github.com/rig-dev/rig/target/ssh"
	"github.com/rig-dev/rig/transport/sshx"
)

func newRunCmd(drivers *driver.Registry) *cobra.Command {
	var (
		opts          runner.Options
		stackName     string
		inventoryFile string
		remote        sshtarget.TargetOptions
		localOpts     local.Options
		quiet         bool
		resumeDir     string
		acceptRig     bool
		budget        string
		deadline      time.Duration
		stackConfig   string
		indexPath     string
	)
	cmd := &cobra.Command{
		Use:   "run PLAYBOOK | --resume SWEEP_DIR [PLAYBOOK]",
		Short: "Run a playbook (a file, or the name of an embedded one) and write results/<run-id>/ (a matrix or rounds: results/<sweep-id>/ with r01, r02, … and a sweep report)",
		Long: "Run a playbook (a file, or the name of an embedded one) and write results/<run-id>/ (a matrix or rounds: results/<sweep-id>/ with r01, r02, … and a sweep report).\n\n" +
			"--resume SWEEP_DIR continues an interrupted sweep: with the same playbook (by default the file or embedded playbook sweep.json names), " +
			"target and rig it keeps every run that ended ok, moves the others' folders aside to SWEEP_DIR/attempts/N/rNN and runs them and the never-started ones in plan order, " +
			"recording the new attempt in sweep.json.",
		Args: func(cmd *cobra.Command, args []string) error {
			if resumeDir != "" {
				return cobra.MaximumNArgs(1)(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if acceptRig && resumeDir == "" {
				return fmt.Errorf("%w: --accept-rig is for --resume", errUsage)
			}
			var resumed *sweep.Sweep
			if resumeDir != "" {
				if cmd.Flags().Changed("results") {
					return fmt.Errorf("%w: --resume: the runs go into SWEEP_DIR; --results is the parent folder of SWEEP_DIR, leave it out", errUsage)
				}
				sw, err := sweep.Read(resumeDir)
				if err != nil {
					return fmt.Errorf("%w: --resume %s: %v", errUsage, resumeDir, err)
				}
				resumed = sw
				opts.ResultsDir = filepath.Dir(filepath.Clean(resumeDir))
			}
			if opts.LeaseTTL < runner.MinLeaseTTL || opts.LeaseTTL > runner.MaxLeaseTTL {
				return fmt.Errorf("%w: --lease %s: want a duration from %s to %s (e.g. --lease 1m for remote nodes over a slow link)",
					errUsage, opts.LeaseTTL, runner.MinLeaseTTL, runner.MaxLeaseTTL)
			}
			var plan *playbooks.Plan
			var err error
			if resumed != nil && len(args) == 0 {
				src, p, err := sweepPlan(resumeDir, resumed, drivers)
				if err != nil {
					return err
				}
				args, plan = []string{src}, p
			} else {
				var pb *playbooks.Playbook
				if pb, err = playbooks.Open(args[0], drivers); err != nil {
					return fmt.Errorf("%w: %v", errUsage, err)
				}
				if plan, err = pb.Plan(); err != nil {
					return fmt.Errorf("%w: %v", errUsage, err)
				}
			}
			if localOpts.DataDir != "" {
				if stackName != "" || inventoryFile != "" {
					return fmt.Errorf("%w: --local-data is for the local target; on nodes, engine data goes to the data volume (--data-mount) or the agent folder", errUsage)
				}
				if fi, err := os.Stat(localOpts.DataDir); err != nil || !fi.IsDir() {
					return fmt.Errorf("%w: --local-data %s: want an existing folder", errUsage, localOpts.DataDir)
				}
				if localOpts.DataDir, err = filepath.Abs(localOpts.DataDir); err != nil {
					return fmt.Errorf("%w: --local-data: %v", errUsage, err)
				}
			}
			if opts.Target, stackName, err = openTarget(targetChoice{Stack: stackName, Inventory: inventoryFile, Remote: remote, Local: localOpts}); err != nil {
				return err
			}
			// Keys are read now, through the guarded reader: a bad one would otherwise fail the run
			// after its folder exists.
			for _, k := range remote.Login.KeyFiles {
				if _, err := sshx.LoadKey(k); err != nil {
					return fmt.Errorf("%w: --ssh-key: %v", errUsage, err)
				}
			}
			if !quiet {
				opts.Progress = cmd.ErrOrStderr()
			}
			opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			where := sweep.StartOptions{Progress: opts.Progress, Target: opts.Target.Name(), Stack: stackName}
			limits, err := runLimits(cmd, plan, &opts, budget, deadline, stackConfig, stackName, inventoryFile, resumeDir)
			if err != nil {
				return err
			}
			var sw *sweep.Tracker
			if resumed != nil {
				if len(plan.Runs) < 2 {
					return fmt.Errorf("%w: --resume %s: %s plans one run, the sweep %d", errUsage, resumeDir, args[0], len(resumed.Runs))
				}
				opts.OpenSweep = func() (runner.Sweep, error) {
					var err error
					if sw, err = sweep.Resume(resumeDir, plan, sweep.ResumeOptions{StartOptions: where, AcceptRig: acceptRig}); err != nil {
						return nil, fmt.Errorf("%w: %w", errUsage, err)
					}
					sw.SetLimits(limits)
					return sw, nil
				}
			} else {
				opts.OpenSweep = func() (runner.Sweep, error) {
					var err error
					if sw, err = sweep.Start(opts.ResultsDir, plan, plan.Playbook.Name, where); err != nil {
						return nil, err
					}
					sw.SetLimits(limits)
					return sw, nil
				}
			}
			opts.Analyze = analysis.AnalyzeRun
			opts.Command = os.Args
			idx := newRunIndexer(cmd.Context(), cmd.ErrOrStderr(), resultsIndex(indexPath, opts.ResultsDir))
			defer idx.close()
			opts.RunEnded = idx.add
			outs, err := runner.Run(cmd.Context(), plan, opts)
			for _, o := range outs {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", o.Status, o.Dir)
			}
			if sw != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "sweep\t%s\n", filepath.Join(sw.Dir, sweep.ReportName))
			}
			if errors.Is(err, sweep.ErrOverLimit) && sw != nil {
				return fmt.Errorf("stopped: %w; rig run --resume %s continues the sweep", err, sw.Dir)
			}
			if errors.Is(err, runner.ErrInterrupted) && sw != nil {
				return fmt.Errorf("interrupted: rig run --resume %s continues the sweep", sw.Dir)
			}
			if errors.Is(err, runner.ErrInterrupted) {
				return fmt.Errorf("interrupted: results so far are in the run folder")
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.ResultsDir, "results", "results", "folder for run and sweep folders")
	f.StringVar(&stackName, "stack", "", "run on the nodes of this Pulumi stack (rig up; @NAME means $USER-NAME) instead of the local target")
	f.StringVar(&inventoryFile, "inventory", "", "run on the nodes of this inventory JSON file (reached over SSH)")
	sshKeyFlag(f, &remote.Login.KeyFiles, "SSH private key file(s) for --stack/--inventory")
	f.StringVar(&remote.Base, "remote-dir", "", "base folder on the nodes for --stack/--inventory, holding rig-NODE (default: the login home)")
	f.StringVar(&opts.DataMount, "data-mount", "/data", "where each server's data volume (inventory data_device) is mounted for engine data")
	f.StringVar(&opts.DataFS, "data-fs", "xfs", "filesystem made on a data volume that has none (xfs or ext4; one that has a filesystem is never formatted)")
	f.BoolVar(&remote.Sudo, "sudo", false, "run agents as root through sudo -n (kernel tuning needs root)")
	f.StringVar(&remote.SysrqTrigger, "sysrq-trigger", "", "--inventory: let a power_loss reboot the nodes without sync by writing b to this file on them ("+
		sshtarget.PowerCutNodes+"; default on a --stack, none for an inventory: a power_loss is refused; docs/disks.md)")
	f.StringVar(&remote.PowerProc, "agent-power-proc", "", "tests: the agents' --power-proc on the nodes ({node} is the node's name)")
	f.MarkHidden("agent-power-proc")
	f.DurationVar(&opts.RebootTimeout, "reboot-timeout", target.DefaultRebootTimeout, "how long a node a power_loss rebooted has to come back (--stack/--inventory)")
	f.StringVar(&localOpts.FirstAddress, "first-address", "127.0.0.11", "local target: loopback address of the first node")
	f.StringVar(&localOpts.DataDir, "local-data", "", "local target: keep each server's engine data (raft log, snapshots) in DIR/NODE/ instead of its node folder, e.g. on a filesystem of its own")
	f.BoolVar(&opts.KeepData, "keep-data", false, "keep engine data (raft log, snapshots) where the run wrote it: the node folder, --local-data DIR/NODE/rig/RUN-ID, or the data volume")
	f.BoolVar(&localOpts.Tune, "tune-local", false, "apply the playbook's kernel tuning on this machine when running on the local target (reverted at the end)")
	f.DurationVar(&opts.LeaseTTL, "lease", runner.DefaultLeaseTTL, "how long each agent keeps the run's lease without a renewal (renewed every quarter of it); "+
		"when it lapses the agent stops its engine and reverts its tuning, and the run fails naming the node (5s to 10m; docs/security.md)")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress lines")
	f.StringVar(&resumeDir, "resume", "", "continue the interrupted sweep in this folder (results/<sweep-id>): keep its ok runs, rerun the rest in plan order")
	f.StringVar(&budget, "budget", "", "with --stack or --inventory: refuse a plan whose expected cost (time estimate x the price of --stack-config) passes this many US dollars (a finite amount above 0, e.g. 20USD), and stop a sweep before the run that would pass it (resumable)")
	f.DurationVar(&deadline, "deadline", 0, "refuse a plan expected to take longer than this from now, e.g. 45m, and stop a sweep before the run that would end after it (resumable)")
	f.StringVar(&stackConfig, "stack-config", "", "with --stack or --inventory: the stack config (Pulumi.<stack>.yaml) whose hourly price --budget counts and the expected cost is printed with (default with --stack NAME: Pulumi.NAME.yaml in this folder, if there is one)")
	f.StringVar(&opts.EngineVersion, "engine-version", "", "a label for the engine build under test (a release or build name), kept in the manifest's engine_build and the results index (default for the reference engine: rig's version)")
	f.StringVar(&opts.EngineCommit, "engine-commit", "", "the commit the engine under test was built from (default for the reference engine: rig's commit)")
	f.StringVar(&indexPath, "index", "", "the results index every finished run is added to (default RESULTS/"+history.DefaultFile+"; \"none\": not indexed; docs/results.md)")
	f.BoolVar(&acceptRig, "accept-rig", false, "with --resume: accept a rig version or commit other than the sweep's last attempt's, and record it")
	return cmd
}

// sweepPlan opens the playbook sweep.json names as its source, for a --resume without PLAYBOOK.
// sweep.json may have been edited, so its source is only trusted to be a path: an embedded
// name opens the embedded playbook only, and a file is read through the guarded reader; when it
// is not a playbook, its problems are not shown (they would quote the file, whatever it is:
// "fakeshadow:1:1: root:$6$…"), only that it is not, and how to see them.
func sweepPlan(resumeDir string, sw *sweep.Sweep, drivers *driver.Registry) (string, *playbooks.Plan, error) {
	if sw.Source == "" {
		return "", nil, fmt.Errorf("%w: --resume %s: sweep.json names no playbook source; give the PLAYBOOK", errUsage, resumeDir)
	}
	src := sw.Source
	var pb *playbooks.Playbook
	var err error
	if name, ok := strings.CutPrefix(src, "embedded:"); ok {
		src = name
		if !slices.Contains(playbooks.List(), name) {
			return "", nil, fmt.Errorf("%w: --resume %s: sweep.json's source %q is no embedded playbook (embedded: %s); give the PLAYBOOK",
				errUsage, resumeDir, sw.Source, strings.Join(playbooks.List(), ", "))
		}
	} else if fi, serr := os.Stat(src); serr == nil && fi.IsDir() {
		return "", nil, fmt.Errorf("%w: --resume %s: sweep.json's source %s is a directory, not the sweep's playbook; give the PLAYBOOK", errUsage, resumeDir, src)
	}
	pb, err = playbooks.Open(src, drivers)
	var plan *playbooks.Plan
	if err == nil {
		plan, err = pb.Plan()
	}
	var probs playbooks.Problems
	switch {
	case err == nil:
		return src, plan, nil
	case errors.As(err, &probs):
		return "", nil, fmt.Errorf("%w: --resume %s: sweep.json's source %s is not the sweep's playbook: it does not read as a playbook "+
			"(%d problem(s), not shown since the path comes from sweep.json); give the PLAYBOOK (rig validate PLAYBOOK lists a playbook's problems)",
			errUsage, resumeDir, src, len(probs))
	default: // not found, not a regular file, too large: the error names the path and what it is
		return "", nil, fmt.Errorf("%w: --resume %s: sweep.json's source: %v; give the PLAYBOOK", errUsage, resumeDir, err)
	}
}

// runLimits checks --budget, --deadline and --stack-config, prints the plan's expected time and
// cost, and refuses (before anything starts) a plan whose runs left cannot fit the limits.
func runLimits(cmd *cobra.Command, plan *playbooks.Plan, opts *runner.Options, budget string, deadline time.Duration,
	stackConfig, stackName, inventoryFile, resumeDir string) (sweep.Limits, error) {
	var l sweep.Limits
	if deadline < 0 {
		return l, fmt.Errorf("%w: --deadline %s: want a duration above 0, e.g. 45m", errUsage, deadline)
	}
	if stackName == "" && inventoryFile == "" && (budget != "" || stackConfig != "") {
		// The local target is this machine: a stack's price would make up a cost (and its
		// estimate would be the stack's) for a run that costs nothing.
		flag := "--budget"
		if budget == "" {
			flag = "--stack-config"
		}
		return l, fmt.Errorf("%w: %s: a run on the local target (this machine) has no price per hour; --budget and --stack-config are for a run on a stack's nodes (--stack NAME or --inventory FILE); nothing was started",
			errUsage, flag)
	}
	auto := false
	if stackConfig == "" && stackName != "" {
		// rig up's config of the stack, when rig runs from the project folder.
		if p := "Pulumi." + stackName + ".yaml"; fileExists(p) {
			stackConfig, auto = p, true
		}
	}
	if budget != "" {
		v, err := sweep.ParseUSD(budget)
		if err != nil {
			return l, fmt.Errorf("%w: --budget %v", errUsage, err)
		}
		if stackConfig == "" {
			return l, fmt.Errorf("%w: --budget %s: needs the cluster's price per hour: give --stack-config Pulumi.<stack>.yaml (with --stack NAME, Pulumi.NAME.yaml in this folder is read when there is one)", errUsage, budget)
		}
		l.BudgetUSD = v
	}
	priceStack := ""
	if stackConfig != "" {
		var err error
		if l.PricePerHour, priceStack, err = stackPrice(stackConfig); err != nil {
			if !auto || budget != "" {
				return l, fmt.Errorf("%w: --stack-config %s: %v", errUsage, stackConfig, err)
			}
			if opts.Progress != nil { // only the expected cost is lost
				fmt.Fprintf(opts.Progress, "warning: %s not priced: %v\n", stackConfig, err)
			}
			l.PricePerHour, priceStack = 0, ""
		}
		if stackName != "" && priceStack != "" && priceStack != stackName {
			return l, fmt.Errorf("%w: --stack-config %s is stack %q, --stack is %q: give the config of the stack the sweep runs on", errUsage, stackConfig, priceStack, stackName)
		}
	}
	if deadline > 0 {
		l.Deadline = time.Now().Add(deadline)
	}
	// The estimate, as rig validate makes it: this results folder's stage times on this target.
	hist, _ := estimate.Load(opts.ResultsDir)
	plan.Model, plan.Target = estimate.NewModel(hist), estimate.Target("local", "")
	plan.BookStored = func(run *playbooks.Playbook) bool { return runner.BookStored(opts.ResultsDir, run) }
	switch {
	case stackName != "":
		plan.Target = estimate.Target("aws", stackName)
	case inventoryFile != "":
		if inv, err := inventory.Load(inventoryFile); err == nil {
			plan.Target = estimate.Target(inv.Target, "")
		}
	}
	todo := make([]int, len(plan.Runs))
	for i := range todo {
		todo[i] = i
	}
	if resumeDir != "" {
		var err error
		if todo, err = sweep.Pending(resumeDir); err != nil {
			return l, fmt.Errorf("%w: --resume %s: %v", errUsage, resumeDir, err)
		}
	}
	need := sweep.Need(plan, todo)
	if opts.Progress != nil {
		line := fmt.Sprintf("expected: %d run(s), ~%s", len(todo), need.Round(time.Second))
		if l.PricePerHour > 0 {
			line += fmt.Sprintf(", ~$%.2f at $%.2f/h (%s)", l.Cost(need), l.PricePerHour, stackConfig)
		}
		fmt.Fprintln(opts.Progress, line)
	}
	what := fmt.Sprintf("the plan's %d run(s) left would", len(todo))
	if resumeDir == "" {
		what = fmt.Sprintf("the plan's %d run(s) would", len(todo))
	}
	if err := l.Check(time.Now(), need, what); err != nil {
		flag := "--deadline"
		if l.BudgetUSD > 0 && (l.Deadline.IsZero() || !time.Now().Add(need).After(l.Deadline)) {
			flag = "--budget"
		}
		return l, fmt.Errorf("%w: %s: %v; nothing was started", errUsage, flag, err)
	}
	return l, nil
}

func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
