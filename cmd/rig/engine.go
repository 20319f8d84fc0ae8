package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/engine/replica"
	"github.com/rig-dev/rig/engine/replica/store"
	"github.com/rig-dev/rig/engine/server"
	"github.com/rig-dev/rig/internal/untrusted"
	"github.com/rig-dev/rig/recording/gcpause"
	"github.com/rig-dev/rig/rundir"
)

func newEngineCmd(drivers *driver.Registry) *cobra.Command {
	var configPath string
	var flight bool
	cmd := &cobra.Command{
		Use:   "engine --config FILE",
		Short: "Run one node of the reference engine (started by the agent)",
		Long: `Run one node of the reference engine. The agent starts it with the admin API's secret in
the environment variable ` + engine.AdminTokenEnv + ` (engine/contract.go); without it the engine refuses to start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token := os.Getenv(engine.AdminTokenEnv)
			if token == "" {
				return fmt.Errorf("%w: %s is not set: the engine's admin API answers only the agent that started it, with the secret it hands over in that variable (engine/contract.go)", errUsage, engine.AdminTokenEnv)
			}
			os.Unsetenv(engine.AdminTokenEnv) // not inherited by anything this process starts
			b, err := untrusted.ReadFile(configPath, "engine config")
			if err == nil {
				err = untrusted.Check(configPath, b)
			}
			if err != nil {
				return fmt.Errorf("%w: --config: %v", errUsage, err)
			}
			var cfg engine.Config
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&cfg); err != nil {
				return fmt.Errorf("%w: --config %s: %v", errUsage, configPath, err)
			}
			if flight {
				cfg.FlightRecorder = true // so /status config reports it
			}
			fr, err := server.NewFlightRecorder(cfg)
			if err != nil {
				return fmt.Errorf("%w: --config %s: %v", errUsage, configPath, err)
			}
			log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("node", cfg.Node)
			node, err := replica.New(cfg, log)
			if err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			node.OnFatal(func(err error) {
				// Crash-stop: no graceful shutdown, nothing more written. The cause is the last
				// line of the engine's log, where the agent's exit report quotes it from.
				fmt.Fprintf(os.Stderr, "rig: engine %s stopped on a fatal storage error: %v\n", cfg.Node, err)
				os.Exit(1)
			})
			if cfg.UDPRecvNice != 0 {
				// The UDP receive loop holds its own OS thread; one scheduler slot more than the
				// CPUs keeps one free for it when raft's goroutines are busy, so a datagram
				// arriving does not wait for them to be preempted.
				runtime.GOMAXPROCS(runtime.NumCPU() + 1)
			}
			// Every GC's stop-the-world pauses, beside the config in the node folder: near-free,
			// so always on (docs/results.md has its cost). The engine's own phases (a
			// snapshot's take, a relaunch's restore, replay and catch-up) and its log store's
			// slow syncs go into the same file, a few lines a run and a few a second; each
			// flushed as it comes, one whole line per append, so the writers' lines do not
			// interleave.
			if !cfg.CauseSourcesOff {
				pauses := filepath.Join(filepath.Dir(configPath), rundir.PausesFile)
				if gp, err := gcpause.Start(pauses); err != nil {
					log.Warn("GC pauses not recorded", "err", err)
				} else {
					defer gp.Stop()
				}
				if pw, err := rundir.CreatePauses(pauses); err != nil {
					log.Warn("engine phases not recorded", "err", err)
				} else {
					defer pw.Close() // after node.Shutdown (deferred below), which hands over the last
					put := func(sp rundir.InsideSpan) {
						pw.Write(sp)
						if err := pw.Flush(); err != nil {
							log.Warn("engine phase or sync not recorded", "err", err)
						}
					}
					node.RecordPhases(func(w engine.WorkSpan) { put(rundir.PhaseSpan(w)) })
					node.RecordSyncs(func(s store.SyncSpan) { put(logSync(cfg.Dir, s)) })
				}
			}
			// Serve the admin API before restoring, so the agent sees starting and restoring.
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			srvErr := make(chan error, 1)
			srv := server.New(node, log, token)
			if fr != nil {
				// The last seconds, served at GET /trace. Off by default: its cost on probe
				// latency is measured by rig bench recording (docs/engines.md). An idle one
				// waits for POST /trace/start (a recording cut to the run's windows).
				if !cfg.FlightRecorderIdle {
					if err := fr.Start(); err != nil {
						return fmt.Errorf("start flight recorder: %w", err)
					}
				}
				defer fr.Stop()
				srv.WithFlightRecorder(fr)
			}
			go func() { srvErr <- srv.Run(ctx) }()
			if err := node.Start(); err != nil {
				cancel()
				<-srvErr
				return fmt.Errorf("start engine %s: %w", cfg.Node, err)
			}
			defer node.Shutdown()
			select {
			case <-ctx.Done():
				return <-srvErr
			case err := <-srvErr:
				return err
			}
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "engine.json", "engine config file (JSON, engine.Config)")
	cmd.Flags().BoolVar(&flight, "flight-recorder", false, "keep a runtime/trace flight recorder, served at GET "+engine.AdminTrace+", as the config's flight_recorder: true does")
	// `rig engine check` was the check's first name; the check is a controller verb, `rig check`.
	check := newCheckCmd(drivers)
	check.Deprecated = "use `rig check`, the same command"
	cmd.AddCommand(check)
	return cmd
}

// logSync is a sync of the engine's log store as a pauses-file line, its file relative to the
// data folder.
func logSync(dataDir string, s store.SyncSpan) rundir.InsideSpan {
	file := s.Path
	if rel, err := filepath.Rel(dataDir, s.Path); err == nil && filepath.IsLocal(rel) {
		file = rel
	}
	return rundir.LogSync(file, s.Start, s.Dur, fmt.Sprintf("%s of %s", s.Level, file))
}
