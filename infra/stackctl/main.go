// Command rig-stack is the stack driver behind `rig up`, `rig down`, `rig status` and `rig gc`:
// it holds the Pulumi Automation API so that the rig binary does not have to (see infra/stack).
// rig builds it on first use (go build ./infra/stackctl) and runs it in the repository root;
// it can also be run by hand with the same verbs and flags.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/archive"
	"github.com/rig-dev/rig/archive/s3dest"
	"github.com/rig-dev/rig/infra/automation"
	"github.com/rig-dev/rig/infra/quiesce"
	"github.com/rig-dev/rig/infra/spec"
	"github.com/rig-dev/rig/infra/stack"
	"github.com/rig-dev/rig/inventory"
	sshtarget "github.com/rig-dev/rig/target/ssh"
)

// errUsage marks bad input: exit 2, as rig does.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "rig-stack:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type flags struct {
	stack.DriverFlags
	resultsDir, stack, to string
	noWarnings            bool
	nodes                 stack.NodeFlags
}

// quiesce returns the hook that unmounts the data volumes, or nil without an SSH key.
func quiesceHook(n *stack.NodeFlags, cmd *cobra.Command, f *flags) func(context.Context, *inventory.Inventory) error {
	if len(n.KeyFiles) == 0 {
		return nil
	}
	return func(ctx context.Context, inv *inventory.Inventory) error {
		_, err := quiesce.Nodes(ctx, inv, quiesce.Options{
			KeyFiles: n.KeyFiles, Sudo: n.Sudo, Dir: n.RemoteDir, DataMount: n.DataMount,
			Binary: n.Rig, SourceDir: f.ProjectDir, Out: cmd.OutOrStdout(), Logger: f.options(cmd).Logger,
		})
		return err
	}
}

// upQuiesce is up's hook for an update that detaches data volumes (automation.UpOptions.Quiesce): the
// agents of those nodes unmount them, logged in as the wait for the nodes does (the --ssh-key
// files, else the default keys and ssh-agent).
func upQuiesceHook(n *stack.NodeFlags, cmd *cobra.Command, f *flags, keyFiles []string) func(context.Context, *inventory.Inventory) error {
	return func(ctx context.Context, inv *inventory.Inventory) error {
		log := f.options(cmd).Logger
		tr, err := sshtarget.Login{KeyFiles: keyFiles}.Transport(log)
		if err != nil {
			return fmt.Errorf("--ssh-key: %w", err)
		}
		defer tr.Close()
		_, err = quiesce.Nodes(ctx, inv, quiesce.Options{
			Transport: tr, Sudo: n.Sudo, Dir: n.RemoteDir, DataMount: n.DataMount,
			Binary: n.Rig, SourceDir: f.ProjectDir, Out: cmd.OutOrStdout(), Logger: log,
		})
		return err
	}
}

func (f *flags) options(cmd *cobra.Command) automation.Options {
	level := slog.LevelWarn
	if f.Verbose {
		level = slog.LevelInfo
	}
	return automation.Options{
		BackendURL: f.Backend, SecretsProvider: f.SecretsProvider,
		ProjectDir: f.ProjectDir,
		ResultsDir: f.resultsDir,
		Out:        cmd.OutOrStdout(),
		Logger:     slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level})),
	}
}

// openSaying opens the stack driver and prints its state line (which backend, which stack), as
// every verb that acts on a stack's state does first.
func (f *flags) openSaying(cmd *cobra.Command, stack string) (*automation.Driver, error) {
	d, err := automation.New(f.options(cmd))
	if err != nil {
		return nil, classify(err)
	}
	fmt.Fprintln(cmd.OutOrStdout(), "rig: "+d.Where(stack))
	return d, nil
}

// stackInventory reads the inventory of f.stack (its stack outputs), quietly: inventory prints
// it as JSON and ready waits on it.
func stackInventory(cmd *cobra.Command, f *flags) (*inventory.Inventory, error) {
	d, err := automation.New(f.options(cmd))
	if err != nil {
		return nil, classify(err)
	}
	i, err := d.Inventory(cmd.Context(), f.stack)
	return i, classify(err)
}

