package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/rig-dev/rig/infra/awsemu"
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

// rig-stack gc from the cloud side, end to end against the emulator: the SDK's default
// configuration reaches it through AWS_ENDPOINT_URL; an expired cluster of a stack this backend
// does not know and an expired older generation of the known stack are listed with their cost,
// kept by a dry run and deleted with --yes; the known stack's current generation and the bucket
// stay; an ARN the tagging API lists for a deleted instance is reported as already gone; the
// last line tallies what was done.
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
	const gen = "g20250602t090000-0000000a"
	if err := os.WriteFile(filepath.Join(e.project, "Pulumi.dev.yaml"),
		[]byte("config:\n  aws:region: us-east-1\n  rig:owner: alice\n  rig:generation: "+gen+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	emu := awsemu.Start(t, awsemu.Options{})
	cfg := emu.Config("us-east-1")
	lost := cloudgctest.Build(t, cfg, cloudgctest.Cluster{Stack: "lost", Owner: "alice", Expires: "2020-01-01T00:00:00Z",
		Types: []string{"c6in.large"}, BucketObjects: 2})
	ghost := cloudgctest.Build(t, cfg, cloudgctest.Cluster{Stack: "dev", Generation: "g20200101t000000-0000000b", Owner: "alice",
		Expires: "2020-01-01T00:00:00Z", Types: []string{"c6in.large"}, BucketObjects: -1})
	dev := cloudgctest.Build(t, cfg, cloudgctest.Cluster{Stack: "dev", Generation: gen, Owner: "alice", Expires: "2999-01-01T00:00:00Z",
		Types: []string{"c6in.large"}, BucketObjects: -1})
	emu.AddStaleARN("arn:aws:ec2:us-east-1:"+awsemu.Account+":instance/i-0123456789abcdef0",
		map[string]string{"rig-stack": "lost", "owner": "alice", "expires-at": "2020-01-01T00:00:00Z"})
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": emu.URL, "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": filepath.Join(e.state, "none"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(e.state, "none"), "AWS_PROFILE": "", "AWS_REGION": "",
	} {
		t.Setenv(k, v)
	}
	out, err := run(t, e, "gc", "--dry-run", "--region", "us-east-1")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{"cloud side: account " + awsemu.Account + " (the default chain", "resources tagged rig-stack in us-east-1", lost.Instances[0], "c6in.large",
		"expired: delete", "older generation: delete", lost.Bucket, "2 objects", "i-0123456789abcdef0", "already gone",
		// Two c6in.large (the emulator gives them no public IPv4 address) and two gp3 200 GiB,
		// 4,000 IOPS, 1,000 MiB/s volumes at the us-east-1 prices of infra/spec.
		"dry run: 14 resource(s) costing $0.3802/h would be deleted"} {
		if !strings.Contains(out, want) {
			t.Errorf("gc --dry-run lacks %q:\n%s", want, out)
		}
	}
	all := append(append(lost.IDs(), ghost.IDs()...), dev.IDs()...)
	for id, ok := range cloudgctest.Exists(t, cfg, all) {
		if !ok {
			t.Fatalf("dry run deleted %s", id)
		}
	}
	out, err = run(t, e, "gc", "--yes", "--region", "us-east-1")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	exists := cloudgctest.Exists(t, cfg, all)
	for _, id := range append(lost.IDs(), ghost.IDs()...) {
		if exists[id] {
			t.Errorf("%s kept", id)
		}
	}
	for _, id := range dev.IDs() {
		if !exists[id] {
			t.Errorf("%s of the live generation deleted", id)
		}
	}
	if !strings.Contains(out, "cloud side: 14 deleted ($") || !strings.Contains(out, "1 already gone, 0 failed") {
		t.Errorf("no tally line:\n%s", out)
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

// The profile a stack config names is the account gc scans: two profiles reach two accounts of
// the emulator (the second by sts:AssumeRole, as a profile with role_arn does), each holding an
// expired cluster; with aws:profile: other in Pulumi.dev.yaml, gc names the other account and
// lists its cluster, and the default profile's cluster, of the same stack name, is not seen.
func TestGCScansTheStackConfigsProfile(t *testing.T) {
	e := setup(t)
	if err := os.MkdirAll(filepath.Join(e.state, "rig", "pulumi"), 0o700); err != nil {
		t.Fatal(err)
	}
	emu := awsemu.Start(t, awsemu.Options{})
	base := emu.Config("us-east-1")
	role, err := sts.NewFromConfig(base).AssumeRole(context.Background(), &sts.AssumeRoleInput{
		RoleArn: aws.String("arn:aws:iam::222222222222:role/rig-deployer"), RoleSessionName: aws.String("rig-test")})
	if err != nil {
		t.Fatal(err)
	}
	other := base.Copy()
	other.Credentials = credentials.NewStaticCredentialsProvider(aws.ToString(role.Credentials.AccessKeyId),
		aws.ToString(role.Credentials.SecretAccessKey), aws.ToString(role.Credentials.SessionToken))
	const expired = "2020-01-01T00:00:00Z"
	theirs := cloudgctest.Build(t, other, cloudgctest.Cluster{Stack: "dev", Owner: "alice", Expires: expired,
		Types: []string{"c6in.large"}, BucketObjects: -1})
	mine := cloudgctest.Build(t, base, cloudgctest.Cluster{Stack: "dev", Owner: "alice", Expires: expired,
		Types: []string{"c7i.large"}, BucketObjects: -1})

	creds := filepath.Join(e.state, "credentials")
	if err := os.WriteFile(creds, []byte("[default]\naws_access_key_id = AKIDRIGTEST\naws_secret_access_key = secret\n\n[other]\n"+
		"aws_access_key_id = "+aws.ToString(role.Credentials.AccessKeyId)+"\naws_secret_access_key = "+
		aws.ToString(role.Credentials.SecretAccessKey)+"\naws_session_token = "+aws.ToString(role.Credentials.SessionToken)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": emu.URL, "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": filepath.Join(e.state, "none"),
		"AWS_SHARED_CREDENTIALS_FILE": creds, "AWS_PROFILE": "", "AWS_REGION": "",
	} {
		t.Setenv(k, v)
	}
	if err := os.WriteFile(filepath.Join(e.project, "Pulumi.dev.yaml"),
		[]byte("config:\n  aws:region: us-east-1\n  aws:profile: other\n  rig:owner: alice\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, e, "gc", "--dry-run")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{"cloud side: account 222222222222 (profile other, as arn:aws:sts::222222222222:assumed-role/rig-deployer/rig-test)",
		theirs.Instances[0], "c6in.large"} {
		if !strings.Contains(out, want) {
			t.Errorf("gc --dry-run lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{mine.Instances[0], awsemu.Account} {
		if strings.Contains(out, not) {
			t.Errorf("gc of profile other shows %s of the default profile's account:\n%s", not, out)
		}
	}
}

// rig-stack up without --yes and without a terminal to ask on runs the checks against the
// emulator (credentials, preflight), prints the plan with its cost, then refuses as bad input:
// pulumi is never asked to select or create the stack. With a quota below the stack's vCPUs
// the same up stops at preflight, naming the quota request.
func TestUpAsksBeforeCreating(t *testing.T) {
	e := setup(t)
	emu := awsemu.Start(t, awsemu.Options{})
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": emu.URL, "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": filepath.Join(e.state, "none"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(e.state, "none"), "AWS_PROFILE": "", "AWS_REGION": "",
	} {
		t.Setenv(k, v)
	}
	key := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGHn2bJ1yS1K3m5Y9gk1z0b7Yp0b9wqW3X0Zr1Fq2c7D rig@test"
	cfg := "config:\n  aws:region: us-east-1\n  rig:owner: alice\n  rig:operatorCidrs: [\"203.0.113.7/32\"]\n  rig:publicKey: " + key + "\n"
	if err := os.WriteFile(filepath.Join(e.project, "Pulumi.dev.yaml"), []byte(cfg+"  rig:servers: 1\n  rig:serverInstanceType: c6in.large\n"+
		"  rig:clientInstanceType: c6in.large\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, e, "up", "--stack", "dev")
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "pass --yes") {
		t.Fatalf("want a usage error asking for --yes, got %v:\n%s", err, out)
	}
	for _, want := range []string{"hourly cost estimate", "total"} {
		if !strings.Contains(out, want) {
			t.Errorf("up lacks %q before refusing:\n%s", want, out)
		}
	}
	calls, _ := os.ReadFile(e.log)
	if strings.Contains(string(calls), "stack") {
		t.Errorf("pulumi was asked about the stack before the plan was confirmed:\n%s", calls)
	}

	// The default stack needs 208 vCPUs; moto 5.2 has no EC2 quotas, so Service Quotas is
	// answered here with 32 (AWS_ENDPOINT_URL_SERVICE_QUOTAS, the SDK's per-service endpoint).
	quotas := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = w.Write([]byte(`{"Quota":{"ServiceCode":"ec2","QuotaCode":"L-1216C47A","Value":32.0}}`))
	}))
	defer quotas.Close()
	t.Setenv("AWS_ENDPOINT_URL_SERVICE_QUOTAS", quotas.URL)
	for name, c := range map[string]struct{ extra, want, fix string }{
		"quota": {"", "the stack needs 208 vCPUs of on-demand standard instances in us-east-1; the quota is 32",
			"aws service-quotas request-service-quota-increase --region us-east-1 --service-code ec2 --quota-code L-1216C47A --desired-value 208"},
		"zone": {"  rig:availabilityZone: us-east-1e\n", "c6in.16xlarge is not offered in us-east-1e",
			"pulumi config set --stack dev rig:availabilityZone us-east-1a"},
	} {
		if err := os.WriteFile(filepath.Join(e.project, "Pulumi.dev.yaml"), []byte(cfg+c.extra), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err = run(t, e, "up", "--stack", "dev", "--yes")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.fix) {
			t.Errorf("%s: want a preflight error %q with its fix %q, got %v:\n%s", name, c.want, c.fix, err, out)
		}
		if strings.Contains(out, "hourly cost estimate") {
			t.Errorf("%s: the plan was offered although preflight failed:\n%s", name, out)
		}
	}
	calls, _ = os.ReadFile(e.log)
	if strings.Contains(string(calls), "stack") {
		t.Errorf("pulumi was asked about the stack after preflight failed:\n%s", calls)
	}
}

// preflight (what rig validate --stack runs) reports the problem with its fix and creates
// nothing; without credentials it says it did not ask.
func TestPreflightVerb(t *testing.T) {
	e := setup(t)
	emu := awsemu.Start(t, awsemu.Options{})
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": emu.URL, "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": filepath.Join(e.state, "none"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(e.state, "none"), "AWS_PROFILE": "", "AWS_REGION": "",
	} {
		t.Setenv(k, v)
	}
	key := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGHn2bJ1yS1K3m5Y9gk1z0b7Yp0b9wqW3X0Zr1Fq2c7D rig@test"
	if err := os.WriteFile(filepath.Join(e.project, "Pulumi.dev.yaml"), []byte("config:\n  aws:region: us-east-1\n  rig:owner: alice\n"+
		"  rig:operatorCidrs: [\"203.0.113.7/32\"]\n  rig:publicKey: "+key+"\n  rig:availabilityZone: us-east-1e\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, e, "preflight", "--stack", "dev")
	if err == nil || !strings.Contains(err.Error(), "c6in.16xlarge is not offered in us-east-1e") ||
		!strings.Contains(err.Error(), "rig:availabilityZone us-east-1a") {
		t.Fatalf("want the zone problem with its fix, got %v:\n%s", err, out)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	out, err = run(t, e, "preflight", "--stack", "dev")
	if err != nil || !strings.Contains(out, "preflight of dev not run: no AWS credentials") {
		t.Fatalf("without credentials: %v:\n%s", err, out)
	}
	if calls, _ := os.ReadFile(e.log); strings.Contains(string(calls), "stack") {
		t.Errorf("preflight asked pulumi about the stack:\n%s", calls)
	}
}
