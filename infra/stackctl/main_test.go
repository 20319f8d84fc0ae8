package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/infra/cloudgc/cloudgctest"
	"github.com/rig-dev/rig/inventory"
)

// These tests run rig-stack's verbs against a `pulumi` executable on PATH that answers like the
// CLI, so the Automation API's real command path (exec, --non-interactive, JSON parsing) is used.
const fakePulumi = `#!/bin/sh
echo "$*" >> "$FAKE_LOG"
[ "$1" = "--non-interactive" ] && shift
case "$*" in
  version) echo v3.200.0 ;;
  "stack ls --json") echo '[{"name":"dev","current":false,"updateInProgress":false,"resourceCount":21}]' ;;
  "stack select --stack dev") ;;
  "stack output --json --stack dev"|"stack output --json --show-secrets --stack dev") cat "$FAKE_OUTPUTS" ;;
  "stack select --stack "*) echo "error: no stack named '$4' found" >&2; exit 255 ;;
  *) echo "fake pulumi: unsupported: $*" >&2; exit 255 ;;
esac
`

const outputs = `{"bucket":"rig-dev-1","expiresAt":"2020-01-01T08:00:00Z","retainBucket":true,
"inventory":{"target":"aws","bucket":"rig-dev-1","expires_at":"2020-01-01T08:00:00Z","nodes":[
 {"name":"node-0","role":"server","address":"198.51.100.10","private_address":"10.42.1.10",
  "ssh":{"user":"ec2-user","port":22,"host_key":"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA"},
  "data_device":"vol-0abc","device_name":"/dev/sdf","instance_type":"c6in.16xlarge"}]}}`

type env struct {
	project, state, log string
}

