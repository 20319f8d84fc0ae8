package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/runner/launch"
)

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
		st := r.srv(name).status
		if st.Config == nil {
			return nil // not answered since launch
		}
		if errs := r.ignoredProperties(name, st); len(errs) > 0 {
			return fmt.Errorf("%w before the cluster was ready (phase %s): %w", ErrSettingNotInEffect, cmp.Or(st.Phase, "?"), errors.Join(errs...))
		}
		reported := driver.Values{}
		for k, v := range asked {
			if _, ok := st.Config[k]; ok {
				reported[k] = v
			}
		}
		var errs []error
		for _, e := range driver.EffectErrors(table, reported, st.Config) {
			errs = append(errs, fmt.Errorf("%s: %w", name, e))
		}
		if len(errs) == 0 {
			return nil
		}
		return fmt.Errorf("%w before the cluster was ready (phase %s): %w", ErrSettingNotInEffect, cmp.Or(st.Phase, "?"), errors.Join(errs...))
	}
}

// verifyEngineConfig checks every asked setting on every server (launch.SettingErrors) and fails the
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
		st, ok := r.srv(n.Name).status, r.srv(n.Name).seen
		state, okState := states[n.Name]
		if !ok || !okState {
			if !ok {
				errs = append(errs, fmt.Errorf("%s: no status", n.Name))
			}
			continue
		}
		eff[n.Name] = st.Config
		errs = append(errs, r.ignoredProperties(n.Name, st)...)
		for _, e := range launch.SettingErrors(r.pb, state, st) {
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
		for _, u := range r.srv(n.Name).status.Unsupported {
			unsupported[u] = true
		}
	}
	r.mu.Unlock()
	for _, c := range clamped {
		r.warn("%s", c)
	}
	// Spinning idle strategies against the cores they share, said before load (and in the
	// report): on the local target every server shares this machine.
	cpus := 0
	if r.inv != nil && r.inv.Target == inventory.TargetLocal {
		cpus = runtime.NumCPU()
	}
	if w := r.pb.CoresWarning(cpus); w != "" && cpus > 0 {
		r.warn("cores: %s", w)
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

// ignoredProperties names every property a server says it was given but reads nowhere
// (engine.Status.IgnoredProperties), and where the playbook passed it: a -D that does nothing
// would make a knob's row measure the default under the knob's name.
func (r *run) ignoredProperties(name string, st engine.Status) []error {
	var errs []error
	for _, p := range st.IgnoredProperties {
		errs = append(errs, fmt.Errorf("%s: %s is read by no configuration of the engine (GET /status ignored_properties): a misspelt or retired name "+
			"would do nothing; it came from %s", name, p, r.passedFrom(p)))
	}
	return errs
}

// passedFrom says where the playbook's engine command passes the system property p: the
// argument or environment variable that holds -Dp, with its position.
func (r *run) passedFrom(p string) string {
	c := r.pb.Engine.Command
	if c == nil {
		return "no engine.command of the playbook"
	}
	flag := "-D" + p
	has := func(s string) bool {
		for _, f := range strings.Fields(s) {
			if f == flag || strings.HasPrefix(f, flag+"=") {
				return true
			}
		}
		return false
	}
	for i, a := range c.Args {
		if has(a) {
			path := fmt.Sprintf("engine.command.args[%d]", i)
			return fmt.Sprintf("%s %q (%s)", path, a, r.pb.PosOf(path))
		}
	}
	for _, e := range c.Env {
		if k, v, _ := strings.Cut(e, "="); has(v) {
			return fmt.Sprintf("engine.command.env %s (%s)", k, r.pb.PosOf("engine.command.env"))
		}
	}
	return "no argument or variable of the playbook's engine.command: the engine's start script, its environment or its config file passed it"
}
