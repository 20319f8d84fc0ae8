package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/runner/launch"
)

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
	r.mu.Unlock()
	for _, c := range clamped {
		r.warn("%s", c)
	}
	r.updateManifest(func(m *rundir.Manifest) { m.Engines = eff })
	if _, table, err := r.pb.Engine.Resolve(); err == nil {
		r.leaderTimeout = table.LongestInEffect(driver.HeartbeatTimeout, eff)
	}
	return errors.Join(errs...)
}
