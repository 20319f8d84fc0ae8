package command

import (
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
)

func TestReferences(t *testing.T) {
	for text, want := range map[string][]string{
		"--sync={{.Settings.sync_level}}":                                     {"sync_level"},
		`{{index .Settings "heartbeat_timeout" | nanos}}`:                     {"heartbeat_timeout"},
		"{{if .Settings.a}}{{range .Peers}}{{$.Settings.b}}{{end}}{{end}}":    {"a", "b"},
		"{{with .Settings}}{{.c}}{{end}}{{nanos .Settings.election_timeout}}": {"election_timeout"},
		"plain {{.Node}}": {},
	} {
		got, err := References("t", text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: references %v, want %v", text, got, want)
		}
	}
	if _, err := References("args[1]", "{{.Settings.x"); err == nil || !strings.Contains(err.Error(), "args[1]") {
		t.Errorf("parse error %v does not name the template", err)
	}
}

func TestRender(t *testing.T) {
	s := Spec{
		Binary: "java",
		Args:   []string{"-Daeron.cluster.leader.heartbeat.timeout={{nanos .Settings.heartbeat_timeout}}", "-jar", "engine.jar"},
		Env:    []string{"NODE={{.Node}}", "SYNC={{.Settings.sync_level}}"},
		Config: "peers={{range $i, $p := .Peers}}{{if $i}},{{end}}{{host $p.RaftAddr}}:{{port $p.RaftAddr}}{{end}}\n",
	}
	r, err := s.Render(Sample(map[string]string{"heartbeat_timeout": "10ms", "sync_level": "2"}))
	if err != nil {
		t.Fatal(err)
	}
	if r.Args[0] != "-Daeron.cluster.leader.heartbeat.timeout=10000000" {
		t.Errorf("args[0] = %q: 10ms must render as nanoseconds", r.Args[0])
	}
	if !reflect.DeepEqual(r.Env, []string{"NODE=node-0", "SYNC=2"}) {
		t.Errorf("env %q", r.Env)
	}
	if string(r.Config) != "peers=127.0.0.11:7000,127.0.0.12:7000\n" {
		t.Errorf("config %q", r.Config)
	}
	want := []Carry{
		{Setting: "heartbeat_timeout", Where: "args[0]", Want: r.Args[0]},
		{Setting: "sync_level", Where: "env SYNC", Want: "SYNC=2"},
	}
	if !reflect.DeepEqual(r.Carry, want) {
		t.Errorf("carry %+v, want %+v", r.Carry, want)
	}
	if _, err := s.Render(Sample(map[string]string{"sync_level": "2"})); err == nil || !strings.Contains(err.Error(), "heartbeat_timeout") {
		t.Errorf("rendering without a referenced setting: %v, want an error naming it", err)
	}
	if _, err := (Spec{Binary: "x", Env: []string{"1BAD=x"}}).Render(Sample(nil)); err == nil {
		t.Error("an env key starting with a digit was accepted")
	}
	if _, err := (Spec{Binary: "x", ConfigFile: "../escape"}).Render(Sample(nil)); err == nil {
		t.Error("a config_file with a path was accepted")
	}
}

// TestCheckCarriage reads a real process's /proc entries.
func TestCheckCarriage(t *testing.T) {
	// sh, not sleep: GNU sleep exits at once on an option it does not know, and a zombie's
	// cmdline and environ read empty. "; :" keeps sh from exec'ing sleep in its place.
	cmd := exec.Command("sh", "-c", "sleep 30; :", "sh", "--marker=1")
	cmd.Env = append(os.Environ(), "RIG_CARRY=yes", "RIG_OTHER=1")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sh: %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// Start returns once the child is forked, not once it has exec'd sh: until then its
	// cmdline and environ are the test binary's.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid))
		if strings.Contains(string(b), "--marker=1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sh never exec'd: cmdline %q", b)
		}
	}
	res, err := CheckCarriage(cmd.Process.Pid, []Carry{
		{Setting: "a", Where: "args[1]", Want: "--marker=1"},
		{Setting: "b", Where: "args[2]", Want: "--marker=2"},
		{Setting: "c", Where: "env RIG_CARRY", Want: "RIG_CARRY=yes"},
		{Setting: "d", Where: "env RIG_OTHER", Want: "RIG_OTHER=2"},
		{Setting: "e", Where: "env RIG_NONE", Want: "RIG_NONE=1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ok := map[string]bool{}
	seen := map[string]string{}
	for _, r := range res {
		ok[r.Setting], seen[r.Setting] = r.OK, r.Seen
	}
	if !ok["a"] || ok["b"] || !ok["c"] || ok["d"] || ok["e"] {
		t.Fatalf("results %+v", res)
	}
	if seen["d"] != "RIG_OTHER=1" || seen["e"] != "absent" || !strings.Contains(seen["b"], "--marker=1") {
		t.Errorf("seen %q", seen)
	}
}

// TestCheckRefusesAgentSecrets: the secrets the agent and the target hand an engine cannot be
// set, and so cannot be read back into results, by a playbook.
func TestCheckRefusesAgentSecrets(t *testing.T) {
	for _, k := range []string{engine.AdminTokenEnv, engine.ClusterSecretEnv} {
		_, err := Check(Spec{Binary: "java", Env: []string{k + "=x"}})
		if err == nil || !strings.Contains(err.Error(), "env "+k) || !strings.Contains(err.Error(), "may not set it") {
			t.Errorf("env %s: got %v, want a refusal naming it", k, err)
		}
	}
}