// classify turns errors caused by the user's input into usage errors.
func classify(err error) error {
	switch {
	case err == nil, errors.Is(err, errUsage):
		return err
	case errors.Is(err, spec.ErrInvalid), errors.Is(err, spec.ErrStackConfig), errors.Is(err, automation.ErrNoStackConfig),
		errors.Is(err, automation.ErrNoStack), errors.Is(err, archive.ErrBadDest), errors.Is(err, automation.ErrExtend),
		errors.Is(err, inventory.ErrBadName), errors.Is(err, stack.ErrCannotAsk):
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	return err
}

func newRoot() *cobra.Command {
	var f flags
	var yes bool // up and gc: go ahead without asking
	root := &cobra.Command{
		Use:           "rig-stack",
		Short:         "The rig's Pulumi stack driver (Automation API): up, down, status, gc, inventory",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	f.DriverFlags.Register(root.PersistentFlags())

	needStack := func(*cobra.Command, []string) error {
		if f.stack == "" {
			return fmt.Errorf("%w: --stack NAME is required", errUsage)
		}
		if err := inventory.CheckStackName("--stack", f.stack); err != nil {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		return nil
	}

	var rf readyFlags
	up := &cobra.Command{
		Use: "up --stack NAME", Short: "validate, check credentials, pin generated config, pulumi up", Args: cobra.NoArgs,
		PreRunE: needStack,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := automation.New(f.options(cmd))
			if err != nil {
				return classify(err)
			}
			_, _, probs, err := d.LoadSpec(f.stack)
			if err != nil {
				return classify(err)
			}
			for _, p := range probs {
				if p.Severity == spec.SeverityError || !f.noWarnings {
					fmt.Fprintln(cmd.ErrOrStderr(), p)
				}
			}
			if n := len(probs.Errors()); n > 0 {
				return fmt.Errorf("%w: %s: %d problem(s), listed above; nothing was created", errUsage, d.StackConfigPath(f.stack), n)
			}
			inv, err := d.Up(cmd.Context(), f.stack, automation.UpOptions{Confirm: func(s spec.Spec) error {
				return confirmPlan(cmd, s, yes)
			}, Quiesce: upQuiesceHook(&f.nodes, cmd, &f, rf.keyFiles)})
			if err != nil {
				return classify(err)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "stack %s is up (expires %s); results bucket %s\n", f.stack, inv.ExpiresAt, inv.Bucket)
			fmt.Fprintln(w, d.Where(f.stack))
			for _, n := range inv.Nodes {
				fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s@%s\n", n.Name, n.Role, n.InstanceType, n.AvailabilityZone, n.PrivateAddress, n.SSH.User, n.Address)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if err := rf.wait(cmd, &f, f.stack, inv); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "next: rig run PLAYBOOK --stack %s; then rig down --stack %s\n", f.stack, f.stack)
			return nil
		},
	}
	rf.register(up, true)
	f.nodes.RegisterAgent(up.Flags(), true) // to unmount before an update detaches volumes
	up.Flags().StringVar(&f.stack, "stack", "", "stack name (config in Pulumi.NAME.yaml)")
	up.Flags().BoolVar(&f.noWarnings, "no-warnings", false, "do not repeat warning-level problems (rig has shown them)")
	up.Flags().BoolVarP(&yes, "yes", "y", false, "create without asking (needed when standard input is not a terminal)")

	var noArchive bool
	down := &cobra.Command{
		Use: "down --stack NAME", Short: "archive the stack's runs, verify, then destroy", Args: cobra.NoArgs,
		PreRunE: needStack,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := f.openSaying(cmd, f.stack)
			if err != nil {
				return err
			}
			if err := d.Down(cmd.Context(), f.stack, automation.DownOptions{ArchiveTo: f.to, SkipArchive: noArchive,
				Quiesce: quiesceHook(&f.nodes, cmd, &f)}); err != nil {
				return classify(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "stack %s destroyed\n", f.stack)
			return nil
		},
	}
	down.Flags().StringVar(&f.stack, "stack", "", "stack to destroy")
	down.Flags().StringVar(&f.to, "to", "", "archive to s3://bucket/prefix or a folder instead of the stack's bucket")
	down.Flags().BoolVar(&noArchive, "no-archive", false, "destroy without archiving")
	down.Flags().StringVar(&f.resultsDir, "results", "results", "folder holding the run folders")
	f.nodes.Register(down.Flags(), true)

	status := &cobra.Command{
		Use: "status", Short: "list stacks with nodes, bucket and expiry", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := automation.New(f.options(cmd))
			if err != nil {
				return classify(err)
			}
			st, err := d.Statuses(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), d.Where(""))
			if len(st) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no stacks")
				return nil
			}
			return writeStatuses(cmd.OutOrStdout(), st, time.Now())
		},
	}

	var dryRun, orphans, noCloud bool
	var regions []string
	gc := &cobra.Command{
		Use: "gc", Short: "destroy stacks past expires-at after confirmation, archiving their runs first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := f.openSaying(cmd, "")
			if err != nil {
				return err
			}
			expired, err := d.GC(cmd.Context(), automation.GCOptions{DryRun: dryRun,
				Down: automation.DownOptions{ArchiveTo: f.to, Quiesce: quiesceHook(&f.nodes, cmd, &f)},
				Confirm: func(s []automation.Status) bool {
					_ = writeStatuses(cmd.OutOrStdout(), s, time.Now())
					if yes {
						return true
					}
					fmt.Fprintf(cmd.OutOrStdout(), "destroy these %d expired stack(s), archiving their runs first? [y/N] ", len(s))
					line, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
					answer := strings.ToLower(strings.TrimSpace(line))
					return answer == "y" || answer == "yes"
				}})
			switch {
			case err == nil && len(expired) == 0:
				fmt.Fprintln(cmd.OutOrStdout(), "no expired stacks")
			case err == nil && dryRun:
				_ = writeStatuses(cmd.OutOrStdout(), expired, time.Now())
				fmt.Fprintf(cmd.OutOrStdout(), "dry run: %d expired stack(s) would be destroyed\n", len(expired))
			case errors.Is(err, automation.ErrNotConfirmed):
				fmt.Fprintln(cmd.OutOrStdout(), "not confirmed; nothing destroyed")
			case err != nil:
				return classify(err)
			}
			if noCloud {
				return nil
			}
			return cloudGC(cmd, d, cloudOptions{regions: regions, orphans: orphans, delete: yes && !dryRun})
		},
	}
	gc.Flags().BoolVar(&dryRun, "dry-run", false, "list the expired stacks; destroy nothing")
	gc.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask before destroying")
	gc.Flags().StringVar(&f.to, "to", "", "archive runs to s3://bucket/prefix or a folder instead of each stack's bucket")
	gc.Flags().StringVar(&f.resultsDir, "results", "results", "folder holding the run folders")
	f.nodes.Register(gc.Flags(), true)
	gc.Flags().StringSliceVar(&regions, "region", nil, "also scan these regions (the regions of every Pulumi.<stack>.yaml are always scanned)")
	gc.Flags().BoolVar(&orphans, "orphans", false, "also delete resources of stacks this backend does not know that have not expired (another machine's cluster looks like that)")
	gc.Flags().BoolVar(&noCloud, "no-cloud", false, "only the stacks of this backend; do not ask AWS for tagged resources")

	var hours int
	extend := &cobra.Command{
		Use: "extend --stack NAME --hours N", Short: "move the stack's expires-at by N hours and retag its resources", Args: cobra.NoArgs,
		PreRunE: needStack,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := f.openSaying(cmd, f.stack)
			if err != nil {
				return err
			}
			exp, err := d.Extend(cmd.Context(), f.stack, hours)
			if err != nil {
				return classify(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "stack %s now expires at %s (in %s)\n", f.stack, exp.Format(time.RFC3339), time.Until(exp).Round(time.Minute))
			return nil
		},
	}
	extend.Flags().StringVar(&f.stack, "stack", "", "stack name")
	extend.Flags().IntVar(&hours, "hours", 0, "hours to add to expires-at (from now if it has passed)")

	inv := &cobra.Command{
		Use: "inventory --stack NAME", Short: "print the stack's inventory as JSON", Args: cobra.NoArgs,
		PreRunE: needStack,
		RunE: func(cmd *cobra.Command, _ []string) error {
			i, err := stackInventory(cmd, &f)
			if err != nil {
				return err
			}
			return writeJSON(cmd.OutOrStdout(), i)
		},
	}
	inv.Flags().StringVar(&f.stack, "stack", "", "stack name")

	var rw readyFlags
	readyCmd := &cobra.Command{
		Use: "ready --stack NAME", Short: "wait until every node answers ssh with its pinned host key and cloud-init has finished (as up does)", Args: cobra.NoArgs,
		PreRunE: needStack,
		RunE: func(cmd *cobra.Command, _ []string) error {
			i, err := stackInventory(cmd, &f)
			if err != nil {
				return err
			}
			return rw.wait(cmd, &f, f.stack, i)
		},
	}
	readyCmd.Flags().StringVar(&f.stack, "stack", "", "stack name")
	rw.register(readyCmd, true)

	pre := &cobra.Command{
		Use: "preflight --stack NAME", Short: "the checks of up (config, credentials, AWS preflight); creates nothing", Args: cobra.NoArgs,
		PreRunE: needStack,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := f.openSaying(cmd, f.stack)
			if err != nil {
				return err
			}
			err = d.Preflight(cmd.Context(), f.stack)
			switch {
			case errors.Is(err, automation.ErrNoAWSCredentials):
				fmt.Fprintf(cmd.OutOrStdout(), "preflight of %s not run: %v\n", f.stack, err)
				return nil
			case err != nil:
				return classify(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "preflight of %s passed: AWS can make it as planned (nothing was created)\n", f.stack)
			return nil
		},
	}
	pre.Flags().StringVar(&f.stack, "stack", "", "stack name (config in Pulumi.NAME.yaml)")

	root.AddCommand(up, down, status, gc, extend, inv, readyCmd, pre, newArchiveCmd(), newFetchCmd())
	return root
}

