package runner

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/results"
)

// startRequest is how the playbook's engine driver starts an engine with cfg.
func (r *run) startRequest(cfg engine.Config) agent.StartRequest {
	req := agent.StartRequest{Config: cfg}
	if e := r.pb.Engine; e.Driver == playbooks.DriverCommand && e.Command != nil {
		spec := e.Command.Spec
		req.Command, req.Settings = &spec, e.Settings()
	}
	return req
}

// effective reads the settings an engine reports in effect (GET /status config), in the text
// playbooks.Engine.Settings uses, so the two compare as strings.
func effective(c engine.Config) map[string]string {
	return map[string]string{
		"sync_level":        strconv.Itoa(c.SyncLevel),
		"snapshot_block":    strconv.Itoa(c.SnapshotBlock),
		"encode_threads":    strconv.Itoa(c.EncodeThreads),
		"heartbeat_timeout": canonDuration(c.HeartbeatTimeout),
		"election_timeout":  canonDuration(c.ElectionTimeout),
	}
}

// canonDuration writes a reported duration as Go prints it ("0.5s" -> "500ms"); what does not
// parse is kept as reported, so it shows in the mismatch.
func canonDuration(s string) string {
	if d, err := time.ParseDuration(s); err == nil {
		return d.String()
	}
	return s
}

// verifyEngineConfig checks every asked setting twice and fails the run naming each one that
// did not hold: carriage (command driver: the process's command line and environment, read by
// its agent from /proc when it first answered) and effect (every driver: the engine's /status
// config, where the setting takes effect).
func (r *run) verifyEngineConfig(ctx context.Context) error {
	asked := r.pb.Engine.Settings()
	names := make([]string, 0, len(asked))
	for k := range asked {
		names = append(names, k)
	}
	sort.Strings(names)
	var errs []error
	if r.pb.Engine.Driver == playbooks.DriverCommand {
		for _, n := range r.servers {
			st, err := r.agent(n.Name).EngineStatus(ctx)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: read engine state for the carriage check: %w", n.Name, err))
				continue
			}
			if len(st.Launches) == 0 {
				errs = append(errs, fmt.Errorf("%s: no engine launch to check", n.Name))
				continue
			}
			l := st.Launches[len(st.Launches)-1]
			if l.CarriageError != "" {
				errs = append(errs, fmt.Errorf("%s: carriage check: %s", n.Name, l.CarriageError))
			}
			for _, c := range l.Carriage {
				if !c.OK {
					errs = append(errs, fmt.Errorf("%s: engine.%s not carried: %s should hold %q, the process (pid %d) has %s",
						n.Name, c.Setting, c.Where, c.Want, l.PID, c.Seen))
				}
			}
		}
	}
	r.mu.Lock()
	eff := map[string]any{}
	for _, n := range r.servers {
		st, ok := r.status[n.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: no status", n.Name))
			continue
		}
		eff[n.Name] = st.Config
		got := effective(st.Config)
		for _, k := range names {
			if got[k] != asked[k] {
				errs = append(errs, fmt.Errorf("%s: engine.%s is %s in effect (GET /status config.%s), the playbook asked for %s",
					n.Name, k, got[k], k, asked[k]))
			}
		}
	}
	r.mu.Unlock()
	r.updateManifest(func(m *results.Manifest) { m.Engines = eff })
	return errors.Join(errs...)
}
