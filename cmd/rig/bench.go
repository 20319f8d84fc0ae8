package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/engine/bench"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/internal/units"
)

// newBenchCmd groups micro-benchmarks of rig's parts, one subcommand each.
func newBenchCmd(drivers *driver.Registry) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark parts of the rig on this machine",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("%w: unknown benchmark %q; want one of: %s", errUsage, args[0], benchNames(cmd))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fmt.Errorf("%w: bench needs a benchmark: %s", errUsage, benchNames(cmd))
		},
	}
	cmd.AddCommand(newBenchEngineCmd(), newBenchLoadgenCmd(), newBenchDiskCmd(), newBenchRecordingCmd(), newBenchGatewayCmd(drivers))
	return cmd
}

func benchNames(cmd *cobra.Command) string {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return strings.Join(names, ", ")
}

// newBenchEngineCmd is `rig bench engine`.
func newBenchEngineCmd() *cobra.Command {
	var (
		orders, threads, block string
		o                      bench.Options
		asJSON, quiet          bool
	)
	engine := &cobra.Command{
		Use:   "engine",
		Short: "Snapshot take/restore cost, heap and wire bytes per order of the reference engine alone",
		Long: `Builds books of each size, then times snapshot takes against a drain-only sink (median of
--takes takes per point, thread settings interleaved, every parallel output checked byte for byte
against the linear one first) and restore in its own pass; measures heap per order after GC and
wire bytes per order. Prints the load average: times taken at a load above the CPU count are
upper bounds.`,
		Example: "  rig bench engine --orders 100k,1m,5m --threads 1,2 --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Orders, err = bench.ParseCounts(orders, 1_000_000_000); err != nil {
				return fmt.Errorf("%w: --orders: %v", errUsage, err)
			}
			if o.Threads, err = bench.ParseCounts(threads, 256); err != nil {
				return fmt.Errorf("%w: --threads: %v", errUsage, err)
			}
			bs, err := units.ParseSize(block)
			if err != nil || bs < 1 || bs > 1<<30 {
				if err == nil {
					err = fmt.Errorf("%q is out of range; want 1B..1GiB, e.g. 1MiB or 16MiB", block)
				}
				return fmt.Errorf("%w: --block-size: %v", errUsage, err)
			}
			o.BlockSize = int(bs)
			if o.Takes < bench.MinTakes {
				return fmt.Errorf("%w: --takes %d: want at least %d", errUsage, o.Takes, bench.MinTakes)
			}
			if o.ParallelMinOrders < 0 {
				return fmt.Errorf("%w: --parallel-min %d: want 0 (default) or more", errUsage, o.ParallelMinOrders)
			}
			for _, c := range []struct {
				flag string
				v    int
			}{{"restores", o.Restores}, {"instruments", o.Instruments}, {"levels", o.Levels}} {
				if c.v < 1 {
					return fmt.Errorf("%w: --%s %d: want at least 1", errUsage, c.flag, c.v)
				}
			}
			if !quiet {
				o.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
			}
			rep, err := bench.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			if asJSON {
				return rep.WriteJSON(cmd.OutOrStdout())
			}
			return rep.WriteTable(cmd.OutOrStdout())
		},
	}
	f := engine.Flags()
	f.StringVar(&orders, "orders", "100k,1m,5m", "book sizes, comma-separated (k, m suffixes)")
	f.StringVar(&threads, "threads", "1,2", "encode threads per take, comma-separated (1 = linear)")
	f.StringVar(&block, "block-size", "1MiB", "snapshot block size")
	f.IntVar(&o.Takes, "takes", bench.MinTakes, "takes per (orders, threads) point")
	f.IntVar(&o.Restores, "restores", 3, "timed restores per book size")
	f.IntVar(&o.Instruments, "instruments", 8, "instruments in the generated book")
	f.IntVar(&o.Levels, "levels", 1000, "price levels per side per instrument")
	f.Uint64Var(&o.Seed, "seed", 1, "book generator seed")
	f.IntVar(&o.ParallelMinOrders, "parallel-min", 0, "smallest book encoded in parallel (0: the engine default; 1: always, to find the crossover)")
	f.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	f.BoolVar(&quiet, "quiet", false, "no progress on stderr")
	return engine
}

// countFlag parses a bench command's count flag (200k, 2M), 1..hi; a bad one is a usage error
// naming the flag and the range.
func countFlag(flag, s string, hi int64) (int64, error) {
	n, err := units.ParseCount(s)
	if err == nil && (n < 1 || n > hi) {
		err = fmt.Errorf("%q is out of range; want 1..%s", s, units.FormatCount(hi))
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %v", errUsage, flag, err)
	}
	return n, nil
}
