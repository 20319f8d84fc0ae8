package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/archive"
	"github.com/rig-dev/rig/infra/spec"
	"github.com/rig-dev/rig/infra/stack"
)

// The cloud verbs. up, down, status and gc run the stack driver, rig-stack (infra/stackctl),
// which holds the Pulumi Automation API; rig itself links only the light infra/spec and
// infra/stack packages. Everything that can be checked without Pulumi is checked here first.

type infraFlags struct {
	stack.DriverFlags
	resultsDir string
}

func (f *infraFlags) register(c *cobra.Command) { f.DriverFlags.Register(c.Flags()) }

// runDriver checks for the pulumi CLI and the project, then runs rig-stack with args.
func (f *infraFlags) runDriver(cmd *cobra.Command, args ...string) error {
	if _, err := stack.FindPulumi(); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(f.ProjectDir, "Pulumi.yaml")); err != nil {
		return fmt.Errorf("%w: no Pulumi.yaml in %s: run rig from the repository root or pass --project-dir", errUsage, f.ProjectDir)
	}
	if f.resultsDir != "" {
		abs, err := filepath.Abs(f.resultsDir) // rig-stack runs in the project folder
		if err != nil {
			return err
		}
		args = append(args, "--results", abs)
	}
	args = append(args, f.DriverFlags.Args()...)
	err := stack.RunDriver(cmd.Context(), stack.DriverOptions{
		ProjectDir: f.ProjectDir,
		Stdin:      cmd.InOrStdin(), Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(),
	}, args...)
	var ee *stack.ExitError
	if errors.As(err, &ee) && ee.Code == 2 {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	return err
}

