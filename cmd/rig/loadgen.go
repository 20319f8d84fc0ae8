package main

import (
	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/rundir"

	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/rig-dev/rig/loadgen"
	"github.com/rig-dev/rig/loadgen/loadspec"
)

// newLoadgenCmd is `rig loadgen`, the client role: it runs on a client node, started by the
// controller with a --config file (loadspec.Config), or by hand with flags. Flags override the file.
func newLoadgenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "loadgen",
		Short: "Load generator: preload a resting book, run an open-loop probe stream, send micro-bursts",
		Long: `The load generator talks to the engine's client protocol. Give every server's client
address: followers redirect to the leader, and the generator follows leader changes.

  rig loadgen preload --servers a:7001,b:7001,c:7001 --orders 100k --instruments 16
  rig loadgen probe   --servers a:7001,b:7001,c:7001 --rate 1000/s --duration 30s --out DIR [--control SOCKET]
  rig loadgen burst   --servers a:7001,b:7001,c:7001 --messages 50k --every 1s --count 5 --out DIR

probe writes DIR/probes.bin, DIR/probes.hlog (HdrHistogram interval log) and DIR/stats.json;
SIGINT/SIGTERM or POST /stop end it early: it stops sending, waits --grace for answers, writes
everything and exits 0. The control address (loopback only) serves POST /burst
{"messages","every_ns","count"}, GET /stats and POST /stop.`,
	}
	cmd.AddCommand(newPreloadCmd(), newProbeCmd(), newBurstCmd())
	return cmd
}

type lgCommon struct {
	config  string
	servers []string
	verbose bool
}

func (c *lgCommon) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.config, "config", "", "JSON config file (loadspec.Config); flags override it")
	f.StringSliceVar(&c.servers, "servers", nil, "client addresses of the engine nodes, comma-separated host:port")
	f.BoolVarP(&c.verbose, "verbose", "v", false, "log connection details")
}

// load reads --config (if any) and applies the common flags; it names the source for errors.
func (c *lgCommon) load(cmd *cobra.Command) (loadspec.Config, string, error) {
	var cfg loadspec.Config
	source := "flags"
	if c.config != "" {
		var err error
		if cfg, err = loadspec.LoadConfig(c.config); err != nil {
			if errors.Is(err, loadspec.ErrConfig) {
				return cfg, "", fmt.Errorf("%w: %v", errUsage, err)
			}
			return cfg, "", fmt.Errorf("%w: --config: %v", errUsage, err)
		}
		source = c.config + " and flags"
	}
	if cmd.Flags().Changed("servers") {
		cfg.Servers = c.servers
	}
	return cfg, source, nil
}

// check runs the config's cross-section checks once the flags are applied.
func (c *lgCommon) check(cfg *loadspec.Config, source string) error {
	if err := cfg.Check(); err != nil {
		return fmt.Errorf("%w: %s: %v", errUsage, source, err)
	}
	return nil
}

func (c *lgCommon) logger() *slog.Logger {
	level := slog.LevelInfo
	if c.verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// usageErr turns an options error into a usage error (exit 2) naming where the value came from.
func lgUsageErr(source string, err error) error {
	if errors.Is(err, loadgen.ErrBadOptions) {
		return fmt.Errorf("%w: %s: %v", errUsage, source, err)
	}
	return err
}

func newPreloadCmd() *cobra.Command {
	var common lgCommon
	var flags lgFlags
	cmd := &cobra.Command{
		Use:   "preload",
		Short: "Build N resting GTC orders that never cross, in pipelined batches to the leader",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, source, err := common.load(cmd)
			if err != nil {
				return err
			}
			if err := flags.apply(&cfg); err != nil {
				return err
			}

			if err := common.check(&cfg, source); err != nil {
				return err
			}
			log := common.logger()
			opts := loadgen.PreloadOptionsFrom(cfg)
			opts.Logger = log
			stopProgress := lgPreloadProgress(&opts, log)
			st, err := loadgen.Preload(cmd.Context(), opts)
			stopProgress()
			if err != nil {
				return lgUsageErr(source, err)
			}
			if cfg.Preload.Out != "" {
				if err := os.MkdirAll(cfg.Preload.Out, 0o755); err != nil {
					return fmt.Errorf("write preload stats: %w", err)
				}
				if err := atomicfile.WriteJSON(filepath.Join(cfg.Preload.Out, rundir.PreloadFile), st); err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "preloaded %d orders on %d instruments in %v (%.0f orders/s); bids %d..%d, asks %d..%d; leader %s\n",
				st.Orders, st.Book.Instruments, time.Duration(st.ElapsedNs).Round(time.Millisecond), st.OrdersPerSec,
				st.Book.BidLow, st.Book.BidHigh, st.Book.AskLow, st.Book.AskHigh, st.Conn.Leader)
			return nil
		},
	}
	common.register(cmd)
	flags.register(cmd, loadspec.PreloadFlags)
	return cmd
}

