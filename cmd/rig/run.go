package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/infra/stack"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/runner"
	"github.com/rig-dev/rig/sweep"
	"github.com/rig-dev/rig/target/local"
	sshtarget "github.com/rig-dev/rig/target/ssh"
)

func newRunCmd() *cobra.Command {
	var (
		opts          runner.Options
		stackName     string
		inventoryFile string
		remote        sshtarget.TargetOptions
		localOpts     local.Options
		quiet         bool
	)
	cmd := &cobra.Command{
		Use:   "run PLAYBOOK",
		Short: "Run a playbook (a file, or the name of an embedded one) and write results/<run-id>/ (a matrix or rounds: results/<sweep-id>/ with r01, r02, … and a sweep report)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.LeaseTTL < runner.MinLeaseTTL || opts.LeaseTTL > runner.MaxLeaseTTL {
				return fmt.Errorf("%w: --lease %s: want a duration from %s to %s (e.g. --lease 1m for remote nodes over a slow link)",
					errUsage, opts.LeaseTTL, runner.MinLeaseTTL, runner.MaxLeaseTTL)
			}
			pb, err := playbooks.Open(args[0])
			if err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			plan, err := pb.Plan()
			if err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
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
			switch {
			case stackName != "" && inventoryFile != "":
				return fmt.Errorf("%w: --stack and --inventory: give one", errUsage)
			case stackName != "":
				var err error
				if stackName, err = expandStack(stackName); err != nil {
					return err
				}
				if err := inventory.CheckStackName("--stack", stackName); err != nil {
					return fmt.Errorf("%w: %w", errUsage, err)
				}
				remote.Nodes, remote.Stack = stack.NewTarget(stack.TargetOptions{Stack: stackName}), stackName
				opts.Target = sshtarget.New(remote)
			case inventoryFile != "":
				if _, err := inventory.Load(inventoryFile); err != nil {
					return fmt.Errorf("%w: --inventory: %v", errUsage, err)
				}
				remote.Nodes = inventory.FileTarget{Path: inventoryFile}
				opts.Target = sshtarget.New(remote)
			default:
				opts.Target = local.New(localOpts)
			}
			if !quiet {
				opts.Progress = cmd.ErrOrStderr()
			}
			opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			outs, err := runner.Run(cmd.Context(), plan, opts)
			for _, o := range outs {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", o.Status, o.Dir)
			}
			if len(outs) > 0 && outs[0].SweepDir != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "sweep\t%s\n", filepath.Join(outs[0].SweepDir, sweep.ReportName))
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
	f.StringVar(&localOpts.FirstAddress, "first-address", "127.0.0.11", "local target: loopback address of the first node")
	f.StringVar(&localOpts.DataDir, "local-data", "", "local target: keep each server's engine data (raft log, snapshots) in DIR/NODE/ instead of its node folder, e.g. on a filesystem of its own")
	f.BoolVar(&opts.KeepData, "keep-data", false, "keep engine data (raft log, snapshots) where the run wrote it: the node folder, --local-data DIR/NODE/rig/RUN-ID, or the data volume")
	f.BoolVar(&localOpts.Tune, "tune-local", false, "apply the playbook's kernel tuning on this machine when running on the local target (reverted at the end)")
	f.DurationVar(&opts.LeaseTTL, "lease", runner.DefaultLeaseTTL, "how long each agent keeps the run's lease without a renewal (renewed every quarter of it); "+
		"when it lapses the agent stops its engine and reverts its tuning, and the run fails naming the node (5s to 10m; docs/security.md)")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress lines")
	return cmd
}