func setup(t *testing.T) env {
	t.Helper()
	root := t.TempDir()
	e := env{project: filepath.Join(root, "repo"), state: filepath.Join(root, "state"), log: filepath.Join(root, "calls.log")}
	bin := filepath.Join(root, "bin")
	for _, d := range []string{e.project, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	proj, err := os.ReadFile("../../Pulumi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		filepath.Join(e.project, "Pulumi.yaml"): string(proj),
		filepath.Join(bin, "pulumi"):            fakePulumi,
		filepath.Join(root, "outputs.json"):     outputs,
	}
	for p, b := range files {
		if err := os.WriteFile(p, []byte(b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("FAKE_LOG", e.log)
	t.Setenv("FAKE_OUTPUTS", filepath.Join(root, "outputs.json"))
	t.Setenv("PULUMI_HOME", filepath.Join(root, "pulumi-home"))
	t.Setenv("PULUMI_BACKEND_URL", "")
	t.Setenv("PULUMI_CONFIG_PASSPHRASE", "")
	t.Setenv("PULUMI_CONFIG_PASSPHRASE_FILE", "")
	t.Setenv("XDG_STATE_HOME", e.state)
	return e
}

func run(t *testing.T, e env, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(""))
	root.SetArgs(append(args, "--project-dir", e.project))
	err := root.Execute()
	return out.String(), err
}

func TestStatusOfAnEmptyBackendTouchesNothing(t *testing.T) {
	e := setup(t)
	out, err := run(t, e, "status")
	if err != nil || !strings.Contains(out, "no stacks") {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := os.Stat(e.state); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("status created the backend folder")
	}
	calls, _ := os.ReadFile(e.log)
	if strings.Contains(string(calls), "stack ls") {
		t.Fatalf("listed stacks of a backend that does not exist: %s", calls)
	}
}

func TestGCDryRunAndInventoryThroughTheCLI(t *testing.T) {
	e := setup(t)
	if err := os.MkdirAll(filepath.Join(e.state, "rig", "pulumi"), 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, e, "gc", "--dry-run")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(out, "dev") || !strings.Contains(out, "expired") || !strings.Contains(out, "1 expired stack(s) would be destroyed") {
		t.Fatalf("gc --dry-run said:\n%s", out)
	}
	calls, _ := os.ReadFile(e.log)
	if strings.Contains(string(calls), "destroy") {
		t.Fatalf("dry run destroyed: %s", calls)
	}
	if !strings.Contains(string(calls), "--non-interactive stack ls --json") {
		t.Fatalf("unexpected command path: %s", calls)
	}

	out, err = run(t, e, "inventory", "--stack", "dev")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var inv inventory.Inventory
	if err := json.Unmarshal([]byte(out), &inv); err != nil || inv.Target != "aws" || len(inv.Nodes) != 1 {
		t.Fatalf("inventory %q: %v", out, err)
	}

	// gc without --dry-run asks first; an empty answer destroys nothing.
	out, err = run(t, e, "gc")
	if err != nil || !strings.Contains(out, "[y/N]") || !strings.Contains(out, "nothing destroyed") {
		t.Fatalf("%v: %s", err, out)
	}
}

func TestUsageErrors(t *testing.T) {
	e := setup(t)
	if err := os.MkdirAll(filepath.Join(e.state, "rig", "pulumi"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"up"}, {"down"}, {"down", "--stack", "nope"}, {"up", "--stack", "missing"}} {
		out, err := run(t, e, args...)
		if !errors.Is(err, errUsage) {
			t.Errorf("%v: want a usage error, got %v: %s", args, err, out)
		}
	}
}

// rig-stack gc from the cloud side, end to end: the SDK's default configuration reaches a fake
// AWS through AWS_ENDPOINT_URL_<SERVICE>; an expired cluster of a stack this backend does not
// know is listed with its cost, kept by a dry run, deleted with --yes; the known live stack and
// the buckets stay.
func TestGCFromTheCloudSide(t *testing.T) {
	e := setup(t)
	if err := os.MkdirAll(filepath.Join(e.state, "rig", "pulumi"), 0o700); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(t.TempDir(), "outputs.json")
	if err := os.WriteFile(live, []byte(strings.ReplaceAll(outputs, "2020-01-01", "2999-01-01")), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKE_OUTPUTS", live)
	aws := cloudgctest.New(t, "us-east-1")
	aws.Cluster("lost", "2020-01-01T00:00:00Z", []string{"c6in.large"}, 2)
	aws.Cluster("dev", "2999-01-01T00:00:00Z", []string{"c6in.large"}, 0)
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL_EC2": aws.EC2URL, "AWS_ENDPOINT_URL_RESOURCE_GROUPS_TAGGING_API": aws.TagURL,
		"AWS_ENDPOINT_URL_S3": aws.S3URL, "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": filepath.Join(e.state, "none"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(e.state, "none"), "AWS_PROFILE": "", "AWS_REGION": "",
	} {
		t.Setenv(k, v)
	}
	out, err := run(t, e, "gc", "--dry-run", "--region", "us-east-1")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// $0.1951/h: a c6in.large with a public IPv4 address (0.1134 + 0.005) and its gp3 200 GiB,
	// 4,000 IOPS, 1,000 MiB/s volume (0.0767) at the us-east-1 prices of infra/spec.
	for _, want := range []string{"cloud side: resources tagged rig-stack in us-east-1", "lost", "i-lost0", "c6in.large",
		"expired: delete", "rig-lost-results", "2 objects", "dry run: 9 resource(s) costing $0.1951/h would be deleted"} {
		if !strings.Contains(out, want) {
			t.Errorf("gc --dry-run lacks %q:\n%s", want, out)
		}
	}
	if m := aws.Mutations(); len(m) != 0 {
		t.Fatalf("dry run changed %v", m)
	}
	out, err = run(t, e, "gc", "--yes", "--region", "us-east-1")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	left := strings.Join(aws.Remaining(), " ")
	if strings.Contains(left, "lost") || !strings.Contains(left, "vpc-dev") || !strings.Contains(out, "9 resource(s) deleted") {
		t.Fatalf("left %s after:\n%s", left, out)
	}
}

// A stack name outside the grammar is refused by every verb that takes one, naming --stack,
// before pulumi runs or the backend folder is made.
func TestStackNameGrammar(t *testing.T) {
	e := setup(t)
	for _, name := range []string{"../x", "-rf", "a/b"} {
		for _, args := range [][]string{{"up", "--stack=" + name}, {"down", "--stack=" + name},
			{"extend", "--stack=" + name, "--hours", "1"}, {"inventory", "--stack=" + name}} {
			out, err := run(t, e, args...)
			if !errors.Is(err, errUsage) || !errors.Is(err, inventory.ErrBadName) || !strings.Contains(err.Error(), "--stack") {
				t.Errorf("%v: want a usage error naming --stack, got %v: %s", args, err, out)
			}
		}
	}
	if calls, err := os.ReadFile(e.log); err == nil {
		t.Errorf("pulumi ran: %s", calls)
	}
	if _, err := os.Stat(e.state); !errors.Is(err, os.ErrNotExist) {
		t.Error("the backend folder was made")
	}
}
