// Command rig is the one binary of the test rig: controller verbs, and the roles each node runs
// (`rig agent`, `rig engine`, `rig loadgen`). Each verb lives in its own file: newXCmd builds it
// with its flags and subcommands, and the file's init adds it to rootCmd, so verbs can be added
// without touching this file.
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

var rootCmd = &cobra.Command{
	Use:           "rig",
	Short:         "Infrastructure-as-code test rig for replicated matching engines",
	SilenceUsage:  true,
	SilenceErrors: true,
}

// errUsage marks bad input: rig exits 2 for it, 1 for failures of the work itself.
var errUsage = errors.New("usage")

func init() {
	// A bad flag is bad input like any other: exit 2, as for every usage error.
	rootCmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return fmt.Errorf("%w: %v", errUsage, err) })
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := rootCmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "rig:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