func upCmd() *cobra.Command {
	var f infraFlags
	var name string
	var dryRun, yes bool
	var keys []string
	var nf stack.NodeFlags
	var readyTimeout time.Duration
	c := &cobra.Command{
		Use:   "up --stack NAME [--yes]",
		Short: "Create or update a test cluster on AWS from Pulumi.NAME.yaml (Pulumi Automation API)",
		Long: `Check that the pulumi CLI is installed and that Pulumi.NAME.yaml is valid (every problem at
once, with file:line:column), then let the stack driver check the AWS credentials of the stack's
aws:profile and ask AWS whether the stack can be made (vCPU quota, instance types offered in the
zone, the AMI, EC2 dry runs of the calls it makes: every problem at once, each with its fix).
Then the plan and its hourly cost are printed and rig asks before creating it: --yes goes ahead
without asking, and without --yes rig up refuses (exit 2) when standard input is not a
terminal. Only then are the stack's generated settings pinned (SSH host key seed; a new
generation and created-at when the stack has none) and pulumi up run on this repository's
Pulumi project, streaming its progress. Nothing is created when a check fails or the answer is
no. On a standing stack, an update that would replace or remove data volume attachments
(rig:dataVolumes reordered, the volume* keys moved into rig:dataVolumes, a replaced instance)
first has those nodes' agents stop the engine and unmount the volumes (--sudo, --remote-dir,
--data-mount as given to rig run) and detaches them; if a node cannot, nothing changes.
When pulumi up has finished, rig waits (up to --ready-timeout) until every node answers
SSH with its pinned host key and cloud-init has finished (/var/lib/cloud/instance/boot-finished),
a line per node as its state changes, so that rig run can start at once; a node presenting
another host key, or refusing the --ssh-key, ends the wait at once. --dry-run prints the plan
and its hourly cost instead. Unless --backend or PULUMI_BACKEND_URL names one, stacks live in a
local file backend (a pulumi login is never used on its own). The first run builds the driver
(go build ./infra/stackctl).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needStack(&name); err != nil {
				return err
			}
			path := filepath.Join(f.ProjectDir, "Pulumi."+name+".yaml")
			if dryRun {
				if _, err := os.Stat(path); err != nil {
					return fmt.Errorf("%w: --dry-run reads %s: %w", errUsage, path, err)
				}
				sc, err := spec.ReadStackConfig(path)
				if err != nil {
					return fmt.Errorf("%w: %w; nothing was created", errUsage, err)
				}
				if err := validateStackConfig(cmd, sc); err != nil {
					return fmt.Errorf("%s: %w; nothing was created", path, err)
				}
				fmt.Fprintln(cmd.OutOrStdout(), "dry run: nothing was created")
				return nil
			}
			// A script that did not say --yes is refused before anything runs: up costs money.
			if readyTimeout < 0 {
				return fmt.Errorf("%w: --ready-timeout %s: want a positive duration, or 0 not to wait; nothing was created", errUsage, readyTimeout)
			}
			if !yes && !stack.CanAsk(cmd.InOrStdin()) {
				return fmt.Errorf("%w: rig up asks before it creates stack %s, but %w", errUsage, name, stack.ErrCannotAsk)
			}
			// The CLI comes first, so that a first try without pulumi says what to install.
			if _, err := stack.FindPulumi(); err != nil {
				return err
			}
			if _, err := os.Stat(path); err != nil {
				return fmt.Errorf("%w: %s does not exist: create it with aws:region, rig:owner, rig:operatorCidrs "+
					"and rig:publicKey (Pulumi.yaml lists every key); nothing was created", errUsage, path)
			}
			sc, err := spec.ReadStackConfig(path)
			if err != nil {
				return fmt.Errorf("%w: %w", errUsage, err)
			}
			_, probs := sc.Spec()
			for _, p := range probs {
				fmt.Fprintln(cmd.ErrOrStderr(), p)
			}
			if n := len(probs.Errors()); n > 0 {
				return fmt.Errorf("%w: %s: %d problem(s), listed above; nothing was created", errUsage, path, n)
			}
			args := []string{"up", "--stack", name, "--no-warnings", "--ready-timeout", readyTimeout.String()}
			if yes {
				args = append(args, "--yes")
			}
			for _, k := range keys {
				if abs, err := filepath.Abs(k); err == nil {
					k = abs // rig-stack runs in the project folder
				}
				args = append(args, "--ssh-key", k)
			}
			return f.runDriver(cmd, append(args, nf.AgentArgs()...)...)
		},
	}
	c.Flags().StringVar(&name, "stack", "", stackFlagUsage)
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and hourly cost of Pulumi.NAME.yaml; create nothing")
	c.Flags().BoolVarP(&yes, "yes", "y", false, "create the plan without asking (required when standard input is not a terminal)")
	sshKeyFlag(c.Flags(), &keys, "SSH private key file(s) to wait for the nodes with (default: ~/.ssh/id_ed25519, id_ecdsa, id_rsa that exist, and ssh-agent)")
	c.Flags().DurationVar(&readyTimeout, "ready-timeout", 10*time.Minute, "after pulumi up, wait at most this long for every node to answer ssh with its pinned host key and finish cloud-init (0: do not wait)")
	nf.RegisterAgent(c.Flags(), false) // an update that detaches data volumes has the agents unmount them first
	f.register(c)
	return c
}

func downCmd() *cobra.Command {
	var f infraFlags
	var nf stack.NodeFlags
	var name, to string
	var noArchive bool
	c := &cobra.Command{
		Use:   "down --stack NAME",
		Short: "Archive every run of a stack, verify the archives, unmount the data volumes, then destroy the stack",
		Long: `Archive every results/<run-id>/ whose manifest.json names the stack (tar.zst + sha256
manifest, read back and verified) to the stack's results bucket, s3://<bucket>/NAME/, or to --to.
If any archive fails, nothing is destroyed. Then, with --ssh-key (and --sudo, --remote-dir,
--data-mount as given to rig run), each node's agent stops its engine, syncs and unmounts the data
volume; then the stack is destroyed. The volume attachments go with their instances (DeletedWith),
so the destroy never waits on a detach. The results bucket is kept (rig:retainBucket, default true).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needStack(&name); err != nil {
				return err
			}
			args := []string{"down", "--stack", name}
			if to != "" {
				loc, err := archive.ParseLocation(to)
				if err != nil {
					return fmt.Errorf("%w: --to: %w", errUsage, err)
				}
				if loc.Dir != "" { // rig-stack runs in the project folder
					abs, err := filepath.Abs(loc.Dir)
					if err != nil {
						return err
					}
					to = abs
				}
				args = append(args, "--to", to)
			}
			if noArchive {
				args = append(args, "--no-archive")
			}
			return f.runDriver(cmd, append(args, nf.Args()...)...)
		},
	}
	c.Flags().StringVar(&name, "stack", "", "stack to destroy: "+stackFlagUsage)
	c.Flags().StringVar(&to, "to", "", "archive to s3://bucket/prefix or a folder instead of the stack's bucket")
	c.Flags().BoolVar(&noArchive, "no-archive", false, "destroy without archiving (runs stay in the results folder)")
	c.Flags().StringVar(&f.resultsDir, "results", "results", "folder holding the run folders")
	f.register(c)
	nf.Register(c.Flags(), false)
	return c
}

