package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/conformance"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/playbooks"
)

// checkLogFile is the conformance suite's log in the check's folder.
const checkLogFile = "check.log"

// newCheckCmd is `rig check`, a controller verb. `rig engine check` is kept as a deprecated
// alias (the same command, built again under `rig engine`).
func newCheckCmd(drivers *driver.Registry) *cobra.Command {
	var (
		pbPath, firstAddr, resultsDir string
		orders                        int64
		timeout                       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "check --playbook FILE",
		Short: "Check the engine a playbook names against the engine contract (conformance suite, local target)",
		Long: `Starts the playbook's cluster on this machine through its engine driver and runs the
conformance suite: /status fields and types, phases in order after launch and after kill -9 +
relaunch, one snapshot index on every node, step-down moving the leader, equal state hashes
after load, and every asked setting carried and in effect. Prints a pass/fail table with what
each check saw; exits 1 if any check failed. The playbook's load and timeline are not used.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if pbPath == "" {
				return fmt.Errorf("%w: --playbook: required (the playbook naming the engine)", errUsage)
			}
			pb, err := playbooks.Open(pbPath, drivers)
			if err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			dir := filepath.Join(resultsDir, time.Now().UTC().Format("20060102-150405")+"-check-"+pb.Name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("create %s: %w", dir, err)
			}
			logf, err := os.Create(filepath.Join(dir, checkLogFile))
			if err != nil {
				return err
			}
			defer logf.Close()
			rs, err := conformance.Run(cmd.Context(), conformance.Options{
				Playbook: pb, Dir: dir, FirstAddress: firstAddr, Orders: orders, Timeout: timeout,
				Logger: slog.New(slog.NewJSONHandler(logf, nil)),
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "check of %s (%s driver) in %s\n\n", pbPath, pb.Engine.DriverName(), dir)
			conformance.WriteTable(out, rs)
			if failed := conformance.Failed(rs); len(failed) > 0 {
				return fmt.Errorf("check: %d of %d checks failed: %s", len(failed), len(rs), strings.Join(failed, ", "))
			}
			for _, r := range rs {
				if !r.Pass {
					return fmt.Errorf("check: %s was not run", r.Check)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&pbPath, "playbook", "", "playbook naming the engine (engine.driver, engine.command, settings)")
	cmd.Flags().StringVar(&firstAddr, "first-address", "127.0.0.11", "loopback address of the first node")
	cmd.Flags().StringVar(&resultsDir, "results", "results", "folder for the check's folder (node folders, engine logs)")
	cmd.Flags().Int64Var(&orders, "orders", 10_000, "orders preloaded before state hashes are compared")
	cmd.Flags().DurationVar(&timeout, "timeout", 60*time.Second, "how long each wait (ready, leader, snapshot) may take")
	return cmd
}
