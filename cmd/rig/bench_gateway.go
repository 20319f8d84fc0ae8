package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/gatewaybench"
	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"github.com/rig-dev/rig/playbooks"
)

// newBenchGatewayCmd is `rig bench gateway`.
func newBenchGatewayCmd(drivers *driver.Registry) *cobra.Command {
	var (
		pbPath, rates, clientArgs, spin string
		o                               gatewaybench.Options
		asJSON, quiet                   bool
	)
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "What a command-driven engine's gateway adds to latency, against the engine's own client",
		Long: `Starts one node of the playbook's engine (a one-node cluster on loopback, its command rendered as
a run's agent renders it), then at each rate runs the load generator's probe stream through the
node's gateway (docs/wire.md over TCP -> gateway -> its cluster client -> ingress, and back) and
the engine's own client (engine.command.binary with --client-args and the node's config file: for
the Aeron example, a JVM AeronCluster client on the node's media driver) sending the same orders
straight into ingress, open loop, each message timed from its intended send time to its reply.
The two sides alternate which goes first, --takes times, after one warm-up phase each; the
figures are medians over the takes. The gateway's added latency is the difference; the goal
is at most 20 us at p50. Prints the load average before and after: run it alone
(e.g. under flock /tmp/rig-measure.lock) and quote it.`,
		Example: "  flock /tmp/rig-measure.lock rig bench gateway --for 10s --takes 3\n" +
			"  rig bench gateway --playbook examples/aeron-cluster/engine.yaml --rates 1k/s,20k/s --json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Rates = nil
			for _, r := range strings.Split(rates, ",") {
				v, err := units.ParseRate(strings.TrimSpace(r))
				if err == nil && !(v >= 1 && v <= 200_000) {
					err = fmt.Errorf("out of range; want 1/s..200k/s")
				}
				if err != nil {
					return fmt.Errorf("%w: --rates %q: %v", errUsage, r, err)
				}
				o.Rates = append(o.Rates, v)
			}
			if o.For < 100*time.Millisecond || o.For > 10*time.Minute {
				return fmt.Errorf("%w: --for %s: want 100ms..10m", errUsage, o.For)
			}
			if o.Warmup < 0 || o.Warmup > 10*time.Minute {
				return fmt.Errorf("%w: --warmup %s: want 0..10m", errUsage, o.Warmup)
			}
			if o.Takes < 1 || o.Takes > 100 {
				return fmt.Errorf("%w: --takes %d: want 1..100", errUsage, o.Takes)
			}
			v, err := units.ParseDuration(spin)
			if err != nil || v < 0 || v > loadspec.MaxSpin {
				if err == nil {
					err = fmt.Errorf("out of range; want 0..%v", loadspec.MaxSpin)
				}
				return fmt.Errorf("%w: --spin %q: %v", errUsage, spin, err)
			}
			o.Spin = v
			if o.ClientIdle != gatewaybench.IdleBackoff && o.ClientIdle != gatewaybench.IdleSpin {
				return fmt.Errorf("%w: --client-idle %q: want %s or %s", errUsage, o.ClientIdle, gatewaybench.IdleBackoff, gatewaybench.IdleSpin)
			}
			if o.ClientArgs = strings.Fields(clientArgs); len(o.ClientArgs) == 0 {
				return fmt.Errorf("%w: --client-args: empty; want the arguments that start the engine's own client, e.g. \"-Xmx256m --gateway-bench\"", errUsage)
			}
			pb, err := playbooks.Open(pbPath, drivers)
			if err != nil {
				return fmt.Errorf("%w: --playbook: %v", errUsage, err)
			}
			if pb.Engine.Command == nil {
				return fmt.Errorf("%w: --playbook %s: its engine has no engine.command; want a command-driven engine with a gateway, e.g. examples/aeron-cluster/engine.yaml", errUsage, pbPath)
			}
			o.Playbook = pb
			dir, err := os.MkdirTemp("", "rig-bench-gateway-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			o.Dir = dir
			if !quiet {
				o.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
			}
			rep, err := gatewaybench.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(out, rep)
			}
			fmt.Fprintf(out, "%s: %d server, %d takes of %gs per rate and side (medians), spin %gus, client idle %s; load average %.2f -> %.2f on %d CPUs\n",
				rep.Engine, rep.Servers, rep.Takes, rep.ForS, rep.SpinUs, rep.ClientIdle, rep.Load1, rep.Load1After, rep.CPUs)
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintf(tw, "  rate/s\tgateway p50 us\tclient p50 us\tadded p50 us\tratio\tgateway p99 us\tclient p99 us\tadded p99 us\tratio\tsend lag p50 us (gw/client)\tCPU us/msg (gw/client)\t\n")
			for _, p := range rep.Points {
				fmt.Fprintf(tw, "  %.0f\t%.1f\t%.1f\t%+.1f\t%.2fx\t%.1f\t%.1f\t%+.1f\t%.2fx\t%.1f / %.1f\t%.1f / %.1f\t\n", p.Rate,
					p.Gateway.P50Us, p.Client.P50Us, p.AddedP50Us, p.RatioP50, p.Gateway.P99Us, p.Client.P99Us, p.AddedP99Us, p.RatioP99,
					p.Gateway.LagP50Us, p.Client.LagP50Us, p.Gateway.CPUUsPerMsg, p.Client.CPUUsPerMsg)
			}
			tw.Flush()
			for _, p := range rep.Points {
				if p.Gateway.Lost+p.Client.Lost > 0 {
					fmt.Fprintf(out, "at %.0f/s, %d messages through the gateway and %d through the client were not answered within the grace: the percentiles leave them out, and the machine could not keep up\n",
						p.Rate, p.Gateway.Lost, p.Client.Lost)
				}
			}
			if rep.Loaded {
				fmt.Fprintf(out, "no verdict on the goal (at most %g us added at p50): the load average was above the CPU count, so these latencies are the machine's queueing; run it on a quiet machine\n", rep.GoalP50Us)
				return nil
			}
			verdict := "misses"
			if rep.MeetsGoal {
				verdict = "meets"
			}
			fmt.Fprintf(out, "the gateway %s the goal (at most %g us added at p50 at every rate)\n", verdict, rep.GoalP50Us)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&pbPath, "playbook", "examples/aeron-cluster/engine.yaml", "a command-driven engine's playbook (its engine.command starts the node)")
	f.StringVar(&clientArgs, "client-args", "-Xmx256m --gateway-bench", "arguments after engine.command.binary that start the engine's own client (the node's config file follows)")
	f.StringVar(&rates, "rates", "1k/s,20k/s", "message rates, comma-separated")
	f.DurationVar(&o.For, "for", 10*time.Second, "length of each phase")
	f.DurationVar(&o.Warmup, "warmup", 5*time.Second, "one unmeasured phase per side at the highest rate first")
	f.IntVar(&o.Takes, "takes", 3, "phases per rate and side")
	f.StringVar(&spin, "spin", "50us", "both senders' busy-wait before each message is due (the load generator's load.spin; 0..2ms)")
	f.StringVar(&o.ClientIdle, "client-idle", gatewaybench.IdleBackoff, "how the engine's own client waits for replies: backoff (as the gateway's cluster-client thread) or spin (the floor, a core's cost)")
	f.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	f.BoolVar(&quiet, "quiet", false, "no progress on stderr")
	return cmd
}
