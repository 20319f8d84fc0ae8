package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// rig up from a script (standard input not a terminal) without --yes exits 2 saying to pass
// --yes, before the pulumi CLI or the stack driver runs.
func TestUpRefusesWithoutYesWhenItCannotAsk(t *testing.T) {
	root := t.TempDir()
	project, bin := filepath.Join(root, "repo"), filepath.Join(root, "bin")
	ran := filepath.Join(root, "ran.log")
	for _, d := range []string{project, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	logger := "#!/bin/sh\necho \"$0 $*\" >> " + ran + "\n"
	for p, b := range map[string]string{
		filepath.Join(project, "Pulumi.yaml"):     "name: rig\nruntime: go\n",
		filepath.Join(project, "Pulumi.dev.yaml"): "config:\n  aws:region: us-east-1\n  rig:owner: alice\n",
		filepath.Join(bin, "pulumi"):              logger,
		filepath.Join(bin, "rig-stack"):           logger,
	} {
		if err := os.WriteFile(p, []byte(b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(rigBin, "up", "--stack", "dev", "--project-dir", project)
	cmd.Stdin = strings.NewReader("y\n") // a pipe: an answer nobody typed
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "RIG_STACK_DRIVER="+filepath.Join(bin, "rig-stack"))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "pass --yes") ||
		!strings.Contains(string(out), "nothing was created") {
		t.Fatalf("rig up without --yes from a pipe: %v\n%s\nwant exit 2 saying to pass --yes", err, out)
	}
	if b, err := os.ReadFile(ran); err == nil {
		t.Fatalf("ran before refusing: %s", b)
	}
}
