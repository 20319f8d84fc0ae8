package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/infra/spec"
	"github.com/rig-dev/rig/infra/stack"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/plancheck"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/playbooks/estimate"
	"github.com/rig-dev/rig/runner"
)

func newValidateCmd(drivers *driver.Registry) *cobra.Command {
	var stackConfig string
	var est estimateFlags
	cmd := &cobra.Command{
		Use:   "validate PLAYBOOK",
		Short: "Check a playbook (a file, or the name of an embedded one) and print its plan; changes nothing",
		Long: `Check a playbook and print what it would run: cluster, engine settings, tuning, preload, load,
the timeline with its offsets, every run of the matrix x rounds (interleaved), and the expected
duration, stage by stage (start-up, preload, load, finish, analysis), from the stage times of
earlier runs of the same engine on the same target recorded in the results folder
(` + estimate.HistoryFile + `), else (the preload) the rate the playbook declares (engine.preload_rate), else
this machine's defaults, measured on the reference engine; each stage says which. Every problem is listed as file:line:column: field: what is wrong and what would be valid.
Nothing is created, started or changed. Embedded playbooks: ` + strings.Join(playbooks.List(), ", ") + `.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("%w: validate takes one playbook, a file or an embedded name (%s); got %d arguments",
					errUsage, strings.Join(playbooks.List(), ", "), len(args))
			}
			return nil
		},
		Annotations: map[string]string{exitOnInterrupt: "yes"}, // it changes nothing
		RunE: func(cmd *cobra.Command, args []string) error {
			if est.stack != "" {
				var err error
				if est.stack, err = expandStack(est.stack); err != nil {
					return err
				}
				if err := inventory.CheckStackName("--stack", est.stack); err != nil {
					return fmt.Errorf("%w: %w", errUsage, err)
				}
			}
			return validate(cmd, args[0], stackConfig, est, drivers)
		},
	}
	cmd.Flags().StringVar(&stackConfig, "stack-config", "", "also check this Pulumi stack config file (Pulumi.<stack>.yaml)")
	cmd.Flags().StringVar(&est.results, "results", "results", "results folder whose stage-time history the estimates use")
	cmd.Flags().StringVar(&est.stack, "stack", "", "estimate for this Pulumi stack's cluster (@NAME means $USER-NAME; default: the local target)")
	return cmd
}

// validate prints the plan on stdout, or every problem on stderr, one per line. The playbook and
// the stack config are both checked before it returns, so one call reports everything.
func validate(cmd *cobra.Command, arg, stackConfig string, est estimateFlags, drivers *driver.Registry) error {
	var errs []error
	stackErr := func(err error) {
		// It already says usage; keep the one errUsage wrap below.
		errs = append(errs, fmt.Errorf("--stack-config %s: %s", stackConfig, strings.TrimPrefix(err.Error(), errUsage.Error()+": ")))
	}
	// The stack config is parsed first: a file that is not even YAML (a duplicate key, binary
	// junk) is reported with its position before the playbook's plan scrolls by.
	var sc *spec.StackConfig
	if stackConfig != "" {
		var err error
		if sc, err = spec.ReadStackConfig(stackConfig); err != nil {
			fmt.Fprintln(cmd.ErrOrStderr(), "error:", err)
			stackErr(fmt.Errorf("not read, see above"))
		}
	}
	if sc != nil && est.stack == "" {
		est.priceStack = sc.Stack // the estimate and the cost are for that stack's cluster
	}
	mem := memoryTarget(cmd, sc, est)
	plan, err := printPlan(cmd, arg, drivers, est, mem, plancheck.VolumeTarget(sc, est.stack))
	if err != nil {
		errs = append(errs, err)
	}
	if sc != nil {
		if err := validateStackConfig(cmd, sc); err != nil {
			stackErr(err)
		} else if perHour, _, err := stackPrice(stackConfig); err == nil && plan != nil {
			printSweepCost(cmd.OutOrStdout(), plan, perHour)
			if s, probs := sc.Spec(); len(probs.Errors()) == 0 {
				printCrossAZCost(cmd.OutOrStdout(), plan, s)
			}
		}
	}
	if est.stack != "" {
		if err := stackPreflight(cmd, est.stack); cmd.Context().Err() != nil {
			return fmt.Errorf("interrupted during the preflight of %s: %w", est.stack, cmd.Context().Err()) // not bad input: exit 1
		} else if err != nil {
			errs = append(errs, fmt.Errorf("--stack %s: %w", est.stack, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", errUsage, errors.Join(errs...))
	}
	return nil
}

// checkPlanMemory refuses a plan when a run's book would not fit in its hosts' memory
// (plancheck.Memory); otherwise it says what it could not check.
func checkPlanMemory(cmd *cobra.Command, plan *playbooks.Plan, mem plancheck.Hosts) error {
	if mem == nil {
		return nil
	}
	probs, checked := plancheck.Memory(plan, mem)
	if len(probs) > 0 {
		return probs
	}
	if !checked {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: the %s engine does not say what a resting order costs (engine.bytes_per_order): the book's memory is not checked\n",
			plan.Playbook.Engine.DriverName())
	}
	return nil
}

// memoryTarget is where rig validate checks a book's memory (plancheck.MemoryHosts); it says on
// stderr when it cannot know.
func memoryTarget(cmd *cobra.Command, sc *spec.StackConfig, est estimateFlags) plancheck.Hosts {
	h, note := plancheck.MemoryHosts(sc, est.stack)
	if h == nil && note != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: the book's memory is not checked: %s\n", note)
	}
	return h
}

// estimateFlags pick the stage-time history and the target the estimates are for.
// priceStack is the stack of --stack-config, when no --stack is given.
type estimateFlags struct{ results, stack, priceStack string }

// printPlan prints the plan and returns it (nil when the playbook has problems).
func printPlan(cmd *cobra.Command, arg string, drivers *driver.Registry, est estimateFlags, mem plancheck.Hosts, vols *plancheck.VolumeSource) (*playbooks.Plan, error) {
	pb, err := playbooks.Open(arg, drivers)
	if err == nil {
		var plan *playbooks.Plan
		if plan, err = pb.Plan(); err == nil {
			err = checkPlanMemory(cmd, plan, mem)
		}
		if err == nil {
			err = checkPlanVolumes(cmd, plan, vols)
		}
		if err == nil {
			hist, herr := estimate.Load(est.results)
			if herr != nil {
				// The plan is still valid; the estimates fall back to the defaults.
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v; estimates use this machine's defaults\n", herr)
			}
			plan.Model, plan.Target = estimate.NewModel(hist), estimate.Target("local", "")
			plan.BookStored = func(run *playbooks.Playbook) bool { return runner.BookStored(est.results, run) }
			if est.stack != "" {
				plan.Target = estimate.Target("aws", est.stack)
			} else if est.priceStack != "" {
				plan.Target = estimate.Target("aws", est.priceStack)
			}
			plan.Print(cmd.OutOrStdout())
			// What the plan needs of its target (a partition needs routed links: the local
			// target's), for the target it would run on.
			tgt, _, err := openTarget(targetChoice{Stack: est.stack}) // as rig run would
			if err != nil {
				return nil, err
			}
			if err := runner.CheckTarget(plan, tgt); err != nil {
				return nil, err
			}
			return plan, nil
		}
	}
	var probs playbooks.Problems
	if !errors.As(err, &probs) {
		return nil, err
	}
	for _, p := range probs {
		fmt.Fprintln(cmd.ErrOrStderr(), p)
	}
	return nil, listedProblems{arg: arg, probs: probs}
}

// listedProblems stands for problems already printed one per line, so the final error message
// stays one line while errors.As still reaches the list.
type listedProblems struct {
	arg   string
	probs playbooks.Problems
}

func (e listedProblems) Error() string {
	s := "s"
	if len(e.probs) == 1 {
		s = ""
	}
	return fmt.Sprintf("playbook %s: %d problem%s, listed above", e.arg, len(e.probs), s)
}

func (e listedProblems) Unwrap() error { return e.probs }

// stackPreflight asks AWS, through the stack driver, whether the stack can be made as its
// Pulumi.<stack>.yaml says (as rig up does first), when there is a config and AWS credentials
// are configured; otherwise it says why it did not ask.
func stackPreflight(cmd *cobra.Command, name string) error {
	out := cmd.OutOrStdout()
	path := "Pulumi." + name + ".yaml"
	if _, err := os.Stat("Pulumi.yaml"); err != nil {
		fmt.Fprintf(out, "preflight of %s not run: no Pulumi.yaml here (run rig validate from the repository root)\n", name)
		return nil
	}
	if _, err := os.Stat(path); err != nil {
		fmt.Fprintf(out, "preflight of %s not run: no %s\n", name, path)
		return nil
	}
	if !awsConfigured() {
		fmt.Fprintf(out, "preflight of %s not run: no AWS credentials configured (AWS_PROFILE, AWS_ACCESS_KEY_ID, ~/.aws)\n", name)
		return nil
	}
	if _, err := stack.FindPulumi(); err != nil {
		fmt.Fprintf(out, "preflight of %s not run: %v\n", name, err)
		return nil
	}
	// Preflight only asks AWS: interrupted, it is killed after preflightStopWait, not the two
	// minutes an update gets, so rig validate stops within a second of Ctrl-C or SIGTERM.
	err := stack.RunDriver(cmd.Context(), stack.DriverOptions{ProjectDir: ".", Stdin: cmd.InOrStdin(), Stdout: out, Stderr: cmd.ErrOrStderr(),
		StopWait: preflightStopWait}, "preflight", "--stack", name)
	var ee *stack.ExitError
	if errors.As(err, &ee) && ee.Code == 2 {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	return err
}

// preflightStopWait is how long an interrupted preflight has to exit before it is killed.
const preflightStopWait = 300 * time.Millisecond

// awsConfigured tells, without the AWS SDK (which only the stack driver links), whether any
// source of the SDK's default chain is set up: the environment, or the shared files.
func awsConfigured() bool {
	for _, k := range []string{"AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		if os.Getenv(k) != "" {
			return true
		}
	}
	home, _ := os.UserHomeDir()
	for _, f := range []string{os.Getenv("AWS_SHARED_CREDENTIALS_FILE"), os.Getenv("AWS_CONFIG_FILE"),
		filepath.Join(home, ".aws", "credentials"), filepath.Join(home, ".aws", "config")} {
		if f == "" {
			continue
		}
		if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
			return true
		}
	}
	return false
}
