package runner

import (
	"errors"
	"strings"
	"testing"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/playbooks"
)

// A setting the engine already reports at "starting" with another value fails the wait for
// readiness at once, naming node, setting, in effect and asked; one it does not report yet is
// left for the check after readiness, and a node that has not answered is not checked.
func TestEffectBeforeReady(t *testing.T) {
	pb, err := playbooks.Parse("hb.yaml", []byte("name: hb\ncluster: {servers: 3, clients: 1}\nengine: {heartbeat_timeout: 2s}\nload: {probe_rate: 100/s}\nduration: 10s\n"), testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	r := &run{pb: pb, nodes: map[string]*server{
		"node-0": {status: engine.Status{Phase: engine.PhaseStarting, Config: engine.Reported{"heartbeat_timeout": "2000ns"}}},
		"node-1": {status: engine.Status{Phase: engine.PhaseStarting, Config: engine.Reported{"node": "node-1"}}},
		"node-2": {},
	}}
	check := r.effectBeforeReady()
	if check == nil {
		t.Fatal("no check for the reference engine's settings")
	}
	err = check("node-0")
	if !errors.Is(err, ErrSettingNotInEffect) {
		t.Fatalf("node-0 reports heartbeat_timeout 2µs: got %v, want ErrSettingNotInEffect", err)
	}
	want := "node-0: engine.heartbeat_timeout is 2µs in effect (GET /status config.heartbeat_timeout), the playbook asked for 2s"
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "phase starting") {
		t.Errorf("error %q does not say %q and the phase", err, want)
	}
	for _, n := range []string{"node-1", "node-2"} {
		if err := check(n); err != nil {
			t.Errorf("%s (setting not reported yet / no answer): %v", n, err)
		}
	}
}

// A property the engine reads nowhere (Aeron's ignored_properties: a -D no configuration class
// declares) stops the run at the node's first status, before load, naming the property and the
// playbook argument that passed it with its position.
func TestIgnoredPropertyRefused(t *testing.T) {
	pb, err := playbooks.Parse("ign.yaml", []byte(`name: ign
cluster: {servers: 3, clients: 1}
engine:
  driver: command
  command:
    binary: /bin/true
    args:
      - -Xmx512m
      - -Daeron.cluster.leader.heartbeat.intervall=20ms
    env: {JAVA_OPTS: "-Daeron.typo.one=1 -Xss1m"}
load: {probe_rate: 100/s}
duration: 10s
`), testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	r := &run{pb: pb, nodes: map[string]*server{
		"node-0": {status: engine.Status{Phase: engine.PhaseStarting, Config: engine.Reported{"node": "node-0"},
			IgnoredProperties: []string{"aeron.cluster.leader.heartbeat.intervall", "aeron.typo.one", "aeron.from.script"}}},
		"node-1": {status: engine.Status{Phase: engine.PhaseStarting, Config: engine.Reported{"node": "node-1"}}},
	}}
	check := r.effectBeforeReady()
	if check == nil {
		t.Fatal("no check for a command engine")
	}
	err = check("node-0")
	if !errors.Is(err, ErrSettingNotInEffect) {
		t.Fatalf("node-0 reports ignored properties: got %v, want ErrSettingNotInEffect", err)
	}
	for _, want := range []string{
		`node-0: aeron.cluster.leader.heartbeat.intervall is read by no configuration of the engine`,
		`it came from engine.command.args[1] "-Daeron.cluster.leader.heartbeat.intervall=20ms" (ign.yaml:9:9)`,
		`aeron.typo.one is read by no configuration of the engine (GET /status ignored_properties): a misspelt or retired name would do nothing; it came from engine.command.env JAVA_OPTS (ign.yaml:`,
		`aeron.from.script is read by no configuration of the engine (GET /status ignored_properties): a misspelt or retired name would do nothing; it came from no argument or variable of the playbook's engine.command`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error\n%v\ndoes not say\n%s", err, want)
		}
	}
	if err := check("node-1"); err != nil {
		t.Errorf("node-1 reads everything it was given: %v", err)
	}
}
