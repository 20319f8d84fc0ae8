package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
)

// StartRequest is how playbook pb's engine driver starts an engine with cfg: a Configurer
// writes the settings into the node's config file, a Templater renders them into the playbook's
// engine.command templates.
func StartRequest(pb *playbooks.Playbook, cfg engine.Config) (agent.StartRequest, error) {
	drv, table, err := pb.Engine.Resolve()
	if err != nil {
		return agent.StartRequest{}, fmt.Errorf("engine driver: %w", err)
	}
	asked := pb.Engine.Settings()
	if c, ok := drv.(driver.Configurer); ok {
		if err := c.Configure(&cfg, asked); err != nil {
			return agent.StartRequest{}, fmt.Errorf("%s engine settings: %w", drv.Name(), err)
		}
	}
	req := agent.StartRequest{Config: cfg}
	if t, ok := drv.(driver.Templater); ok && pb.Engine.Command != nil {
		spec := pb.Engine.Command.Spec
		req.Command, req.Settings = &spec, t.TemplateSettings(table, asked)
	}
	return req, nil
}

// SettingErrors checks every setting playbook pb asks for on one node, twice: carriage
// (command driver: the process's command line and environment, which its agent read from /proc
// when the process first answered; state is the agent's engine state) and effect (every driver:
// the engine's /status config, where the setting takes effect). One error per failure, naming
// the setting.
func SettingErrors(pb *playbooks.Playbook, state agent.EngineState, st engine.Status) []error {
	var errs []error
	drv, table, err := pb.Engine.Resolve()
	if err != nil {
		return []error{fmt.Errorf("engine driver: %w", err)}
	}
	if _, ok := drv.(driver.Templater); ok {
		if len(state.Launches) == 0 {
			return []error{errors.New("no engine launch to check")}
		}
		l := state.Launches[len(state.Launches)-1]
		if l.CarriageError != "" {
			errs = append(errs, fmt.Errorf("carriage check: %s", l.CarriageError))
		}
		for _, c := range l.Carriage {
			if !c.OK {
				errs = append(errs, fmt.Errorf("engine.%s not carried: %s should hold %q, the process (pid %d) has %s",
					c.Setting, c.Where, c.Want, l.PID, c.Seen))
			}
		}
	}
	for _, e := range EffectErrors(table, pb.Engine.Settings(), st.Config) {
		errs = append(errs, e)
	}
	return errs
}

// EffectErrors compares every asked setting with what the engine reports in effect (GET /status
// config), by the setting's kind: "200ms", 200000000 (a duration rendered as nanos) and "0.2s"
// are one value. One error per setting that differs or is not reported, naming it, the value
// asked and the value in effect.
func EffectErrors(table driver.Table, asked driver.Values, reported engine.Reported) []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(asked)) {
		s, ok := table.Lookup(name)
		if !ok {
			s = driver.Setting{Name: name, Kind: driver.Text}
		}
		want := asked[name]
		v, present := reported[name]
		if !present {
			errs = append(errs, fmt.Errorf("engine.%s is not reported in effect (GET /status config has no %q), the playbook asked for %s", name, name, s.Show(want)))
			continue
		}
		got, err := s.Reported(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("engine.%s in effect (GET /status config.%s): %v; the playbook asked for %s", name, name, err, s.Show(want)))
			continue
		}
		if got != want {
			errs = append(errs, fmt.Errorf("engine.%s is %s in effect (GET /status config.%s), the playbook asked for %s", name, s.Show(got), name, s.Show(want)))
		}
	}
	return errs
}

// ErrSettingNotInEffect classifies a run stopped before readiness because a node's /status config
// reported an asked setting with another value.
var ErrSettingNotInEffect = errors.New("setting not in effect")

