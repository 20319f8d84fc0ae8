package supervise

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/command"
)

// testConfigTemplate renders the test engine's JSON config (engine.Config) from template data.
const testConfigTemplate = `{"node": "{{.Node}}", "dir": "{{.DataDir}}", "admin_addr": "{{.AdminAddr}}",
 "peers": {{json .Peers}}, "sync_level": {{.Settings.sync_level}}, "heartbeat_timeout": "{{.Settings.heartbeat_timeout}}"}`

func commandSpec(t *testing.T, binary string) Spec {
	s := testSpec(t)
	s.Binary = ""
	s.Config.Peers = []engine.Peer{{Node: "node-0", RaftAddr: "127.0.0.1:1", ClientAddr: "127.0.0.1:2"}}
	s.Command = &command.Spec{
		Binary:     binary,
		Args:       []string{"--config", "{{.ConfigFile}}", "gclog={{.GCLog}}"},
		Env:        []string{"ENGINE_HEARTBEAT_NS={{nanos .Settings.heartbeat_timeout}}", "TESTENGINE_PHASE=50ms"},
		Config:     testConfigTemplate,
		ConfigFile: "node.json",
	}
	s.Settings = map[string]string{"sync_level": "1", "heartbeat_timeout": "250ms"}
	return s
}

func launchState(t *testing.T, e *Engine) Launch {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		st := e.State()
		if l := st.Launches[len(st.Launches)-1]; l.Carriage != nil || l.CarriageError != "" {
			return l
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("carriage never checked; state %+v", e.State())
	return Launch{}
}

// TestCommandDriverRendersAndCarries: the command driver renders args, env and the config file
// per node; the engine reads the rendered file (its /status reports the settings), and the
// carriage check finds the env entry in /proc/PID/environ.
func TestCommandDriverRendersAndCarries(t *testing.T) {
	s := commandSpec(t, testEngine)
	e := start(t, s)
	l := launchState(t, e)
	if l.CarriageError != "" || len(l.Carriage) != 1 {
		t.Fatalf("carriage %+v (error %q), want one checked entry", l.Carriage, l.CarriageError)
	}
	c := l.Carriage[0]
	if !c.OK || c.Setting != "heartbeat_timeout" || c.Want != "ENGINE_HEARTBEAT_NS=250000000" {
		t.Fatalf("carriage %+v, want heartbeat_timeout carried as ENGINE_HEARTBEAT_NS=250000000", c)
	}
	if want := filepath.Join(s.Dir, "node.json"); len(l.Args) != 3 || l.Args[1] != want || l.Args[2] != "gclog="+filepath.Join(s.Dir, "gc-%p.log") {
		t.Fatalf("args %q, want --config %s and the GC log in the node folder", l.Args, want)
	}
	st := e.State().Status
	if st == nil || st.Config["sync_level"] != float64(1) || st.Config["heartbeat_timeout"] != "250ms" || len(st.Config["peers"].([]any)) != 1 {
		t.Fatalf("engine status config %+v, want the rendered settings", st)
	}
	if fi, err := os.Stat(filepath.Join(s.Dir, "node.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("rendered config: %v %v, want mode 0600", fi, err)
	}
	if cfg, env := e.CommandRendered(); cfg != filepath.Join(s.Dir, "node.json") ||
		!slices.Equal(env, []string{"ENGINE_HEARTBEAT_NS=250000000", "TESTENGINE_PHASE=50ms"}) {
		t.Fatalf("CommandRendered = %q, %q; want the node's node.json and the rendered env alone", cfg, env)
	}
}

// TestCommandDriverCarriageMismatch: a wrapper script that overrides the environment before it
// execs the engine leaves the setting off the process; the carriage check says what it saw.
func TestCommandDriverCarriageMismatch(t *testing.T) {
	wrapper := filepath.Join(t.TempDir(), "wrapper.sh")
	script := "#!/bin/sh\nENGINE_HEARTBEAT_NS=10 exec " + testEngine + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	e := start(t, commandSpec(t, wrapper))
	l := launchState(t, e)
	if len(l.Carriage) != 1 || l.Carriage[0].OK || l.Carriage[0].Seen != "ENGINE_HEARTBEAT_NS=10" {
		t.Fatalf("carriage %+v, want heartbeat_timeout not carried, seen ENGINE_HEARTBEAT_NS=10", l.Carriage)
	}
}

// TestCommandDriverBadTemplate: a template naming a setting that was not given fails the start
// and says which template.
func TestCommandDriverBadTemplate(t *testing.T) {
	s := commandSpec(t, testEngine)
	s.Command.Args = append(s.Command.Args, "--x={{.Settings.nope}}")
	_, err := StartEngine(t.Context(), s)
	if err == nil || !strings.Contains(err.Error(), "args[3]") || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("err %v, want one naming args[3] and the missing setting", err)
	}
}

// TestCommandDriverCauseSourcesOff: a run with the always-on cause sources off says so to the
// engine's templates (the Aeron example's node.properties turns its duty-cycle sampler off).
func TestCommandDriverCauseSourcesOff(t *testing.T) {
	for _, off := range []bool{false, true} {
		s := commandSpec(t, testEngine)
		s.Command.Config = "cause_sources={{if .CauseSourcesOff}}off{{else}}on{{end}}\n"
		s.Config.CauseSourcesOff = off
		_, path, err := (&Engine{spec: s}).render()
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		want := "cause_sources=on\n"
		if off {
			want = "cause_sources=off\n"
		}
		if err != nil || string(b) != want {
			t.Errorf("cause sources off %v: rendered %q (%v), want %q", off, b, err, want)
		}
	}
}
