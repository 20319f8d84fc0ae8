package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/agent/supervise/supervisetest"
	"github.com/rig-dev/rig/conformance"
)

var allChecks = []string{conformance.CheckStatusFields, conformance.CheckLaunchPhases, conformance.CheckOneLeader,
	conformance.CheckSettings, conformance.CheckLoadHashes, conformance.CheckBurst, conformance.CheckSnapshotIndex, conformance.CheckRelaunchPhases,
	conformance.CheckStepDown, conformance.CheckFinalHashes}

// TestEngineCheckReference: the reference engine, driven through the command driver as a
// separate binary, passes every check of the conformance suite.
func TestEngineCheckReference(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	cmd := exec.Command(rigBin, "check", "--playbook", commandPlaybook(t, "../../playbooks/testdata/reference-engine.json.tmpl"),
		"--first-address", "127.0.11.11", "--results", t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("rig check:\n%s", stdout.String())
	if err != nil {
		t.Fatalf("rig check: %v\n%s", err, stderr.String())
	}
	for _, c := range allChecks {
		if !hasRow(stdout.String(), c, "pass") {
			t.Errorf("no passing row for %q", c)
		}
	}
	assertNoProcesses(t, "reference-engine")
}

// TestEngineCheckNamesBrokenPhaseOrder: an engine that goes replaying → restoring fails the
// suite, and the failure names the check and what was seen.
func TestEngineCheckNamesBrokenPhaseOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	dir := t.TempDir()
	bin, err := supervisetest.BuildEngine(dir)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := filepath.Join(dir, "testengine.json.tmpl")
	os.WriteFile(tmpl, []byte(`{"node": "{{.Node}}", "dir": "{{.DataDir}}", "admin_addr": "{{.AdminAddr}}", "sync_level": {{.Settings.sync_level}}}`), 0o644)
	pb := writePlaybook(t, `name: broken-phases
cluster: {servers: 3, clients: 1}
load: {probe_rate: 100/s}
duration: 10s
engine:
  driver: command
  settings: {sync_level: {kind: integer, default: 2}}
  command:
    binary: `+bin+`
    args: [--config, "{{.ConfigFile}}"]
    env: {TESTENGINE_PHASES: "starting,replaying,restoring,catching-up", TESTENGINE_PHASE: 150ms}
    config_template: `+tmpl+`
`)
	cmd := exec.Command(rigBin, "check", "--playbook", pb, "--first-address", "127.0.12.11", "--results", t.TempDir(), "--timeout", "10s")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	t.Logf("rig check:\n%s\n%s", stdout.String(), stderr.String())
	if err == nil {
		t.Fatal("rig check passed an engine that breaks the phase order")
	}
	if !hasRow(stdout.String(), conformance.CheckLaunchPhases, "FAIL") || !strings.Contains(stdout.String(), "restoring after replaying") {
		t.Errorf("the table does not fail %q with what it saw", conformance.CheckLaunchPhases)
	}
	if !strings.Contains(stderr.String(), conformance.CheckLaunchPhases) {
		t.Errorf("the error does not name the failed check: %s", stderr.String())
	}
	assertNoProcesses(t, bin)
}

// TestEngineCheckOwnSetting: a command-driven playbook declares a setting the rig has never
// heard of (a duration the engine takes as bare nanoseconds). The suite checks it by carriage
// (the environment, in /proc) and by effect (GET /status config); an engine that reports its
// own default instead fails the settings check naming the setting, the value asked and the
// value in effect.
func TestEngineCheckOwnSetting(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	t.Parallel() // its own addresses and folders: it may run beside the other end-to-end runs
	dir := t.TempDir()
	bin, err := supervisetest.BuildEngine(dir)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := filepath.Join(dir, "own.json.tmpl")
	os.WriteFile(tmpl, []byte(`{"node": "{{.Node}}", "dir": "{{.DataDir}}", "admin_addr": "{{.AdminAddr}}", "my.engine.flush.interval": {{index .Settings "my.engine.flush.interval"}}}`), 0o644)
	check := func(t *testing.T, first, ignore, phase, timeout string) string {
		pb := writePlaybook(t, `name: own-setting
cluster: {servers: 3, clients: 1}
load: {probe_rate: 100/s}
duration: 10s
engine:
  driver: command
  settings:
    my.engine.flush.interval: {kind: duration, render: nanos, default: 5ms}
  my.engine.flush.interval: 2ms
  command:
    binary: `+bin+`
    args: [--config, "{{.ConfigFile}}"]
    env: {FLUSH_NS: '{{index .Settings "my.engine.flush.interval"}}', TESTENGINE_IGNORE: "`+ignore+`", TESTENGINE_PHASE: `+phase+`}
    config_template: `+tmpl+`
`)
		res := t.TempDir()
		cmd := exec.Command(rigBin, "engine", "check", "--playbook", pb, "--first-address", first, "--results", res, "--timeout", timeout)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Run() // the test engine speaks no client protocol: later checks fail either way
		t.Logf("rig engine check:\n%s\n%s", stdout.String(), stderr.String())
		assertNoProcessesUnder(t, res) // the other check runs beside this one: only this one's
		return stdout.String()
	}
	// The two checks use their own addresses and folders, so they run side by side. Their engines
	// are ready 200 ms after they start; every wait after the settings check (one leader among
	// three, a preload, a burst) times out on an engine without a client protocol, so --timeout
	// is what each of those costs: 3 s, not 5 s.
	t.Run("in effect", func(t *testing.T) {
		t.Parallel()
		out := check(t, "127.0.61.11", "", "50ms", "3s")
		if !hasRow(out, conformance.CheckSettings, "pass") || !strings.Contains(out, "my.engine.flush.interval=2ms carried (/proc) and in effect") {
			t.Errorf("the settings check does not pass the declared setting by carriage and effect")
		}
	})
	t.Run("ignored", func(t *testing.T) {
		t.Parallel()
		out := check(t, "127.0.62.11", "my.engine.flush.interval=5000000", "50ms", "3s")
		want := "engine.my.engine.flush.interval is 5ms in effect (GET /status config.my.engine.flush.interval), the playbook asked for 2ms"
		if !hasRow(out, conformance.CheckSettings, "FAIL") || !strings.Contains(out, want) {
			t.Errorf("the settings check does not fail naming the setting, asked and in effect (%q)", want)
		}
	})

	// A setting that keeps the engine from getting ready (an engine an hour from ready stands for a
	// cluster that cannot elect) ends the launch wait as soon as a status reports it, on every node
	// at once, instead of after a phase timeout per node, one after another.
	t.Run("ignored, never ready", func(t *testing.T) {
		t.Parallel()
		out := check(t, "127.0.63.11", "my.engine.flush.interval=5000000", "1h", "10m")
		want := "engine.my.engine.flush.interval is 5ms in effect (GET /status config.my.engine.flush.interval), the playbook asked for 2ms"
		if !hasRow(out, conformance.CheckLaunchPhases, "FAIL") || strings.Count(out, "stopped waiting: a setting is not in effect") != 3 {
			t.Errorf("the launch wait does not stop on every node naming the setting not in effect")
		}
		if !hasRow(out, conformance.CheckSettings, "FAIL") || !strings.Contains(out, want) {
			t.Errorf("the settings check does not fail naming the setting, asked and in effect (%q)", want)
		}
	})
}

func hasRow(table, check, result string) bool {
	for _, l := range strings.Split(table, "\n") {
		if rest, ok := strings.CutPrefix(l, check); ok && strings.HasPrefix(strings.TrimSpace(rest), result) {
			return true
		}
	}
	return false
}
