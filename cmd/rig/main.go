// Command rig is the one binary of the test rig: controller verbs, and the roles each node runs
// (`rig agent`, `rig engine`, `rig loadgen`). Each verb lives in its own file, where newXCmd
// builds it with its flags (held in the constructor's variables, never the package's) and
// subcommands; newRootCmd lists them. Every call builds a fresh tree, so tests run commands one
// after another without flags left over from the last.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	// The engine drivers rig offers (engine/driver): the command driver registers itself from
	// engine/command, which the agent imports.
	_ "github.com/rig-dev/rig/engine/driver/reference"
)

// newRootCmd is `rig` with every verb.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "rig",
		Short:         "Infrastructure-as-code test rig for replicated matching engines",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// A bad flag is bad input like any other: exit 2, as for every usage error.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return fmt.Errorf("%w: %v", errUsage, err) })
	root.AddCommand(
		// Controller verbs.
		newRunCmd(), newValidateCmd(), newCheckCmd(), newReportCmd(), newCompareCmd(), newHistoryCmd(), newBenchCmd(),
		upCmd(), downCmd(), statusCmd(), gcCmd(), extendCmd(), envCmd(), archiveCmd(), newSSHCmd(), newSSHConfigCmd(), newTuneCmd(), newDiskCheckCmd(),
		// Node roles.
		newAgentCmd(), newEngineCmd(), newLoadgenCmd(),
	)
	return root
}

// errUsage marks bad input: rig exits 2 for it, 1 for failures of the work itself.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "rig:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
