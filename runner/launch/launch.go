// Package launch is how a playbook's engine is started on a server and checked once it runs:
// the config each server gets, the start request its driver makes of the playbook's settings,
// and the check of each setting's carriage and effect. The runner and the conformance suite
// (rig check) share it; it imports no part of the runner.
package launch

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/recording"
	"github.com/rig-dev/rig/target"
)

// Engine ports on every server node; the admin port is bound to loopback.
const (
	RaftPort   = 7000
	ClientPort = 7001
	AdminPort  = 7002
)

// EngineConfig is the config server n of servers gets, with its data in dataDir (relative paths
// are in the node's agent folder): addresses and peers. The settings are the driver's to add
// (StartRequest).
func EngineConfig(servers []inventory.Node, n inventory.Node, dataDir string) engine.Config {
	host := n.PrivateAddress
	cfg := engine.Config{
		Node: n.Name, Dir: dataDir,
		RaftAddr:   net.JoinHostPort(host, strconv.Itoa(RaftPort)),
		ClientAddr: net.JoinHostPort(host, strconv.Itoa(ClientPort)),
		AdminAddr:  net.JoinHostPort(target.LoopbackHost(n), strconv.Itoa(AdminPort)),
		Bootstrap:  true,
	}
	for _, s := range servers {
		cfg.Peers = append(cfg.Peers, engine.Peer{
			Node:       s.Name,
			RaftAddr:   net.JoinHostPort(s.PrivateAddress, strconv.Itoa(RaftPort)),
			ClientAddr: net.JoinHostPort(s.PrivateAddress, strconv.Itoa(ClientPort)),
		})
	}
	return cfg
}

// StartRequest is how playbook pb's engine driver starts an engine with cfg (driver.Prepare),
// as the agent is asked to: with the playbook's engine.command for a Templater, and the run's
// engine secret (engine.NewClusterSecret).
func StartRequest(pb *playbooks.Playbook, cfg engine.Config, secret string) (agent.StartRequest, error) {
	drv, table, err := pb.Engine.Resolve()
	if err != nil {
		return agent.StartRequest{}, fmt.Errorf("engine driver: %w", err)
	}
	st, err := driver.Prepare(drv, table, pb.Engine.Settings(), cfg)
	if err != nil {
		return agent.StartRequest{}, err
	}
	req := agent.StartRequest{Config: st.Config, ClusterSecret: secret}
	req.Config.CauseSourcesOff = pb.CauseSourcesOff()
	if st.Templated && pb.Engine.Command != nil {
		spec := pb.Engine.Command.Spec
		req.Command, req.Settings = &spec, st.Settings
	}
	if pb.Engine.Recorded() {
		req.Recording = RecordingFormat(pb)
		req.RecordingWindows = pb.Engine.RecordingMode() == playbooks.RecordingWindows
	}
	return req, nil
}

// RecordingFormat is the recording engine.recording: on takes of playbook pb's engine: a
// command-driven engine's is Java Flight Recorder (a JVM records; any other engine leaves the
// repository empty, and the take says so), the reference engine's its Go flight recorder.
func RecordingFormat(pb *playbooks.Playbook) recording.Format {
	if pb.Engine.Command != nil {
		return recording.FormatJFR
	}
	return recording.FormatGoTrace
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
	for _, e := range driver.EffectErrors(table, pb.Engine.Settings(), st.Config) {
		errs = append(errs, e)
	}
	return errs
}

// EarlyEffectErrors is the check made on every status a node reports before the cluster is
// ready: every asked setting that /status config already reports must hold the asked value. A
// setting that keeps the cluster from forming (a heartbeat timeout in the wrong unit) is named
// within a status poll of the node's first answer instead of as a readiness timeout. Settings not
// reported yet, and carriage, wait for SettingErrors once the cluster is ready.
func EarlyEffectErrors(pb *playbooks.Playbook, st engine.Status) []error {
	if st.Config == nil {
		return nil // not answered since launch
	}
	_, table, err := pb.Engine.Resolve()
	if err != nil {
		return nil // SettingErrors reports it
	}
	reported := driver.Values{}
	for k, v := range pb.Engine.Settings() {
		if _, ok := st.Config[k]; ok {
			reported[k] = v
		}
	}
	return driver.EffectErrors(table, reported, st.Config)
}