func statusCmd() *cobra.Command {
	var f infraFlags
	c := &cobra.Command{
		Use:   "status",
		Short: "List the rig's stacks with their nodes, bucket and expiry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.runDriver(cmd, "status")
		},
	}
	f.register(c)
	return c
}

func gcCmd() *cobra.Command {
	var f infraFlags
	var nf stack.NodeFlags
	var dryRun, yes, orphans, noCloud bool
	var to string
	var regions []string
	c := &cobra.Command{
		Use:   "gc",
		Short: "Destroy expired stacks (after confirmation, archiving first), then find the rig's resources from the cloud side",
		Long: `First the stacks of this backend past their expires-at are destroyed after confirmation, their
runs archived first (as rig down). Then AWS is asked, through the Resource Groups Tagging API and
EC2, in every region of the project's Pulumi.<stack>.yaml files (and --region), for every resource
tagged rig-stack: those past expires-at that no stack of this backend owns (lost state, another
checkout or laptop) are listed with their cost per hour and, with --yes, deleted in dependency
order (instances, volumes, key pairs, placement groups, security groups, route tables, subnets,
internet gateways, VPCs). An older generation of a known stack (tag rig-generation: a cluster of
the same name that its state no longer holds) is deleted once expired; the current generation
never. Resources of unknown stacks that have not expired are listed and kept unless --orphans;
another owner's are never touched. ARNs the tagging API lists for resources EC2 no longer has
are reported as already gone. The last line tallies what was deleted, already gone and failed,
and gc exits non-zero if anything it deleted still bills. Retained results buckets are listed
with their size and never deleted (their objects expire by the rig:resultsExpireDays lifecycle
rule).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			args := []string{"gc"}
			if dryRun {
				args = append(args, "--dry-run")
			}
			if yes {
				args = append(args, "--yes")
			}
			if to != "" {
				args = append(args, "--to", to)
			}
			for _, r := range regions {
				args = append(args, "--region", r)
			}
			if orphans {
				args = append(args, "--orphans")
			}
			if noCloud {
				args = append(args, "--no-cloud")
			}
			return f.runDriver(cmd, append(args, nf.Args()...)...)
		},
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "list the expired stacks and resources; destroy nothing")
	c.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask before destroying; delete what the cloud-side scan marks (a dry run without it)")
	c.Flags().StringSliceVar(&regions, "region", nil, "also scan these AWS regions")
	c.Flags().BoolVar(&orphans, "orphans", false, "also delete resources of stacks unknown to this backend that have not expired yet")
	c.Flags().BoolVar(&noCloud, "no-cloud", false, "only this backend's stacks; do not ask AWS for tagged resources")
	c.Flags().StringVar(&to, "to", "", "archive runs to s3://bucket/prefix or a folder instead of each stack's bucket")
	c.Flags().StringVar(&f.resultsDir, "results", "results", "folder holding the run folders")
	f.register(c)
	nf.Register(c.Flags(), false)
	return c
}

func extendCmd() *cobra.Command {
	var f infraFlags
	var name string
	var hours int
	c := &cobra.Command{
		Use:   "extend --stack NAME --hours N",
		Short: "Move a stack's expires-at N hours later (from now if it has passed) and retag its resources",
		Long: `Raise rig:expiresInHours in Pulumi.NAME.yaml so that expires-at moves by N hours (from now when it
has already passed) and run pulumi up, which rewrites the expires-at tag on every resource (tags
only; nothing is replaced), since rig gc reads the tags from the cloud side. The lifetime is at
most 720 hours after creation.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needStack(&name); err != nil {
				return err
			}
			if hours < 1 {
				return fmt.Errorf("%w: --hours N is required (N >= 1)", errUsage)
			}
			return f.runDriver(cmd, "extend", "--stack", name, "--hours", strconv.Itoa(hours))
		},
	}
	c.Flags().StringVar(&name, "stack", "", "stack to extend: "+stackFlagUsage)
	c.Flags().IntVar(&hours, "hours", 0, "hours to add")
	f.register(c)
	return c
}

