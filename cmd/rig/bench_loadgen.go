package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/loadgen"
	"github.com/rig-dev/rig/loadgen/loadspec"
)

// newBenchLoadgenCmd is `rig bench loadgen`.
func newBenchLoadgenCmd() *cobra.Command {
	var (
		messages, size, rates, spins string
		o                            loadgen.BenchOptions
		asJSON, quiet                bool
	)
	cmd := &cobra.Command{
		Use:   "loadgen",
		Short: "How fast and how punctual the load generator sends, against receivers on loopback",
		Long: `Times a UDP burst through the load generator's sender (pre-encoded datagrams, sendmmsg) next
to a bare sendmmsg loop over the same buffers and a one-datagram-per-write loop, interleaved in
the same run (medians of --repeats); the goal is a burst within 1.25x of the bare loop. Then runs
the probe stream for --for at each rate against a TCP responder that answers at once, and reports
its send lag (how far behind its schedule each probe went out), once for each --spin (the
stream's busy-wait before each probe is due, playbook field load.spin; 0 sleeps until then); the
goal is p99 <= 50us at 5k/s on a quiet machine. Also prints a bare receiver's latency over the
bursts: this host's floor under a burst's p99 < 1 ms bound. Prints the load average before and
after: figures taken above the CPU count are not the load generator's own.`,
		Example: "  rig bench loadgen --json\n  rig bench loadgen --messages 200k --size 1400 --rates 5k/s",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := countFlag("--messages", messages, 10_000_000)
			if err != nil {
				return err
			}
			o.Messages = int(n)
			sz, err := units.ParseSize(size)
			if err != nil || sz < 72 || sz > 1400 {
				if err == nil {
					err = fmt.Errorf("%q is out of range; want 72B..1400B", size)
				}
				return fmt.Errorf("%w: --size: %v", errUsage, err)
			}
			o.Size = int(sz)
			o.Rates = nil
			for _, r := range strings.Split(rates, ",") {
				v, err := units.ParseRate(strings.TrimSpace(r))
				if err != nil {
					return fmt.Errorf("%w: --rates %q: %v", errUsage, r, err)
				}
				o.Rates = append(o.Rates, v)
			}
			o.Spins = nil
			for _, s := range strings.Split(spins, ",") {
				v, err := units.ParseDuration(strings.TrimSpace(s))
				if err != nil || v < 0 || v > loadspec.MaxSpin {
					if err == nil {
						err = fmt.Errorf("out of range; want 0..%v", loadspec.MaxSpin)
					}
					return fmt.Errorf("%w: --spin %q: %v", errUsage, s, err)
				}
				o.Spins = append(o.Spins, v)
			}
			if o.Repeats < 1 {
				return fmt.Errorf("%w: --repeats %d: want at least 1", errUsage, o.Repeats)
			}
			if o.For < 100*time.Millisecond {
				return fmt.Errorf("%w: --for %s: want at least 100ms", errUsage, o.For)
			}
			if !quiet {
				o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			}
			rep, err := loadgen.BenchSend(cmd.Context(), o)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, rep)
			}
			fmt.Fprintf(out, "burst of %d x %d B (median of %d), load average %.2f -> %.2f on %d CPUs\n",
				rep.Messages, rep.Size, rep.Repeats, rep.Load1, rep.Load1After, rep.CPUs)
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "  load generator's sender\t%.1f ms\t%.2fx the bare loop (goal <= 1.25x)\n", rep.BurstMs, rep.Ratio)
			fmt.Fprintf(tw, "  bare sendmmsg loop\t%.1f ms\t\n", rep.BareMs)
			fmt.Fprintf(tw, "  one datagram per write\t%.1f ms\t\n", rep.SingleMs)
			tw.Flush()
			fmt.Fprintf(out, "a bare receiver's latency over the load generator's bursts (the host's floor under a burst's p99 < 1 ms bound): p50 %.1f us, p99 %.1f us, max %.1f us\n",
				rep.RecvP50Us, rep.RecvP99Us, rep.RecvMaxUs)
			fmt.Fprintf(out, "probe stream send lag (goal p99 <= 50us at 5k/s on a quiet machine):\n")
			tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintf(tw, "  rate/s\tspin us\tprobes\tp50 us\tp99 us\tmax us\tlate >1ms\t\n")
			for _, l := range rep.ProbeLag {
				fmt.Fprintf(tw, "  %.0f\t%.0f\t%d\t%.1f\t%.1f\t%.1f\t%d\t\n", l.Rate, l.SpinUs, l.Probes, l.P50Us, l.P99Us, l.MaxUs, l.Late)
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&messages, "messages", "50k", "datagrams per timed burst")
	f.StringVar(&size, "size", "170B", "datagram size, 72B..1400B")
	f.IntVar(&o.Repeats, "repeats", 5, "timed bursts per sender kind")
	f.StringVar(&rates, "rates", "1k/s,5k/s,50k/s", "probe rates for the send-lag runs, comma-separated")
	f.StringVar(&spins, "spin", "0,100us", "probe stream busy-wait settings to compare at each rate, comma-separated (0..2ms)")
	f.DurationVar(&o.For, "for", 3*time.Second, "length of each send-lag run")
	f.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	f.BoolVar(&quiet, "quiet", false, "no warnings on stderr")
	return cmd
}
