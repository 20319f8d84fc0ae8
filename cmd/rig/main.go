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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/engine/command"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/engine/driver/reference"
	"github.com/rig-dev/rig/recording"
)

// offeredDrivers are the engine drivers rig offers, handed to every verb that reads a playbook.
func offeredDrivers() *driver.Registry {
	return driver.NewRegistry(reference.Driver{}, command.Driver{})
}

// offeredRecordings are the recording formats rig reads, handed to the agent that reads them.
func offeredRecordings() *recording.Registry {
	return recording.NewRegistry(recording.JFR{}, recording.GoTrace{})
}

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
	drivers := offeredDrivers()
	root.AddCommand(
		// Controller verbs.
		newRunCmd(drivers), newValidateCmd(drivers), newCheckCmd(drivers), newReportCmd(), newCompareCmd(), newHistoryCmd(), newBenchCmd(drivers),
		upCmd(), downCmd(), statusCmd(), gcCmd(), extendCmd(), envCmd(), archiveCmd(), newSSHCmd(), newSSHConfigCmd(), newTuneCmd(), newDiskCheckCmd(),
		newNewCmd(drivers),
		// Node roles.
		newAgentCmd(offeredRecordings()), newEngineCmd(drivers), newLoadgenCmd(),
	)
	return root
}

// errUsage marks bad input: rig exits 2 for it, 1 for failures of the work itself.
var errUsage = errors.New("usage")

// exitOnInterrupt marks a verb that changes nothing (validate, compare): on SIGINT or SIGTERM
// it exits within interruptGrace whatever step it is in. Its steps need no cleanup, and one that
// does not watch ctx (planning and checking 990 runs of a long timeline takes seconds) would
// otherwise run to its end with the signal swallowed by NotifyContext. The grace lets a step
// that watches ctx end by itself first: the stack preflight kills its driver after
// preflightStopWait and says it was interrupted.
const exitOnInterrupt = "rig/exit-on-interrupt"

const interruptGrace = 600 * time.Millisecond

// exitWhenInterrupted exits the process interruptGrace after the first SIGINT or SIGTERM if the
// verb running then is marked exitOnInterrupt; running says which verb runs.
func exitWhenInterrupted(running *atomic.Pointer[cobra.Command]) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM) // beside NotifyContext's: both are told
	go func() {
		s := <-sig
		signal.Stop(sig)
		c := running.Load()
		if c == nil || c.Annotations[exitOnInterrupt] == "" {
			return // the verb stops on ctx, cleaning up as it must
		}
		time.Sleep(interruptGrace)
		fmt.Fprintf(os.Stderr, "rig: %s interrupted (%v); it changes nothing, so it stopped where it was\n", c.Name(), s)
		os.Exit(1)
	}()
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd()
	var running atomic.Pointer[cobra.Command]
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) { running.Store(cmd) }
	exitWhenInterrupted(&running)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "rig:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