func archiveCmd() *cobra.Command {
	var to, region, projectDir string
	c := &cobra.Command{
		Use:   "archive RUN_DIR... --to s3://bucket/prefix|DIR",
		Short: "Pack run folders as tar.zst with a sha256 manifest, store them and verify what landed",
		Long: `Pack each results/<run-id>/ into <run-id>.tar.zst plus <run-id>.manifest.json (sha256 of the
archive and of every file), upload to S3 with the transfer manager (multipart above 16 MiB) or write
to a folder, then read both back and check every digest. Sockets, FIFOs, dead mounts and other
filesystems mounted in the folder are skipped, each named. Credentials and region come from the AWS
SDK's default chain (AWS_PROFILE, AWS_REGION, ...) or --region.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("%w: archive takes one or more run folders, e.g. results/20250601-120000-follower-restart", errUsage)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if to == "" {
				return fmt.Errorf("%w: --to is required: s3://bucket/prefix or a folder", errUsage)
			}
			loc, err := archive.ParseLocation(to)
			if err != nil {
				return fmt.Errorf("%w: --to: %w", errUsage, err)
			}
			for _, run := range args {
				st, err := os.Stat(run)
				if err != nil || !st.IsDir() {
					return fmt.Errorf("%w: %s is not a run folder", errUsage, run)
				}
				if _, err := archive.RunIDOf(run); err != nil {
					return fmt.Errorf("%w: %s: %v", errUsage, run, err)
				}
			}
			if loc.Bucket != "" {
				// S3 uploads run in the stack driver, which links the AWS SDK (see s3dest).
				dargs := append([]string{"archive", "--to", to}, args...)
				if region != "" {
					dargs = append(dargs, "--region", region)
				}
				for i, run := range args {
					if abs, err := filepath.Abs(run); err == nil {
						dargs[3+i] = abs // the driver runs in the project folder
					}
				}
				err := stack.RunDriver(cmd.Context(), stack.DriverOptions{
					ProjectDir: projectDir, Stdin: cmd.InOrStdin(), Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(),
				}, dargs...)
				var ee *stack.ExitError
				if errors.As(err, &ee) && ee.Code == 2 {
					return fmt.Errorf("%w: %w", errUsage, err)
				}
				return err
			}
			dest, err := archive.Open(cmd.Context(), loc, region)
			if err != nil {
				return fmt.Errorf("%w: %w", errUsage, err)
			}
			return archive.ArchiveAll(cmd.Context(), dest, args, cmd.OutOrStdout())
		},
	}
	c.Flags().StringVar(&to, "to", "", "s3://bucket/prefix or a local folder")
	c.Flags().StringVar(&region, "region", "", "AWS region of the bucket (default: the SDK's configured region)")
	c.Flags().StringVar(&projectDir, "project-dir", ".", "the repository root, where the stack driver is built from (S3 only)")
	return c
}

// validateStackConfig checks a Pulumi.<stack>.yaml without the pulumi CLI: every problem goes to
// stderr with file:line:column; a valid file prints the plan and its hourly cost on stdout.
func validateStackConfig(cmd *cobra.Command, sc *spec.StackConfig) error {
	s, probs := sc.Spec()
	for _, p := range probs {
		fmt.Fprintln(cmd.ErrOrStderr(), p)
	}
	if n := len(probs.Errors()); n > 0 {
		return fmt.Errorf("%w: %d problem(s), listed above", errUsage, n)
	}
	out := cmd.OutOrStdout()
	if err := spec.WritePlan(out, s); err != nil {
		return err
	}
	if sc.Secrets["hostKeySeed"] {
		fmt.Fprintln(out, "  host keys: derived from the stack's secret seed")
	} else {
		fmt.Fprintln(out, "  host keys: rig up generates the seed (a stack secret) and pins each node's key")
	}
	est, err := spec.EstimateCost(s)
	if err != nil {
		fmt.Fprintf(out, "hourly cost estimate: not available: %v\n", err)
		return nil
	}
	return spec.WriteEstimate(out, est)
}