// preloadProgress shows a bar on a terminal and a log line a second otherwise (the controller
// reads the log).
func lgPreloadProgress(opts *loadgen.PreloadOptions, log *slog.Logger) (stop func()) {
	if !term.IsTerminal(int(os.Stderr.Fd())) {
		opts.Progress = func(p loadgen.PreloadProgress) {
			log.Info("preload", "acked", p.Acked, "of", p.Total, "orders_per_sec", int64(p.Rate), "elapsed", p.Elapsed.Round(time.Second))
		}
		return func() {}
	}
	var rate atomic.Int64
	p := mpb.New(mpb.WithOutput(os.Stderr), mpb.WithWidth(40))
	bar := p.AddBar(opts.Orders,
		mpb.PrependDecorators(decor.Name("preload "), decor.CountersNoUnit("%d / %d")),
		mpb.AppendDecorators(decor.Percentage(decor.WC{W: 5}), decor.Any(func(decor.Statistics) string {
			return fmt.Sprintf("  %d orders/s", rate.Load())
		})))
	opts.Progress = func(pr loadgen.PreloadProgress) {
		rate.Store(int64(pr.Rate))
		bar.SetCurrent(pr.Acked)
	}
	return func() {
		if !bar.Completed() {
			bar.Abort(false)
		}
		p.Wait()
	}
}

func newProbeCmd() *cobra.Command {
	var common lgCommon
	var flags lgFlags
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Run an open-loop probe stream (IOC orders that cross nothing) and record every probe",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, source, err := common.load(cmd)
			if err != nil {
				return err
			}
			if err := flags.apply(&cfg); err != nil {
				return err
			}

			if err := common.check(&cfg, source); err != nil {
				return err
			}
			log := common.logger()
			opts := loadgen.ProbeOptionsFrom(cfg)
			opts.Logger = log
			// Listen before starting so a bad control address fails before any probe goes out.
			var ln net.Listener
			if cfg.Probe.Control != "" {
				if ln, err = loadgen.ListenControl(cfg.Probe.Control); err != nil {
					return lgUsageErr(source, err)
				}
				defer ln.Close()
			}
			if cfg.Probe.PIDFile != "" {
				release, err := loadgen.HoldPIDFile(cfg.Probe.PIDFile)
				if err != nil {
					return lgUsageErr(source, err)
				}
				defer release()
			}
			run, err := loadgen.StartProbe(cmd.Context(), opts)
			if err != nil {
				return lgUsageErr(source, err)
			}
			if ln != nil {
				srv := &http.Server{Handler: loadgen.ControlHandler(run), ReadHeaderTimeout: 5 * time.Second}
				defer srv.Close()
				go srv.Serve(ln)
				log.Info("control API listening", "addr", ln.Addr().String())
				// With port 0 the controller learns the port from here.
				if err := os.WriteFile(filepath.Join(opts.Out, "control.addr"), []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
					log.Warn("cannot record the control address", "err", err)
				}
			}
			select { // the controller waits for this line (loadspec.StartLine)
			case <-run.Started():
				fmt.Fprintln(cmd.OutOrStdout(), loadspec.StartLine(run.Stats().Start))
			case <-run.Done():
			}
			st, err := run.Wait()
			return lgProbeDone(cmd.OutOrStdout(), opts.Out, st, err)
		},
	}
	common.register(cmd)
	flags.register(cmd, loadspec.ProbeFlags)
	return cmd
}