func writeStatuses(out io.Writer, st []automation.Status, now time.Time) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "STACK\tNODES\tRESOURCES\tEXPIRES\tBUCKET\tNOTE")
	for _, s := range st {
		exp := "unknown"
		switch {
		case s.ExpiresAt.IsZero():
		case s.Expired:
			exp = fmt.Sprintf("%s (expired %s ago)", s.ExpiresAt.Format(time.RFC3339), now.Sub(s.ExpiresAt).Round(time.Minute))
		default:
			exp = fmt.Sprintf("%s (in %s)", s.ExpiresAt.Format(time.RFC3339), s.ExpiresAt.Sub(now).Round(time.Minute))
		}
		note := s.InventoryNote
		if s.Updating {
			note = strings.TrimSpace(note + " update in progress")
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%s\n", s.Name, s.Nodes, s.Resources, exp, s.Bucket, note)
	}
	return w.Flush()
}

func writeJSON(out io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return err
}

// newArchiveCmd is `rig archive` for S3 destinations: rig hands them here, where the AWS SDK is
// linked (see archive/s3dest).
func newArchiveCmd() *cobra.Command {
	var to, region string
	c := &cobra.Command{
		Use: "archive RUN_DIR... --to s3://bucket/prefix|DIR", Short: "archive run folders (tar.zst + sha256 manifest), verified",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, runs []string) error {
			loc, err := archive.ParseLocation(to)
			if err != nil {
				return fmt.Errorf("%w: --to: %w", errUsage, err)
			}
			dest, err := s3dest.Open(cmd.Context(), loc, region)
			if err != nil {
				return classify(err)
			}
			return archive.ArchiveAll(cmd.Context(), dest, runs, cmd.OutOrStdout())
		},
	}
	c.Flags().StringVar(&to, "to", "", "s3://bucket/prefix or a local folder")
	c.Flags().StringVar(&region, "region", "", "AWS region of the bucket (default: the SDK's configured region)")
	return c
}

