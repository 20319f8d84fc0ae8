package playbooks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// commandPlaybook writes a playbook (base + engine section) and a config template next to it.
func commandPlaybook(t *testing.T, engine, tmpl string) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "engine.conf.tmpl"), []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "t.yaml"), []byte(base + engine)
}

const goodTemplate = "sync={{.Settings.sync_level}}\nnode={{.Node}}\n"

func TestCommandDriverParses(t *testing.T) {
	file, src := commandPlaybook(t, `engine:
  driver: command
  heartbeat_timeout: 10ms
  command:
    binary: bin/my-engine
    args: [--config, "{{.ConfigFile}}"]
    env: {HB_NS: "{{nanos .Settings.heartbeat_timeout}}", NODE: "{{.Node}}"}
    config_template: engine.conf.tmpl
    config_file: my.conf
`, goodTemplate)
	p, err := Parse(file, src)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Engine.Command
	if p.Engine.Driver != DriverCommand || c == nil {
		t.Fatalf("engine %+v", p.Engine)
	}
	if c.Binary != filepath.Join(filepath.Dir(file), "bin/my-engine") {
		t.Errorf("binary %q: a path with a slash is relative to the playbook's folder", c.Binary)
	}
	if c.Config != goodTemplate || c.ConfigFile != "my.conf" {
		t.Errorf("config %q file %q", c.Config, c.ConfigFile)
	}
	if strings.Join(c.Env, " ") != "HB_NS={{nanos .Settings.heartbeat_timeout}} NODE={{.Node}}" {
		t.Errorf("env %q, want file order", c.Env)
	}
	if strings.Join(c.Carries, ",") != "heartbeat_timeout,sync_level" {
		t.Errorf("carries %v", c.Carries)
	}
	if s := p.Engine.Settings(); s["heartbeat_timeout"] != "10ms" || s["sync_level"] != "2" {
		t.Errorf("settings %v", s)
	}
}

func TestCommandDriverProblems(t *testing.T) {
	cases := []struct {
		name, engine, tmpl string
		at, msg            string // at: the position after the playbook's folder
	}{
		{"setting passed nowhere", "engine:\n  driver: command\n  heartbeat_timeout: 10ms\n  command: {binary: x, config_template: engine.conf.tmpl}\n", goodTemplate,
			"t.yaml:7:22: engine.heartbeat_timeout", "no template of engine.command passes it to the engine; reference {{.Settings.heartbeat_timeout}}"},
		{"sync_level always asked", "engine:\n  driver: command\n  command: {binary: x, args: [run]}\n", "",
			"t.yaml:6:3: engine.sync_level", "no template of engine.command passes it"},
		{"argument template error", "engine:\n  driver: command\n  command: {binary: x, args: [run, \"{{.Settings.sync_level\"], config_template: engine.conf.tmpl}\n", goodTemplate,
			"t.yaml:7:36: engine.command.args[1]", "template: args[1]:1: unclosed action"},
		{"config template error at its line", "engine:\n  driver: command\n  command: {binary: x, config_template: engine.conf.tmpl}\n", "a\nb\nc={{.Settings.sync_level}\n",
			"engine.conf.tmpl:3:1: engine.command.config_template", "config"},
		{"unknown setting", "engine:\n  driver: command\n  command: {binary: x, args: [\"{{.Settings.sync_levle}}\"]}\n", "",
			"t.yaml:7:31: engine.command", `references .Settings.sync_levle, which is not an engine setting (did you mean "sync_level"?)`},
		{"template uses an unset setting", "engine:\n  driver: command\n  command: {binary: x, args: [\"{{.Settings.sync_level}}\", \"{{.Settings.encode_threads}}\"]}\n", "",
			"t.yaml:7:12: engine.command", "references .Settings.encode_threads, but the playbook leaves engine.encode_threads at the engine's default"},
		{"command without the driver", "engine:\n  command: {binary: x, args: [\"{{.Settings.sync_level}}\"]}\n", "",
			"t.yaml:6:12: engine.command", "engine.driver is reference; set engine.driver: command"},
		{"driver without command", "engine: {driver: command}\n", "",
			"t.yaml:5:18: engine.driver", "there is no engine.command"},
		{"bad driver", "engine: {driver: docker}\n", "",
			"t.yaml:5:18: engine.driver", `"docker" is not an engine driver; want reference or command`},
		{"missing template file", "engine:\n  driver: command\n  command: {binary: x, config_template: nope.tmpl}\n", "",
			"t.yaml:7:41: engine.command.config_template", "cannot read the template"},
		{"bad env key", "engine:\n  driver: command\n  command: {binary: x, env: {1X: \"{{.Settings.sync_level}}\"}}\n", "",
			"t.yaml:7:12: engine.command", "want KEY=VALUE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file, src := commandPlaybook(t, c.engine, c.tmpl)
			_, err := Parse(file, src)
			if err == nil {
				t.Fatalf("accepted:\n%s", src)
			}
			probs, _ := err.(Problems)
			for _, p := range probs {
				s := strings.TrimPrefix(p.String(), filepath.Dir(file)+"/")
				if strings.HasPrefix(s, c.at+": ") && strings.Contains(s, c.msg) {
					return
				}
			}
			t.Errorf("no problem at %q containing %q; got:\n%v", c.at, c.msg, err)
		})
	}
}

// TestCommandBinaryAbsolute: a playbook opened by a relative path still names its engine
// binary absolutely, since the agent starts the engine in the node folder, not here.
func TestCommandBinaryAbsolute(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "engine.conf.tmpl"), []byte(goodTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, filepath.Join(dir, "t.yaml"))
	if err != nil {
		t.Skipf("no relative path from %s to %s: %v", wd, dir, err)
	}
	p, err := Parse(rel, []byte(base+`engine:
  driver: command
  command:
    binary: ./start.sh
    config_template: engine.conf.tmpl
`))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "start.sh"); p.Engine.Command.Binary != want {
		t.Errorf("binary %q, want %q", p.Engine.Command.Binary, want)
	}
}