func lgProbeDone(w io.Writer, dir string, st rundir.ProbeStats, err error) error {
	if err != nil {
		if st.Scheduled == 0 {
			return fmt.Errorf("probe stream: %w", err)
		}
		return fmt.Errorf("probe stream (outputs in %s): %w", dir, err)
	}
	l := st.Latency
	fmt.Fprintf(w, "probes: %d scheduled, %d answered, %d lost (%d never sent); latency n=%d p50 %v p90 %v p99 %v max %v; send lag max %v, %d late (%d held for want of a leader); %d reconnects, %d failed dials, %d resends, %d leader changes; stopped by %s; outputs in %s\n",
		st.Scheduled, st.Answered, st.Lost, st.Unsent, l.N, lgDur(l.P50Ns), lgDur(l.P90Ns), lgDur(l.P99Ns), lgDur(l.MaxNs),
		lgDur(st.SendLag.MaxNs), st.SendLag.Late, st.SendLag.Held, st.Conn.Reconnects, st.Conn.DialFailures, st.Conn.Resent, len(st.Conn.LeaderChanges), st.StopReason, dir)
	return nil
}

func lgDur(v int64) time.Duration { return time.Duration(v).Round(time.Microsecond) }

func newBurstCmd() *cobra.Command {
	var common lgCommon
	var flags lgFlags
	cmd := &cobra.Command{
		Use:   "burst",
		Short: "Send micro-bursts: B messages back-to-back every I, C times",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, source, err := common.load(cmd)
			if err != nil {
				return err
			}
			if err := flags.apply(&cfg); err != nil {
				return err
			}
			if err := common.check(&cfg, source); err != nil {
				return err
			}
			opts := loadgen.BurstOptionsFrom(cfg)
			opts.Logger = common.logger()
			st, err := loadgen.Burst(cmd.Context(), opts)
			if err != nil {
				return lgUsageErr(source, err)
			}
			if st.Transport == "udp" {
				fmt.Fprintf(cmd.OutOrStdout(), "bursts: %d x %d datagrams of %d B from %d senders to %s, %d sent; peak %d datagrams/ms as sent; outputs in %s\n",
					len(st.Bursts), st.Messages, st.Size, st.Senders, st.Target, st.Sent, st.PeakPerMs, opts.Out)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "bursts: %d x %d messages, %d answered, %d lost; peak %d messages/ms as sent; latency p50 %v max %v; outputs in %s\n",
				len(st.Bursts), st.Messages, st.Answered, st.Lost, st.PeakPerMs, lgDur(st.Latency.P50Ns), lgDur(st.Latency.MaxNs), opts.Out)
			return nil
		},
	}
	common.register(cmd)
	flags.register(cmd, loadspec.BurstFlags)
	return cmd
}

// lgFlags are a command's loadspec flags (loadspec.PreloadFlags, ...): each is checked as it is
// parsed, and those given are applied over the config file.
type lgFlags struct {
	flags []loadspec.Flag
	given []lgFlagValue
}

type lgFlagValue struct {
	f loadspec.Flag
	v string
}

// lgFlag is one loadspec flag as a pflag.Value.
type lgFlag struct {
	l *lgFlags
	f loadspec.Flag
}

func (v lgFlag) String() string { return v.f.Def }
func (v lgFlag) Type() string   { return v.f.Type }

// Set checks the value as the field takes it (on a scratch config), then keeps it.
func (v lgFlag) Set(s string) error {
	var scratch loadspec.Config
	if err := v.f.Set(&scratch, s); err != nil {
		return err
	}
	v.l.given = append(v.l.given, lgFlagValue{v.f, s})
	return nil
}

func (l *lgFlags) register(cmd *cobra.Command, flags []loadspec.Flag) {
	l.flags = flags
	for _, f := range flags {
		fl := cmd.Flags().VarPF(lgFlag{l, f}, f.Name, "", f.Usage)
		if f.Bool {
			fl.NoOptDefVal = "true"
		}
	}
}

// apply sets the given flags' fields over cfg, in the order given.
func (l *lgFlags) apply(cfg *loadspec.Config) error {
	for _, g := range l.given {
		if err := g.f.Set(cfg, g.v); err != nil {
			return fmt.Errorf("%w: --%s: %v", errUsage, g.f.Name, err)
		}
	}
	return nil
}