// newFetchCmd is `rig history import s3://…`'s download: every archive under the prefix verified
// against its manifest and unpacked into --out, each one that does not match named and skipped.
func newFetchCmd() *cobra.Command {
	var from, out, region string
	c := &cobra.Command{
		Use: "fetch --from s3://bucket/prefix|DIR --out DIR", Short: "verify and unpack every archive of a destination",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			loc, err := archive.ParseLocation(from)
			if err != nil {
				return fmt.Errorf("%w: --from: %w", errUsage, err)
			}
			if out == "" {
				return fmt.Errorf("%w: --out is required", errUsage)
			}
			dest, err := s3dest.Open(cmd.Context(), loc, region)
			if err != nil {
				return classify(err)
			}
			ids, err := archive.FetchAll(cmd.Context(), dest, out, cmd.ErrOrStderr())
			fmt.Fprintf(cmd.OutOrStdout(), "%d run(s) fetched from %s\n", len(ids), dest)
			return err
		},
	}
	c.Flags().StringVar(&from, "from", "", "s3://bucket/prefix or a local folder")
	c.Flags().StringVar(&out, "out", "", "the folder the runs are unpacked into (out/<run-id>/)")
	c.Flags().StringVar(&region, "region", "", "AWS region of the bucket (default: the SDK's configured region)")
	return c
}

// confirmPlan prints the plan and its hourly cost, once preflight has passed, and asks whether
// to create it: --yes goes ahead, a terminal is asked, anything else is refused.
func confirmPlan(cmd *cobra.Command, s spec.Spec, yes bool) error {
	out := cmd.OutOrStdout()
	if err := spec.WritePlan(out, s); err != nil {
		return err
	}
	question := fmt.Sprintf("create stack %s?", s.Stack)
	if est, err := spec.EstimateCost(s); err != nil {
		fmt.Fprintf(out, "hourly cost estimate: not available: %v\n", err)
	} else {
		if err := spec.WriteEstimate(out, est); err != nil {
			return err
		}
		question = fmt.Sprintf("create stack %s at about $%.2f/h ($%.2f until expires-at)?", s.Stack, est.Hourly, est.ToLimit)
	}
	if yes {
		fmt.Fprintln(out, "rig: --yes: creating without asking")
		return nil
	}
	return stack.Confirm(cmd.InOrStdin(), out, question)
}