// effectBeforeReady returns the check waitReadyChecking makes on every status a server reports
// before the cluster is ready (r.mu held): every asked setting that /status config already
// reports must hold the asked value. A setting that keeps the cluster from forming (a heartbeat
// timeout in the wrong unit) then fails the run within a status poll of the node's first answer,
// naming node, setting, asked and in-effect values, instead of as a readiness timeout. Settings
// not reported yet, and carriage, are checked once the cluster is ready (verifyEngineConfig).
func (r *run) effectBeforeReady() func(name string) error {
	_, table, err := r.pb.Engine.Resolve()
	if err != nil {
		return nil // verifyEngineConfig reports it
	}
	asked := r.pb.Engine.Settings()
	return func(name string) error {
		st := r.status[name]
		if st.Config == nil {
			return nil // not answered since launch
		}
		reported := driver.Values{}
		for k, v := range asked {
			if _, ok := st.Config[k]; ok {
				reported[k] = v
			}
		}
		var errs []error
		for _, e := range EffectErrors(table, reported, st.Config) {
			errs = append(errs, fmt.Errorf("%s: %w", name, e))
		}
		if len(errs) == 0 {
			return nil
		}
		return fmt.Errorf("%w before the cluster was ready (phase %s): %w", ErrSettingNotInEffect, cmp.Or(st.Phase, "?"), errors.Join(errs...))
	}
}

// verifyEngineConfig checks every asked setting on every server (SettingErrors) and fails the
// run naming each one that did not hold.
func (r *run) verifyEngineConfig(ctx context.Context) error {
	var errs []error
	states := map[string]agent.EngineState{}
	for _, n := range r.servers {
		st, err := r.agent(n.Name).EngineStatus(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: read engine state: %w", n.Name, err))
			continue
		}
		states[n.Name] = st
	}
	r.mu.Lock()
	eff := map[string]engine.Reported{}
	var clamped []string
	for _, n := range r.servers {
		st, ok := r.status[n.Name]
		state, okState := states[n.Name]
		if !ok || !okState {
			if !ok {
				errs = append(errs, fmt.Errorf("%s: no status", n.Name))
			}
			continue
		}
		eff[n.Name] = st.Config
		for _, e := range SettingErrors(r.pb, state, st) {
			errs = append(errs, fmt.Errorf("%s: %w", n.Name, e))
		}
		// The contract's UDP section reports the nice value the receive thread really has.
		if nice, ok := r.pb.Engine.Int(engine.UDPRecvNiceSetting); ok && nice != 0 {
			if u := st.UDP; u != nil && int64(u.RecvNice) != nice {
				errs = append(errs, fmt.Errorf("%s: engine.%s: the UDP receive thread runs at nice %d, the playbook asked for %d (%s)",
					n.Name, engine.UDPRecvNiceSetting, u.RecvNice, nice, u.RecvNiceError))
			}
		}
		// Linux grants twice the request, capped at twice net.core.rmem_max: less means clamped.
		if u := st.UDP; u != nil && u.RcvbufAsked > 0 && u.RcvbufGranted < 2*u.RcvbufAsked {
			clamped = append(clamped, fmt.Sprintf("%s: UDP SO_RCVBUF asked %s, got %s: net.core.rmem_max (%s) clamps it",
				n.Name, units.FormatSize(int64(u.RcvbufAsked)), units.FormatSize(int64(u.RcvbufGranted)), units.FormatSize(int64(u.RmemMax))))
		}
	}
	unsupported := map[string]bool{}
	for _, n := range r.servers {
		for _, u := range r.status[n.Name].Unsupported {
			unsupported[u] = true
		}
	}
	r.mu.Unlock()
	for _, c := range clamped {
		r.warn("%s", c)
	}
	if len(unsupported) > 0 {
		// Named, so a zero the engine reports there (orders, say) is not read as a value.
		r.warn("not supported by the engine (GET /status unsupported): %s", strings.Join(slices.Sorted(maps.Keys(unsupported)), ", "))
	}
	r.updateManifest(func(m *rundir.Manifest) { m.Engines = eff })
	if _, table, err := r.pb.Engine.Resolve(); err == nil {
		r.leaderTimeout = table.LongestInEffect(driver.HeartbeatTimeout, eff)
	}
	return errors.Join(errs...)
}
