package playbooks

import (
	"encoding/json"
	"fmt"
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

// declared is the settings block the command-driven playbooks below declare, last in their engine
// section so positions before it hold.
const declared = "  settings: {sync_level: {kind: integer, default: 2, min: 0, max: 2}, heartbeat_timeout: {kind: duration}, encode_threads: {kind: integer}}\n"

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
`+declared, goodTemplate)
	p, err := Parse(file, src, testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Engine.Command
	if p.Engine.Driver != "command" || c == nil {
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
		{"setting passed nowhere", "engine:\n  driver: command\n  heartbeat_timeout: 10ms\n  command: {binary: x, config_template: engine.conf.tmpl}\n" + declared, goodTemplate,
			"t.yaml:7:22: engine.heartbeat_timeout", "no template of engine.command passes it to the engine; reference {{index .Settings \"heartbeat_timeout\"}}"},
		{"sync_level always asked", "engine:\n  driver: command\n  command: {binary: x, args: [run]}\n" + declared, "",
			"t.yaml:6:3: engine.sync_level", "no template of engine.command passes it"},
		{"argument template error", "engine:\n  driver: command\n  command: {binary: x, args: [run, \"{{.Settings.sync_level\"], config_template: engine.conf.tmpl}\n" + declared, goodTemplate,
			"t.yaml:7:36: engine.command.args[1]", "template: args[1]:1: unclosed action"},
		{"config template error at its line", "engine:\n  driver: command\n  command: {binary: x, config_template: engine.conf.tmpl}\n" + declared, "a\nb\nc={{.Settings.sync_level}\n",
			"engine.conf.tmpl:3:1: engine.command.config_template", "config"},
		{"unknown setting", "engine:\n  driver: command\n  command: {binary: x, args: [\"{{.Settings.sync_levle}}\"]}\n" + declared, "",
			"t.yaml:7:31: engine.command", `references .Settings.sync_levle, which is not a setting of the command driver (did you mean "sync_level"?)`},
		{"template uses an unset setting", "engine:\n  driver: command\n  command: {binary: x, args: [\"{{.Settings.sync_level}}\", \"{{.Settings.encode_threads}}\"]}\n" + declared, "",
			"t.yaml:7:12: engine.command", "references .Settings.encode_threads, but the playbook leaves engine.encode_threads at the engine's default"},
		{"command without the driver", "engine:\n  command: {binary: x, args: [\"{{.Settings.sync_level}}\"]}\n", "",
			"t.yaml:6:12: engine.command", "engine.driver reference does not start engines from templates; set engine.driver: command"},
		{"driver without command", "engine: {driver: command}\n", "",
			"t.yaml:5:18: engine.driver", "there is no engine.command"},
		{"bad driver", "engine: {driver: docker}\n", "",
			"t.yaml:5:18: engine.driver", `"docker" is not an engine driver; want command or reference`},
		{"missing template file", "engine:\n  driver: command\n  command: {binary: x, config_template: nope.tmpl}\n" + declared, "",
			"t.yaml:7:41: engine.command.config_template", "cannot read the template"},
		{"bad env key", "engine:\n  driver: command\n  command: {binary: x, env: {1X: \"{{.Settings.sync_level}}\"}}\n" + declared, "",
			"t.yaml:7:12: engine.command", "want KEY=VALUE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file, src := commandPlaybook(t, c.engine, c.tmpl)
			_, err := Parse(file, src, testDrivers)
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

// A command-driven playbook declares a setting the rig has never heard of, varies it in the
// matrix, and every run asks for it: canonical in the plan, rendered as the table says for the
// templates (bare nanoseconds), carried by the template that references it.
func TestDeclaredSettingIsAnAxis(t *testing.T) {
	file, src := commandPlaybook(t, `engine:
  driver: command
  settings:
    my.engine.flush.interval: {kind: duration, render: nanos, default: 5ms}
    my.engine.collector: {kind: one-of, values: [g1, zgc], default: g1}
  command:
    binary: x
    args: ['--flush={{index .Settings "my.engine.flush.interval"}}', '-XX:+Use{{index .Settings "my.engine.collector"}}']
matrix: {engine.my.engine.flush.interval: [2ms, 0.004s], engine.my.engine.collector: [g1, zgc]}
`, "")
	p, err := Parse(file, src, testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Engine.Command.Carries, ",") != "my.engine.collector,my.engine.flush.interval" {
		t.Errorf("carries %v", p.Engine.Command.Carries)
	}
	pl, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range pl.Runs {
		s := r.Playbook.Engine.Settings()
		got = append(got, s["my.engine.flush.interval"]+"/"+s["my.engine.collector"])
	}
	if strings.Join(got, " ") != "2ms/g1 2ms/zgc 4ms/g1 4ms/zgc" {
		t.Errorf("runs ask for %v", got)
	}
	tbl := p.Engine.Table()
	f, _ := tbl.Lookup("my.engine.flush.interval")
	if v := f.RenderValue("4ms"); v != "4000000" {
		t.Errorf("4ms renders as %q for the templates, want 4000000 (nanos)", v)
	}
	// A value the kind refuses is refused where it stands in the matrix.
	_, err = Parse(file, []byte(strings.Replace(string(src), "[g1, zgc]}", "[g1, shenandoah]}", 1)), testDrivers)
	if err == nil || !strings.Contains(err.Error(), `matrix.engine.my.engine.collector[1]: "shenandoah" is not one of g1, zgc`) {
		t.Errorf("a value outside one-of: %v", err)
	}
	// So is a declaration that is not one.
	_, err = Parse(file, []byte(strings.Replace(string(src), "kind: duration, render: nanos", "kind: duration, render: hours", 1)), testDrivers)
	if err == nil || !strings.Contains(err.Error(), `engine.settings.my.engine.flush.interval: render "hours" is not a rendering`) {
		t.Errorf("a bad rendering: %v", err)
	}
}

// Engine's JSON keeps every asked value, and reads the form manifests had before drivers owned
// their settings (durations in nanoseconds, zero meaning the engine's default).
func TestEngineJSON(t *testing.T) {
	e := Engine{Values: map[string]string{"snapshot_block": "16777216", "heartbeat_timeout": "250ms"}, drivers: testDrivers}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"values":{"heartbeat_timeout":"250ms","snapshot_block":16777216,"sync_level":2}}`; string(b) != want {
		t.Errorf("json %s, want %s", b, want)
	}
	var back Engine
	if err := json.Unmarshal(b, &back); err != nil || fmt.Sprint(back.Settings()) != fmt.Sprint(e.Settings()) {
		t.Errorf("round trip %v (%v), want %v", back.Settings(), err, e.Settings())
	}
	var legacy Engine
	if err := json.Unmarshal([]byte(`{"driver":"reference","sync_level":0,"snapshot_block":0,"encode_threads":2,"heartbeat_timeout":500000000,`+
		`"election_timeout":0,"udp_rcvbuf":134217728,"udp_nak_delay":1000000,"udp_recv_nice":0}`), &legacy); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(legacy.Settings()); got != "map[encode_threads:2 heartbeat_timeout:500ms sync_level:0 udp_nak_delay:1ms udp_rcvbuf:134217728]" {
		t.Errorf("legacy engine JSON read as %s", got)
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
  sync_level: 1
  command:
    binary: ./start.sh
    config_template: engine.conf.tmpl
`), testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "start.sh"); p.Engine.Command.Binary != want {
		t.Errorf("binary %q, want %q", p.Engine.Command.Binary, want)
	}
}

// The gc action calls POST /gc, an optional admin call: a command-driven engine that does not
// say it answers it (engine.admin_gc) is refused at the entry, with where it stands; one that
// says so, and the reference engine (its driver offers it), are not.
func TestGCActionNeedsTheEngine(t *testing.T) {
	cmd := "engine:\n  driver: command\n  command: {binary: x, args: [\"{{.Settings.sync_level}}\"]}\n" + declared
	timeline := "timeline:\n  - {at: 5s, gc: {node: follower}}\n"
	file, src := commandPlaybook(t, cmd+timeline, "")
	_, err := Parse(file, src, testDrivers)
	if err == nil || !strings.Contains(err.Error(), "t.yaml:10:18: timeline[0].gc: calls POST /gc on the engine, which the command engine does not offer") ||
		!strings.Contains(err.Error(), "engine.admin_gc: true") {
		t.Errorf("a gc on an engine without it: %v", err)
	}
	file, src = commandPlaybook(t, cmd+"  admin_gc: true\n"+timeline, "")
	p, err := Parse(file, src, testDrivers)
	if err != nil {
		t.Fatalf("engine.admin_gc: true refused: %v", err)
	}
	b, _ := json.Marshal(p.Engine)
	var back Engine
	if err := json.Unmarshal(b, &back); err != nil || !back.AdminGC {
		t.Errorf("engine.admin_gc lost on the way through JSON: %s (%v)", b, err)
	}
	if _, err := Parse("t.yaml", []byte(base+timeline), testDrivers); err != nil {
		t.Errorf("a gc on the reference engine refused: %v", err)
	}
	if _, err := Parse("t.yaml", []byte(base+"engine: {admin_gc: maybe}\n"), testDrivers); err == nil || !strings.Contains(err.Error(), `"maybe" is not true or false`) {
		t.Errorf("engine.admin_gc: maybe: %v", err)
	}
}

// engine.recording: on asks the reference engine for its flight recorder (recording_test.go), so
// a window may be set without engine.flight_recorder.
func TestRecordingWindowWithoutFlightRecorder(t *testing.T) {
	p, err := Parse("t.yaml", []byte(base+"engine: {recording: \"on\", flight_recorder_window: 30s}\ntimeline:\n  - {at: 10s, snapshot: {}}\n"), testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Engine.Settings(); s["flight_recorder"] != "true" || s["flight_recorder_window"] != "30s" {
		t.Errorf("settings %v; want the flight recorder asked, with its window", s)
	}
	wantProblem(t, problemsOf(t, base+"engine: {recording: \"off\", flight_recorder_window: 30s}\n"),
		"t.yaml:5:52: engine.flight_recorder_window", "30s is set but engine.flight_recorder is not true")
}

// engine.burst_client routes bursts through the engine's own client: its arguments follow
// engine.command.binary; without engine.command it is refused where it stands.
func TestBurstClient(t *testing.T) {
	cmd := "engine:\n  driver: command\n  command: {binary: /bin/x, args: [\"{{.Settings.sync_level}}\"]}\n" + declared
	file, src := commandPlaybook(t, cmd+"  burst_client: \"-Xmx256m --burst\"\n", "")
	p, err := Parse(file, src, testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.Engine.BurstClient(), " "); got != "/bin/x -Xmx256m --burst" {
		t.Errorf("burst client %q", got)
	}
	if p, err := Parse("t.yaml", []byte(base), testDrivers); err != nil || p.Engine.BurstClient() != nil {
		t.Errorf("the reference engine has a burst client: %v %v", p.Engine.BurstClient(), err)
	}
	if _, err := Parse("t.yaml", []byte(base+"engine: {burst_client: \"--burst\"}\n"), testDrivers); err == nil || !strings.Contains(err.Error(), "engine.burst_client: needs engine.command") {
		t.Errorf("burst_client without a command: %v", err)
	}
}

// engine.book_capture names the engine's own capture of a preloaded book: its arguments follow
// engine.command.binary, the book store names it by the binary's folder, and without
// engine.command it is refused where it stands.
func TestBookCapture(t *testing.T) {
	cmd := "engine:\n  driver: command\n  command: {binary: /opt/aeron/start.sh, args: [\"{{.Settings.sync_level}}\"]}\n" + declared
	file, src := commandPlaybook(t, cmd+"  book_capture: --book\n", "")
	p, err := Parse(file, src, testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.Engine.BookCapture(), " "); got != "/opt/aeron/start.sh --book" || !p.Engine.StoresBooks() || p.Engine.BookStoreName() != "aeron" {
		t.Errorf("book capture %q, stores books %v, named %q", got, p.Engine.StoresBooks(), p.Engine.BookStoreName())
	}
	file, src = commandPlaybook(t, cmd, "")
	if p, err := Parse(file, src, testDrivers); err != nil {
		t.Fatal(err)
	} else if p.Engine.BookCapture() != nil || p.Engine.StoresBooks() {
		t.Errorf("a command engine without book_capture captures %v (stores books %v)", p.Engine.BookCapture(), p.Engine.StoresBooks())
	}
	if p, err := Parse("t.yaml", []byte(base), testDrivers); err != nil || p.Engine.BookCapture() != nil || !p.Engine.StoresBooks() || p.Engine.BookStoreName() != "" {
		t.Errorf("the reference engine: capture %v, name %q: %v", p.Engine.BookCapture(), p.Engine.BookStoreName(), err)
	}
	if _, err := Parse("t.yaml", []byte(base+"engine: {book_capture: \"--book\"}\n"), testDrivers); err == nil || !strings.Contains(err.Error(), "engine.book_capture: needs engine.command") {
		t.Errorf("book_capture without a command: %v", err)
	}
}
