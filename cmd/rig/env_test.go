package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// rig env prints exports that, evaluated by a real shell, give pulumi the backend rig chose (its
// local folder here, even with a pulumi login on record), the passphrase file and the stack's
// aws:profile; --backend wins over the folder.
func TestEnvExportsWhatRigUses(t *testing.T) {
	root := t.TempDir()
	project, state, home := filepath.Join(root, "repo"), filepath.Join(root, "state"), filepath.Join(root, "pulumi-home")
	for _, d := range []string{project, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(project, "Pulumi.yaml"):     "name: rig\nruntime: go\n",
		filepath.Join(project, "Pulumi.dev.yaml"): "config:\n  aws:region: us-east-1\n  aws:profile: it's-mine\n  rig:owner: alice\n",
		filepath.Join(home, "credentials.json"):   `{"current":"https://api.pulumi.com"}`,
	}
	for p, b := range files {
		if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("XDG_STATE_HOME", state)
	t.Setenv("PULUMI_HOME", home)
	t.Setenv("PULUMI_BACKEND_URL", "")
	t.Setenv("PULUMI_CONFIG_PASSPHRASE", "")
	t.Setenv("PULUMI_CONFIG_PASSPHRASE_FILE", "")
	shell := func(args ...string) string {
		t.Helper()
		out, _, err := runRig(t, append([]string{"env", "--stack", "dev", "--project-dir", project}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := exec.Command("sh", "-c", out+"\necho \"$PULUMI_BACKEND_URL|$PULUMI_CONFIG_PASSPHRASE_FILE|$AWS_PROFILE\"").Output()
		if err != nil {
			t.Fatalf("sh: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(got))
	}
	dir := filepath.Join(state, "rig", "pulumi")
	if got, want := shell(), "file://"+dir+"|"+filepath.Join(dir, "passphrase")+"|it's-mine"; got != want {
		t.Errorf("exports give %q, want %q", got, want)
	}
	if got, want := shell("--backend", "s3://team-state/rig?region=us-east-2"), "s3://team-state/rig?region=us-east-2||it's-mine"; got != want {
		t.Errorf("with --backend, exports give %q, want %q", got, want)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("rig env created %s", state)
	}
}
