package main

import (
	"fmt"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/engine/driver/reference"
	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/recording/cost"
)

// newBenchRecordingCmd is `rig bench recording`.
func newBenchRecordingCmd() *cobra.Command {
	var (
		orders, rate, window string
		o                    cost.Options
		eng                  cost.ReferenceEngine
		asJSON, quiet        bool
	)
	cmd := &cobra.Command{
		Use:   "recording",
		Short: "What the engine's own recording (the Go flight recorder) costs probe p50 and preload throughput",
		Long: `Starts the reference engine (this binary's ` + "`rig engine`" + `) on loopback, preloads it with the
load generator, then runs a probe stream, once with its flight recorder on (engine.flight_recorder:
true) and once off per round, alternating which goes first, a fresh engine each time; the
recording is fetched after each recorded phase as a run does after a window. Reports each mode's
median preload throughput and probe p50 and the difference; the goal (recording/cost.Goals) is at most
2 % on p50 and 5 % on preload, the condition for recording by default. With --window-every and
--window-for the recorder runs only around windows of the probe stream, as engine.recording:
windows runs it around a timeline's actions, and the report adds the share of the stream it ran
in and the p50 of the probes due while it ran against those due while it did not, in the same
phases. Prints the load average before and after: run it alone (e.g. under flock
/tmp/rig-measure.lock) and quote it.`,
		Example: "  flock /tmp/rig-measure.lock rig bench recording --rounds 6 --json\n  rig bench recording --sync-level 0 --probe-for 30s --window-every 10s --window-for 2s",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := countFlag("--orders", orders, 100_000_000)
			if err != nil {
				return err
			}
			o.Orders = int(n)
			if o.ProbeRate, err = units.ParseRate(rate); err != nil || !(o.ProbeRate > 0) {
				if err == nil {
					err = fmt.Errorf("%q: want more than 0/s", rate)
				}
				return fmt.Errorf("%w: --probe-rate: %v", errUsage, err)
			}
			if o.Rounds < 1 || o.Rounds > 100 {
				return fmt.Errorf("%w: --rounds %d: want 1..100", errUsage, o.Rounds)
			}
			if o.ProbeFor < 100*time.Millisecond || o.ProbeFor > 10*time.Minute {
				return fmt.Errorf("%w: --probe-for %s: want 100ms..10m", errUsage, o.ProbeFor)
			}
			if eng.Servers < 1 || eng.Servers > 9 {
				return fmt.Errorf("%w: --servers %d: want 1..9", errUsage, eng.Servers)
			}
			if eng.SyncLevel < 0 || eng.SyncLevel > 2 {
				return fmt.Errorf("%w: --sync-level %d: want 0, 1 or 2", errUsage, eng.SyncLevel)
			}
			if (o.Windows.Every > 0) != (o.Windows.For > 0) || o.Windows.Every < 0 || o.Windows.For < 0 {
				return fmt.Errorf("%w: --window-every %s --window-for %s: give both above 0, or neither", errUsage, o.Windows.Every, o.Windows.For)
			}
			if o.Windows.Every > 0 && o.Windows.For+2*time.Second > o.Windows.Every {
				return fmt.Errorf("%w: --window-every %s --window-for %s: want every at least for + 2s (a second of lead and of tail), or the windows are one recording", errUsage, o.Windows.Every, o.Windows.For)
			}
			eng.Windows = o.Windows.Every > 0
			if window != "" {
				s, _ := reference.Table.Lookup(reference.FlightRecorderWindow)
				if eng.Window, err = s.Canon(window); err != nil {
					return fmt.Errorf("%w: --window: %v", errUsage, err)
				}
			}
			if eng.Binary, err = os.Executable(); err != nil {
				return fmt.Errorf("find the rig binary to start engines from: %w", err)
			}
			dir, err := os.MkdirTemp("", "rig-bench-recording-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			o.Engine, o.Dir = eng, dir
			if !quiet {
				o.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
			}
			rep, err := cost.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, rep)
			}
			fmt.Fprintf(out, "%s: %d rounds of %d orders preloaded then %.0f probes/s for %gs; load average %.2f -> %.2f on %d CPUs\n",
				rep.Engine, rep.Rounds, rep.Orders, rep.ProbeRate, rep.ProbeForS, rep.Load1, rep.Load1After, rep.CPUs)
			if rep.WindowEveryS > 0 {
				fmt.Fprintf(out, "recording only around a %gs window every %gs (a second of lead and of tail): on %.0f %% of the probe stream, not during the preload; probes due while it ran had a p50 %+.1f %% of those due while it did not, in the same phases (median of the phases)\n",
					rep.WindowForS, rep.WindowEveryS, rep.RecordedShare*100, rep.InWindowPct)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintf(tw, "  recording\tpreload orders/s\tprobe p50 us\tprobe p99 us\t\n")
			fmt.Fprintf(tw, "  on\t%.0f\t%.1f\t%.1f\t\n", rep.On.PreloadPerS, rep.On.ProbeP50Us, rep.On.ProbeP99Us)
			fmt.Fprintf(tw, "  off\t%.0f\t%.1f\t%.1f\t\n", rep.Off.PreloadPerS, rep.Off.ProbeP50Us, rep.Off.ProbeP99Us)
			tw.Flush()
			verdict := "misses"
			if rep.MeetsGoal {
				verdict = "meets"
			}
			fmt.Fprintf(out, "with recording: probe p50 %+.1f %%, preload throughput %+.1f %%; %s the goal (p50 at most +%.0f %%, preload at least -%.0f %%); the recording filled at %.2f MB/s\n",
				rep.P50Overhead, -rep.PreloadLoss, verdict, cost.GoalP50Pct, cost.GoalPreloadPct, rep.DumpMBPerSec)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Rounds, "rounds", 4, "rounds, each one phase with recording and one without")
	f.StringVar(&orders, "orders", "200k", "resting orders preloaded each phase")
	f.StringVar(&rate, "probe-rate", "2k/s", "probe rate after the preload")
	f.DurationVar(&o.ProbeFor, "probe-for", 5*time.Second, "length of each phase's probe stream")
	f.IntVar(&eng.Servers, "servers", 1, "reference engine servers (raft voters) on loopback")
	f.IntVar(&eng.SyncLevel, "sync-level", 2, "the engines' sync level: 0, 1 or 2")
	f.StringVar(&window, "window", "", "engine.flight_recorder_window (default: the engine's)")
	f.DurationVar(&o.Windows.Every, "window-every", 0, "record only around windows this far apart during the probe stream, as engine.recording: windows does (0: throughout)")
	f.DurationVar(&o.Windows.For, "window-for", 0, "each window's length, with --window-every")
	f.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	f.BoolVar(&quiet, "quiet", false, "no progress on stderr")
	return cmd
}
