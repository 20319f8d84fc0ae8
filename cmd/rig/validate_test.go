package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/playbooks"
)

// runRig runs rig in-process with args, on a command tree of its own (no flag outlives one
// call), and returns stdout, stderr and the error main would see.
func runRig(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestValidateEmbeddedPrintsPlan(t *testing.T) {
	for _, name := range playbooks.List() {
		out, errOut, err := runRig(t, "validate", name)
		if err != nil {
			t.Fatalf("rig validate %s: %v\n%s", name, err, errOut)
		}
		for _, want := range []string{"playbook   " + name, "cluster", "timeline", "runs", "expected"} {
			if !strings.Contains(out, want) {
				t.Errorf("rig validate %s: plan lacks %q:\n%s", name, want, out)
			}
		}
	}
}

func TestValidateBadPlaybookListsEveryProblemAndChangesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.yaml")
	body := "name: bad\nduration: 30\nload: {probe_rate: -5/s}\nsurprise: 1\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	before, _ := os.ReadDir(wd)

	out, errOut, err := runRig(t, "validate", path)
	if !errors.Is(err, errUsage) {
		t.Fatalf("err = %v, want one wrapping errUsage (exit 2)", err)
	}
	var probs playbooks.Problems
	if !errors.As(err, &probs) || len(probs) != 3 {
		t.Fatalf("errors.As Problems: got %d problems (%v), want 3", len(probs), err)
	}
	for _, want := range []string{
		path + ":2:11: duration: \"30\" has no unit",
		path + ":3:20: load.probe_rate: \"-5/s\" is negative",
		path + ":4:1: surprise: unknown key",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if out != "" {
		t.Errorf("a bad playbook printed a plan:\n%s", out)
	}
	if !strings.Contains(err.Error(), "3 problems, listed above") {
		t.Errorf("error message %q does not summarise the listed problems", err)
	}
	after, _ := os.ReadDir(wd)
	if len(after) != len(before) {
		t.Errorf("validate changed the working directory: %d entries before, %d after", len(before), len(after))
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("validate created files next to the playbook: %v", entries)
	}
}

func TestValidateUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"validate"},
		{"validate", "a", "b"},
		{"validate", "no-such-playbook"},
		{"validate", filepath.Join(t.TempDir(), "missing.yaml")},
	} {
		_, _, err := runRig(t, args...)
		if !errors.Is(err, errUsage) {
			t.Errorf("rig %v: err = %v, want one wrapping errUsage", args, err)
		}
	}
	_, _, err := runRig(t, "validate", "quickstrat")
	if err == nil || !strings.Contains(err.Error(), `did you mean "quickstart"`) {
		t.Errorf("a misspelt name: err = %v, want a suggestion", err)
	}
}

// A stack config that is not valid YAML is reported with file:line:column before the plan.
func TestValidateStackConfigSyntaxBeforePlan(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"dup":  "config:\n  aws:region: us-east-1\n  rig:owner: a\n  rig:owner: b\n",
		"junk": "config:\n  aws:region: us-east-1\n  rig:owner: \x00\x01\xff\n",
	} {
		path := filepath.Join(dir, "Pulumi."+name+".yaml")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		var both bytes.Buffer
		root := newRootCmd()
		root.SetOut(&both)
		root.SetErr(&both)
		root.SetArgs([]string{"validate", "quickstart", "--stack-config", path})
		err := root.ExecuteContext(context.Background())
		if !errors.Is(err, errUsage) {
			t.Fatalf("%s: err %v, want usage", name, err)
		}
		text := both.String()
		pos, plan := strings.Index(text, path+":"), strings.Index(text, "playbook   quickstart")
		if pos < 0 || plan < 0 || pos > plan {
			t.Fatalf("%s: want the file:line:col error before the plan:\n%s", name, text)
		}
		if !strings.Contains(text, path+":4:3:") && !strings.Contains(text, path+":3:14:") {
			t.Errorf("%s: no line:column in %q", name, text[pos:pos+len(path)+40])
		}
	}
}

// A flag set in one call is not there in the next: each call builds its own command tree.
func TestFlagsDoNotOutliveACall(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "Pulumi.missing.yaml")
	if _, _, err := runRig(t, "validate", "quickstart", "--stack-config", bad); err == nil {
		t.Fatalf("validate with a missing --stack-config %s passed", bad)
	}
	if _, errOut, err := runRig(t, "validate", "quickstart"); err != nil {
		t.Fatalf("validate after a call with --stack-config: %v\n%s", err, errOut)
	}
}

// `rig check` is the conformance check; `rig engine check` still runs it, saying it is deprecated.
func TestCheckAndItsDeprecatedAlias(t *testing.T) {
	for _, args := range [][]string{{"check"}, {"engine", "check"}} {
		out, errOut, err := runRig(t, args...)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--playbook: required") {
			t.Errorf("rig %v without --playbook: %v, want the usage error naming --playbook", args, err)
		}
		if deprecated := strings.Contains(out+errOut, "deprecated, use `rig check`"); deprecated != (args[0] == "engine") {
			t.Errorf("rig %v: deprecation notice %v:\n%s%s", args, deprecated, out, errOut)
		}
	}
}
