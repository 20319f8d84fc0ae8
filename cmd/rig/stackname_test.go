package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without --stack the cloud verbs act on the stack named after the login name, and @NAME is
// $USER-NAME, the config file following the resolved name; other names are taken as given.
func TestStackNamesArePerUserByDefault(t *testing.T) {
	project := t.TempDir()
	for name, profile := range map[string]string{"alice": "own", "alice-dev": "alices-dev", "dev": "shared-dev"} {
		cfg := "config:\n  aws:region: us-east-1\n  aws:profile: " + profile + "\n  rig:owner: alice\n"
		if err := os.WriteFile(filepath.Join(project, "Pulumi."+name+".yaml"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	t.Setenv("PULUMI_BACKEND_URL", "")
	t.Setenv("USER", "alice")
	for _, c := range []struct {
		args          []string
		stack, config string
	}{
		{nil, "alice", "own"},
		{[]string{"--stack", "@dev"}, "alice-dev", "alices-dev"},
		{[]string{"--stack", "@"}, "alice", "own"},
		{[]string{"--stack", "dev"}, "dev", "shared-dev"},
	} {
		out, errOut, err := runRig(t, append([]string{"env", "--project-dir", project}, c.args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", c.args, err, errOut)
		}
		if !strings.Contains(out, "# stack "+c.stack+": ") || !strings.Contains(out, "export AWS_PROFILE='"+c.config+"'") ||
			!strings.Contains(out, "pulumi stack select "+c.stack+"\n") {
			t.Errorf("rig env %v: want stack %s with profile %s:\n%s", c.args, c.stack, c.config, out)
		}
	}

	// A login name is made fit for a stack name; one with nothing left is refused, naming --stack.
	t.Setenv("USER", "Alice Smith")
	if out, _, err := runRig(t, "env", "--project-dir", project); err != nil || !strings.Contains(out, "# stack Alice-Smith: ") {
		t.Errorf("USER with a space: %v\n%s", err, out)
	}
	t.Setenv("USER", "...")
	_, _, err := runRig(t, "env", "--project-dir", project, "--stack", "@dev")
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "give --stack NAME") {
		t.Errorf("unusable login name: %v", err)
	}
	// rig up's config file is the resolved name's.
	t.Setenv("USER", "bob")
	_, _, err = runRig(t, "up", "--project-dir", project, "--dry-run")
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), filepath.Join(project, "Pulumi.bob.yaml")) {
		t.Errorf("rig up --dry-run as bob without --stack: %v", err)
	}
}
