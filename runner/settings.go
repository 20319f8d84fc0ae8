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
	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
)

// StartRequest is how playbook pb's engine driver starts an engine with cfg.
func StartRequest(pb *playbooks.Playbook, cfg engine.Config) agent.StartRequest {
	req := agent.StartRequest{Config: cfg}
	if e := pb.Engine; e.Driver == playbooks.DriverCommand && e.Command != nil {
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
		"udp_rcvbuf":        strconv.Itoa(c.UDPRcvbuf),
		"udp_nak_delay":     canonDuration(c.UDPNakDelay),
		"udp_recv_nice":     strconv.Itoa(c.UDPRecvNice),
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

// SettingErrors checks every setting playbook pb asks for on one node, twice: carriage
// (command driver: the process's command line and environment, which its agent read from /proc
// when the process first answered; state is the agent's engine state) and effect (every driver:
// the engine's /status config, where the setting takes effect). One error per failure, naming
// the setting.
func SettingErrors(pb *playbooks.Playbook, state agent.EngineState, st engine.Status) []error {
	var errs []error
	if pb.Engine.Driver == playbooks.DriverCommand {
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
	asked := pb.Engine.Settings()
	got := effective(st.Config)
	names := make([]string, 0, len(asked))
	for k := range asked {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if got[k] != asked[k] {
			errs = append(errs, fmt.Errorf("engine.%s is %s in effect (GET /status config.%s), the playbook asked for %s", k, got[k], k, asked[k]))
		}
	}
	return errs
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
	eff := map[string]engine.Config{}
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
		if u := st.UDP; u != nil && r.pb.Engine.UDPRecvNice != 0 && u.RecvNice != r.pb.Engine.UDPRecvNice {
			errs = append(errs, fmt.Errorf("%s: engine.udp_recv_nice: the UDP receive thread runs at nice %d, the playbook asked for %d (%s)",
				n.Name, u.RecvNice, r.pb.Engine.UDPRecvNice, u.RecvNiceError))
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
	return errors.Join(errs...)
}
