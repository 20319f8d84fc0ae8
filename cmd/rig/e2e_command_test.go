package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// commandPlaybook is shortQuickstart with the reference engine started through the command
// driver, as a separate binary: settings reach it through a rendered config file (and one
// through the environment, which the carriage check reads in /proc).
func commandPlaybook(t *testing.T, configTemplate string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "reference-engine")
	b, err := os.ReadFile(rigBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	tmpl, err := filepath.Abs(configTemplate)
	if err != nil {
		t.Fatal(err)
	}
	settings, err := filepath.Abs("../../playbooks/testdata/reference-engine.settings.yaml")
	if err != nil {
		t.Fatal(err)
	}
	engine := `engine:
  driver: command
  settings_file: ` + settings + `
  sync_level: 1
  heartbeat_timeout: 400ms
  election_timeout: 800ms
  command:
    binary: ` + bin + `
    args: [engine, --config, "{{.ConfigFile}}"]
    env: {ENGINE_HEARTBEAT_NS: "{{nanos .Settings.heartbeat_timeout}}"}
    config_template: ` + tmpl + `
    config_file: rendered.json
`
	return writePlaybook(t, strings.Replace(shortQuickstart, "engine: {sync_level: 1}\n", engine, 1))
}

// TestCommandDriverEndToEnd: the reference engine as a separate binary through the command
// driver gives the same kind of run as the built-in driver.
func TestCommandDriverEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run takes ~40 s")
	}
	t.Parallel() // its own addresses and folders: it may run beside the other end-to-end runs
	res := t.TempDir()
	stdout := runRigOK(t, "run", "--results", res, "--first-address", "127.0.66.11",
		commandPlaybook(t, "../../playbooks/testdata/reference-engine.json.tmpl"))
	dir := runDirOf(t, stdout)
	checkQuickstartRun(t, dir)
	b, err := os.ReadFile(filepath.Join(dir, "node-0", "engine.log"))
	if err != nil || !bytes.Contains(b, []byte("reference-engine")) || !bytes.Contains(b, []byte("rendered.json")) {
		t.Errorf("node-0's engine log does not show the separate binary started on the rendered config (%v)", err)
	}
	assertNoProcessesUnder(t, res)
}

// TestCommandDriverSettingWithoutEffect: a setting that reaches the process (carried in its
// environment) but not the engine's effective config fails the run, naming the setting.
func TestCommandDriverSettingWithoutEffect(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	b, err := os.ReadFile("../../playbooks/testdata/reference-engine.json.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	// The config file hard-codes the engine's default: the playbook's value never takes effect.
	broken := strings.Replace(string(b), `"heartbeat_timeout": "{{.Settings.heartbeat_timeout}}"`, `"heartbeat_timeout": "500ms"`, 1)
	tmpl := filepath.Join(t.TempDir(), "broken.json.tmpl")
	if err := os.WriteFile(tmpl, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	res := t.TempDir()
	cmd := exec.Command(rigBin, "run", "-q", "--results", res, "--first-address", "127.0.68.11", commandPlaybook(t, tmpl))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("rig run succeeded with a setting that did not take effect:\n%s", stdout.String())
	}
	want := "engine.heartbeat_timeout is 500ms in effect (GET /status config.heartbeat_timeout), the playbook asked for 400ms"
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr does not name the setting (%q):\n%s", want, stderr.String())
	}
	noTmpFiles(t, res)
	assertNoProcesses(t, "reference-engine")
}
