package automation

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/aws/aws-sdk-go-v2/aws"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/rig-dev/rig/archive"
	"github.com/rig-dev/rig/infra/awsconf"
	"github.com/rig-dev/rig/infra/awsemu"
	"github.com/rig-dev/rig/infra/preflight"
	"github.com/rig-dev/rig/infra/spec"
	"github.com/rig-dev/rig/inventory"
)

var now = time.Date(2025, 6, 2, 9, 0, 0, 0, time.UTC)

type harness struct {
	dir, state, results string
	cli                 *fakeCLI
	log                 *eventLog
	out                 bytes.Buffer
	credsChecked        []string
	archives            string // where the recording destination writes
	dests               []archive.Location
	putErr              error
}

func publicKey(t *testing.T) string {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := ssh.NewPublicKey(pub)
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	t.Setenv("PULUMI_HOME", t.TempDir()) // no `pulumi login` on record
	t.Setenv("PULUMI_BACKEND_URL", "")
	t.Setenv("PULUMI_CONFIG_PASSPHRASE", "")
	t.Setenv("PULUMI_CONFIG_PASSPHRASE_FILE", "")
	root := t.TempDir()
	h := &harness{dir: filepath.Join(root, "repo"), state: filepath.Join(root, "state"), results: filepath.Join(root, "repo", "results"),
		archives: filepath.Join(root, "archives"), log: &eventLog{}}
	if err := os.MkdirAll(h.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	proj, err := os.ReadFile("../../Pulumi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h.write(t, "Pulumi.yaml", string(proj))
	h.cli = newFakeCLI(h.log)
	h.cli.outputsAfterUp = func(stack string) map[string]any { return fakeOutputs(stack, true, now.Add(8*time.Hour)) }
	return h
}

func (h *harness) write(t *testing.T, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(h.dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) stackConfig(t *testing.T, stack, extra string) {
	h.write(t, "Pulumi."+stack+".yaml", fmt.Sprintf("config:\n  aws:region: us-east-2\n  rig:owner: alice\n  rig:operatorCidrs: [\"203.0.113.7/32\"]\n  rig:publicKey: %s\n%s",
		publicKey(t), extra))
}

func (h *harness) options() Options {
	return Options{
		ProjectDir: h.dir, Command: h.cli, StateDir: h.state, ResultsDir: h.results, Out: &h.out,
		Now: func() time.Time { return now },
		CheckCredentials: func(_ context.Context, t awsconf.Target) error {
			h.credsChecked = append(h.credsChecked, t.Region)
			return nil
		},
		Preflight: func(context.Context, spec.Spec) error { return nil },
		NewDest: func(_ context.Context, loc archive.Location, _ awsconf.Target) (archive.Dest, error) {
			h.dests = append(h.dests, loc)
			return &recordingDest{Dir: archive.Dir{Path: h.archives}, log: h.log, err: h.putErr}, nil
		},
	}
}

func (h *harness) driver(t *testing.T) *Driver {
	t.Helper()
	d, err := New(h.options())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// recordingDest is a real local destination that logs every Put in the shared event log.
type recordingDest struct {
	archive.Dir
	log *eventLog
	err error
}

func (r *recordingDest) Put(ctx context.Context, name string, rd io.Reader, size int64) error {
	if r.err != nil {
		return r.err
	}
	r.log.add("put " + name)
	return r.Dir.Put(ctx, name, rd, size)
}

func fakeOutputs(stack string, retain bool, expires time.Time) map[string]any {
	return map[string]any{
		spec.OutputBucket:    "rig-" + stack + "-20250601",
		spec.OutputRetain:    retain,
		spec.OutputExpiresAt: expires.Format(time.RFC3339),
		spec.OutputInventory: map[string]any{
			"target": "aws", "bucket": "rig-" + stack + "-20250601", "expires_at": expires.Format(time.RFC3339),
			"nodes": []any{
				map[string]any{"name": "node-0", "role": "server", "address": "198.51.100.10", "private_address": "10.42.1.10",
					"ssh":         map[string]any{"user": "ec2-user", "port": 22, "host_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA"},
					"data_device": "vol-0abc", "device_name": "/dev/sdf", "instance_type": "c6in.16xlarge"},
				map[string]any{"name": "client-0", "role": "client", "address": "198.51.100.11",
					"ssh":         map[string]any{"user": "ec2-user", "port": 22, "host_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB"},
					"data_device": "vol-0abd", "device_name": "/dev/sdf", "instance_type": "c6in.4xlarge"},
			},
		},
	}
}

func envOf(c fakeCall, key string) (string, bool) {
	for _, e := range c.env {
		if k, v, ok := strings.Cut(e, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

func TestNewWithoutPulumiOnPATH(t *testing.T) {
	h := newHarness(t)
	t.Setenv("PATH", t.TempDir())
	o := h.options()
	o.Command = nil
	_, err := New(o)
	if !errors.Is(err, ErrNoPulumi) || !strings.Contains(err.Error(), "get.pulumi.com") {
		t.Fatalf("want ErrNoPulumi saying what to install, got %v", err)
	}
	if _, err := os.Stat(h.state); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("state folder created without a CLI: %v", err)
	}
}

func TestUpPinsGeneratedConfigAndStreamsProgress(t *testing.T) {
	h := newHarness(t)
	h.stackConfig(t, "dev", "")
	d := h.driver(t)
	inv, err := d.Up(context.Background(), "dev", UpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if inv.Target != "aws" || len(inv.Nodes) != 2 || inv.Nodes[0].SSH.HostKey == "" {
		t.Fatalf("inventory %+v", inv)
	}
	if !slices.Equal(h.credsChecked, []string{"us-east-2"}) {
		t.Fatalf("credentials checked for %v", h.credsChecked)
	}
	st := h.cli.stacks["dev"]
	seed := st.config["rig:hostKeySeed"]
	if b, err := hex.DecodeString(seed); err != nil || len(b) != 32 || !st.secret["rig:hostKeySeed"] {
		t.Fatalf("host key seed %q secret=%v", seed, st.secret["rig:hostKeySeed"])
	}
	if st.config["rig:createdAt"] != "2025-06-02T09:00:00Z" || st.secret["rig:createdAt"] {
		t.Fatalf("createdAt %q", st.config["rig:createdAt"])
	}
	// Order: select (404), init, config, up.
	var verbs []string
	for _, c := range h.cli.commands() {
		verbs = append(verbs, strings.Join(c[:2], " "))
	}
	upAt := slices.IndexFunc(verbs, func(v string) bool { return strings.HasPrefix(v, "up ") })
	seedAt := slices.IndexFunc(h.cli.commands(), func(c []string) bool { return slices.Contains(c, "rig:hostKeySeed") })
	if upAt < 0 || seedAt < 0 || seedAt > upAt || !h.cli.ran("stack", "init", "dev") {
		t.Fatalf("commands %v", h.cli.commands())
	}
	// Every call runs against the rig's local file backend with a passphrase file it created.
	for _, c := range h.cli.calls {
		if v, _ := envOf(c, "PULUMI_BACKEND_URL"); v != "file://"+filepath.ToSlash(h.state) {
			t.Fatalf("%v: backend %q", c.args, v)
		}
	}
	pf, _ := envOf(h.cli.calls[0], "PULUMI_CONFIG_PASSPHRASE_FILE")
	if st, err := os.Stat(pf); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("passphrase file %s: %v", pf, err)
	}
	for _, want := range []string{"rig: building and starting the Pulumi program", "rig: program running after",
		"rig: creating aws:ec2/vpc:Vpc rig-vpc ...", "rig: [1] created aws:ec2/vpc:Vpc rig-vpc (", "rig: [2] created aws:ec2/instance:Instance node-0 ("} {
		if !strings.Contains(h.out.String(), want) {
			t.Fatalf("progress lacks %q:\n%s", want, h.out.String())
		}
	}

	// A second up keeps the seed and created-at it pinned (the stack file now carries them).
	h.cli.calls = nil
	h.stackConfig(t, "dev", "  rig:hostKeySeed:\n    secure: v1:abc\n  rig:createdAt: \"2025-06-02T09:00:00Z\"\n"+
		"  rig:generation: "+st.config["rig:generation"]+"\n")
	if _, err := d.Up(context.Background(), "dev", UpOptions{}); err != nil {
		t.Fatal(err)
	}
	if h.cli.ran("config", "set") || h.cli.ran("stack", "init") {
		t.Fatalf("second up rewrote config or re-created the stack: %v", h.cli.commands())
	}
}

// A stack name used again after `rig down` is a new cluster: down clears the generation and
// created-at, and an up without a generation makes a new one with created-at now, even when the
// stack file still carries an old created-at (a file from before generations, or edited by
// hand), so the new cluster is not born expired and its tags differ from the old one's.
func TestReusedStackNameGetsNewGeneration(t *testing.T) {
	h := newHarness(t)
	h.stackConfig(t, "dev", "  rig:hostKeySeed:\n    secure: v1:abc\n  rig:createdAt: \"2025-05-01T00:00:00Z\"\n")
	d := h.driver(t)
	if _, err := d.Up(context.Background(), "dev", UpOptions{}); err != nil {
		t.Fatal(err)
	}
	st := h.cli.stacks["dev"]
	first := st.config["rig:generation"]
	if _, probs := spec.FromConfig("dev", "us-east-2", map[string]string{"generation": first}); first == "" || len(probs) > 0 {
		t.Fatalf("generation %q: %v", first, probs)
	}
	if st.config["rig:createdAt"] != now.Format(time.RFC3339) {
		t.Fatalf("created-at %q kept from the old cluster, want %s", st.config["rig:createdAt"], now.Format(time.RFC3339))
	}
	if !strings.Contains(h.out.String(), "new generation "+first) {
		t.Fatalf("output does not name the generation:\n%s", h.out.String())
	}
	if err := d.Down(context.Background(), "dev", DownOptions{SkipArchive: true}); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.config["rig:generation"]; ok {
		t.Fatal("down left the generation")
	}
	if _, ok := st.config["rig:createdAt"]; ok {
		t.Fatal("down left created-at")
	}
	// The file as pulumi leaves it after those config rm calls; a day later the name is reused.
	h.stackConfig(t, "dev", "  rig:hostKeySeed:\n    secure: v1:abc\n")
	o := h.options()
	later := now.Add(24 * time.Hour)
	o.Now = func() time.Time { return later }
	d2, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d2.Up(context.Background(), "dev", UpOptions{}); err != nil {
		t.Fatal(err)
	}
	if g := st.config["rig:generation"]; g == first || g == "" {
		t.Fatalf("second cluster's generation %q, first %q", g, first)
	}
	if st.config["rig:createdAt"] != later.Format(time.RFC3339) {
		t.Fatalf("second cluster's created-at %q, want %s", st.config["rig:createdAt"], later.Format(time.RFC3339))
	}
}

// emulatorPreflight is the real preflight against the emulator; it also checks that the
// problem it stops on names want.
func emulatorPreflight(cfg aws.Config, want string) func(context.Context, spec.Spec) error {
	return func(ctx context.Context, s spec.Spec) error {
		err := preflight.Check(ctx, s, preflight.ClientsFromConfig(cfg)).Err()
		if err != nil && !strings.Contains(err.Error(), want) {
			return fmt.Errorf("preflight stopped, but not on %q: %v", want, err) // not ErrFailed: the test fails
		}
		if !errors.Is(err, preflight.ErrFailed) {
			return fmt.Errorf("preflight did not stop the up (want %q): %v", want, err)
		}
		return err
	}
}

func TestUpRefusesBeforeTouchingAnything(t *testing.T) {
	cases := map[string]func(h *harness, o *Options){
		"invalid config": func(h *harness, o *Options) {
			h.stackConfig(t, "dev", "  rig:volumeThroughput: 1500\n  rig:volumeType: io2\n  rig:volumeIops: 70000\n  rig:volumeSize: 50\n")
		},
		"no stack config": func(h *harness, o *Options) {},
		"no credentials": func(h *harness, o *Options) {
			h.stackConfig(t, "dev", "")
			o.CheckCredentials = func(context.Context, awsconf.Target) error { return ErrNoAWSCredentials }
		},
		// Against the emulator: a zone that does not offer the type, and a deployer without
		// ec2:RunInstances.
		"preflight: zone": func(h *harness, o *Options) {
			h.write(t, "Pulumi.dev.yaml", fmt.Sprintf("config:\n  aws:region: us-east-1\n  rig:availabilityZone: us-east-1e\n"+
				"  rig:owner: alice\n  rig:operatorCidrs: [\"203.0.113.7/32\"]\n  rig:publicKey: %s\n", publicKey(t)))
			emu := awsemu.Start(t, awsemu.Options{})
			o.Preflight = emulatorPreflight(emu.Config("us-east-1"), "c6in.16xlarge is not offered in us-east-1e")
		},
		"preflight: permission": func(h *harness, o *Options) {
			h.stackConfig(t, "dev", "")
			emu := awsemu.Start(t, awsemu.Options{Users: map[string][]string{"deployer": {"ec2:Describe*", "ssm:GetParameter"}}})
			o.Preflight = emulatorPreflight(emu.ConfigAs("deployer", "us-east-2"), "ec2:RunInstances")
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			o := h.options()
			setup(h, &o)
			d, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			_, err = d.Up(context.Background(), "dev", UpOptions{})
			if err == nil {
				t.Fatal("want an error")
			}
			if strings.HasPrefix(name, "preflight") && !errors.Is(err, preflight.ErrFailed) {
				t.Fatalf("want preflight.ErrFailed, got %v", err)
			}
			if len(h.cli.calls) != 0 {
				t.Fatalf("pulumi was called: %v", h.cli.commands())
			}
			if _, err := os.Stat(h.state); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("state folder created: %v", err)
			}
		})
	}
	h := newHarness(t)
	h.stackConfig(t, "dev", "  rig:volumeType: io2\n  rig:volumeIops: 70000\n  rig:volumeSize: 50\n")
	_, err := h.driver(t).Up(context.Background(), "dev", UpOptions{})
	if !errors.Is(err, spec.ErrInvalid) || !strings.Contains(err.Error(), "Pulumi.dev.yaml:") {
		t.Fatalf("want spec.ErrInvalid with file position, got %v", err)
	}
}

func writeRun(t *testing.T, results, id, stack, target string) {
	t.Helper()
	dir := filepath.Join(results, id)
	if err := os.MkdirAll(filepath.Join(dir, "node-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"manifest.json":     fmt.Sprintf(`{"target":%q,"stack":%q}`, target, stack),
		"node-0/engine.log": "applied 1\n",
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDownArchivesEveryRunOfTheStackBeforeDestroying(t *testing.T) {
	h := newHarness(t)
	h.stackConfig(t, "dev", "")
	d := h.driver(t)
	if _, err := d.Up(context.Background(), "dev", UpOptions{}); err != nil {
		t.Fatal(err)
	}
	writeRun(t, h.results, "run-a", "dev", "aws")
	writeRun(t, h.results, "run-b", "dev", "aws")
	writeRun(t, h.results, "run-c", "prod", "aws")
	writeRun(t, h.results, "run-d", "", "local")
	if err := d.Down(context.Background(), "dev", DownOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"up dev", "put run-a.tar.zst", "put run-a.manifest.json", "put run-b.tar.zst", "put run-b.manifest.json", "destroy dev"}
	if got := h.log.all(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if len(h.dests) != 1 || h.dests[0].Bucket != "rig-dev-20250601" || h.dests[0].Prefix != "dev" {
		t.Fatalf("archived to %+v, want the stack's bucket under dev/", h.dests)
	}
	for _, run := range []string{"run-a", "run-b"} {
		if _, err := archive.Verify(context.Background(), archive.Dir{Path: h.archives}, run); err != nil {
			t.Fatalf("%s: %v", run, err)
		}
	}
}

func TestDownLeavesTheStackWhenArchivingFails(t *testing.T) {
	for name, tweak := range map[string]func(h *harness){
		"upload fails": func(h *harness) { h.putErr = errors.New("AccessDenied") },
		"bucket not retained": func(h *harness) {
			h.cli.outputsAfterUp = func(s string) map[string]any { return fakeOutputs(s, false, now) }
		},
		"corrupt run manifest": func(h *harness) {
			_ = os.WriteFile(filepath.Join(h.results, "run-a", "manifest.json"), []byte("{"), 0o644)
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.stackConfig(t, "dev", "")
			writeRun(t, h.results, "run-a", "dev", "aws")
			tweak(h)
			d := h.driver(t)
			if _, err := d.Up(context.Background(), "dev", UpOptions{}); err != nil {
				t.Fatal(err)
			}
			err := d.Down(context.Background(), "dev", DownOptions{})
			if err == nil || !strings.Contains(err.Error(), "nothing destroyed") {
				t.Fatalf("want a refusal, got %v", err)
			}
			if h.cli.ran("destroy") {
				t.Fatal("destroyed despite the failed archive")
			}
		})
	}
	// An explicit folder works even when the bucket goes with the stack.
	h := newHarness(t)
	h.stackConfig(t, "dev", "")
	writeRun(t, h.results, "run-a", "dev", "aws")
	h.cli.outputsAfterUp = func(s string) map[string]any { return fakeOutputs(s, false, now) }
	d := h.driver(t)
	if _, err := d.Up(context.Background(), "dev", UpOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := d.Down(context.Background(), "dev", DownOptions{ArchiveTo: filepath.Join(t.TempDir(), "keep")}); err != nil {
		t.Fatal(err)
	}
	if !h.cli.ran("destroy") {
		t.Fatal("not destroyed")
	}
}

func TestDownUnknownStack(t *testing.T) {
	h := newHarness(t)
	err := h.driver(t).Down(context.Background(), "nope", DownOptions{})
	if !errors.Is(err, ErrNoStack) {
		t.Fatalf("want ErrNoStack, got %v", err)
	}
}

func TestGCDestroysOnlyExpiredStacksAfterConfirmation(t *testing.T) {
	h := newHarness(t)
	d := h.driver(t)
	expiries := map[string]time.Time{"old": now.Add(-time.Hour), "fresh": now.Add(time.Hour)}
	for _, s := range []string{"old", "fresh", "broken"} {
		h.stackConfig(t, s, "")
	}
	h.cli.outputsAfterUp = func(s string) map[string]any { return fakeOutputs(s, true, expiries[s]) }
	for _, s := range []string{"old", "fresh"} {
		if _, err := d.Up(context.Background(), s, UpOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// "broken" failed before exporting anything: its expiry comes from its stack config.
	h.cli.stacks["broken"] = &fakeStack{config: map[string]string{}, secret: map[string]bool{}}
	h.stackConfig(t, "broken", "  rig:createdAt: \"2025-06-01T00:00:00Z\"\n  rig:expiresInHours: 2\n")

	expired, err := d.GC(context.Background(), GCOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range expired {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"broken", "old"}) {
		t.Fatalf("expired %v", names)
	}
	if h.cli.ran("destroy") {
		t.Fatal("dry run destroyed")
	}
	if _, err := d.GC(context.Background(), GCOptions{Confirm: func([]Status) bool { return false }}); !errors.Is(err, ErrNotConfirmed) {
		t.Fatalf("want ErrNotConfirmed, got %v", err)
	}
	if h.cli.ran("destroy") {
		t.Fatal("destroyed without confirmation")
	}
	var asked []Status
	if _, err := d.GC(context.Background(), GCOptions{Confirm: func(s []Status) bool { asked = s; return true }}); err != nil {
		t.Fatal(err)
	}
	var destroyed []string
	for _, e := range h.log.all() {
		if s, ok := strings.CutPrefix(e, "destroy "); ok {
			destroyed = append(destroyed, s)
		}
	}
	if len(asked) != 2 || !slices.Equal(destroyed, []string{"broken", "old"}) {
		t.Fatalf("asked about %d, destroyed %v", len(asked), destroyed)
	}
}

func TestInventory(t *testing.T) {
	h := newHarness(t)
	h.stackConfig(t, "dev", "")
	d := h.driver(t)
	if _, err := d.Up(context.Background(), "dev", UpOptions{}); err != nil {
		t.Fatal(err)
	}
	inv, err := d.Inventory(context.Background(), "dev")
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := inv.Node("node-0"); !ok || n.DataDevice != "vol-0abc" || n.SSH.User != "ec2-user" || inv.ExpiresAt == "" {
		t.Fatalf("%+v", inv)
	}
	if _, err = d.Inventory(context.Background(), "other"); !errors.Is(err, ErrNoStack) {
		t.Fatalf("want ErrNoStack, got %v", err)
	}
	// A stack that exists but has no outputs (destroyed) says so.
	h.cli.stacks["empty"] = &fakeStack{config: map[string]string{}, secret: map[string]bool{}}
	if _, err = d.Inventory(context.Background(), "empty"); !errors.Is(err, ErrNoInventory) {
		t.Fatalf("want ErrNoInventory, got %v", err)
	}
}

func TestUserConfiguredBackendIsKept(t *testing.T) {
	h := newHarness(t)
	t.Setenv("PULUMI_BACKEND_URL", "s3://team-pulumi-state")
	h.stackConfig(t, "dev", "")
	if _, err := h.driver(t).Up(context.Background(), "dev", UpOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range h.cli.calls {
		if v, ok := envOf(c, "PULUMI_BACKEND_URL"); ok {
			t.Fatalf("driver overrode the user's backend with %q", v)
		}
	}
	if _, err := os.Stat(h.state); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("created a local backend despite PULUMI_BACKEND_URL")
	}

	// `pulumi login` records its choice in credentials.json; it is not rig's setting and never
	// moves the stacks.
	h2 := newHarness(t)
	home := t.TempDir()
	t.Setenv("PULUMI_HOME", home)
	if err := os.WriteFile(filepath.Join(home, "credentials.json"), []byte(`{"current":"https://api.pulumi.com"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if d := h2.driver(t); !d.backend.Own {
		t.Fatal("a pulumi login chose the backend")
	}
}

// rig down: archive, then stop engines and unmount the data volumes, then destroy.
func TestDownOrderArchiveUnmountDestroy(t *testing.T) {
	h := newHarness(t)
	h.stackConfig(t, "dev", "")
	d := h.driver(t)
	if _, err := d.Up(context.Background(), "dev", UpOptions{}); err != nil {
		t.Fatal(err)
	}
	writeRun(t, h.results, "run-a", "dev", "aws")
	q := func(_ context.Context, inv *inventory.Inventory) error {
		for _, n := range inv.Nodes {
			if n.DataDevice != "" {
				h.log.add("unmount " + n.Name + " " + n.DataDevice)
			}
		}
		return nil
	}
	if err := d.Down(context.Background(), "dev", DownOptions{Quiesce: q}); err != nil {
		t.Fatal(err)
	}
	want := []string{"up dev", "put run-a.tar.zst", "put run-a.manifest.json", "unmount node-0 vol-0abc", "unmount client-0 vol-0abd", "destroy dev"}
	if got := h.log.all(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if !strings.Contains(h.out.String(), "unmounting data volumes on 2 node(s) of dev before destroying") {
		t.Fatalf("down did not say it unmounts: %s", h.out.String())
	}

	// A failed archive stops everything before the unmount; a failed unmount is reported and the
	// destroy goes on (the attachments cannot hold it up).
	h2 := newHarness(t)
	h2.stackConfig(t, "dev", "")
	d2 := h2.driver(t)
	if _, err := d2.Up(context.Background(), "dev", UpOptions{}); err != nil {
		t.Fatal(err)
	}
	writeRun(t, h2.results, "run-a", "dev", "aws")
	h2.putErr = errors.New("AccessDenied")
	called := false
	if err := d2.Down(context.Background(), "dev", DownOptions{Quiesce: func(context.Context, *inventory.Inventory) error {
		called = true
		return nil
	}}); err == nil || called || h2.cli.ran("destroy") {
		t.Fatalf("archive failed: err %v, unmount called %v, destroyed %v", err, called, h2.cli.ran("destroy"))
	}
	h2.putErr = nil
	if err := d2.Down(context.Background(), "dev", DownOptions{Quiesce: func(context.Context, *inventory.Inventory) error {
		return errors.New("node-0: sync and unmount /data failed: busy")
	}}); err != nil || !h2.cli.ran("destroy") {
		t.Fatalf("unmount failed: err %v, destroyed %v", err, h2.cli.ran("destroy"))
	}
	if !strings.Contains(h2.out.String(), "not every data volume was unmounted (node-0: sync and unmount /data failed: busy); destroying anyway") {
		t.Fatalf("failure not reported: %s", h2.out.String())
	}
}

func TestExtendRetagsFromExpiryOrNow(t *testing.T) {
	h := newHarness(t)
	d := h.driver(t)
	h.stackConfig(t, "dev", "  rig:createdAt: \"2025-06-02T09:00:00Z\"\n")
	if _, err := d.Up(context.Background(), "dev", UpOptions{}); err != nil {
		t.Fatal(err)
	}
	// Not expired yet: 17:00 + 4 h.
	exp, err := d.Extend(context.Background(), "dev", 4)
	if err != nil {
		t.Fatal(err)
	}
	if !exp.Equal(time.Date(2025, 6, 2, 21, 0, 0, 0, time.UTC)) || h.cli.stacks["dev"].config["rig:expiresInHours"] != "12" {
		t.Fatalf("expires %v, expiresInHours %q", exp, h.cli.stacks["dev"].config["rig:expiresInHours"])
	}
	ups := 0
	for _, e := range h.log.all() {
		if e == "up dev" {
			ups++
		}
	}
	if ups != 2 {
		t.Fatalf("want a second pulumi up to retag, events %v", h.log.all())
	}
	// Already expired: from now (09:00 on June 2nd) + 4 h, 37 h after creation.
	h.stackConfig(t, "dev", "  rig:createdAt: \"2025-06-01T00:00:00Z\"\n")
	exp, err = d.Extend(context.Background(), "dev", 4)
	if err != nil || !exp.Equal(now.Add(4*time.Hour)) || h.cli.stacks["dev"].config["rig:expiresInHours"] != "37" {
		t.Fatalf("expired stack: %v %v %q", exp, err, h.cli.stacks["dev"].config["rig:expiresInHours"])
	}
	// Past the 720 h limit, or nothing: refused, nothing changed.
	h.cli.calls = nil
	for _, hours := range []int{700, 0} {
		if _, err := d.Extend(context.Background(), "dev", hours); !errors.Is(err, ErrExtend) {
			t.Fatalf("--hours %d: want ErrExtend, got %v", hours, err)
		}
	}
	if len(h.cli.calls) != 0 {
		t.Fatalf("refused extend called pulumi: %v", h.cli.commands())
	}
}

// State elsewhere: an S3 backend URL and a KMS secrets provider reach every CLI call and the new
// stack; nothing is written on this machine; up says in one line where the state lives.
func TestBackendURLAndSecretsProvider(t *testing.T) {
	h := newHarness(t)
	h.stackConfig(t, "dev", "")
	o := h.options()
	o.BackendURL = "s3://team-state/rig?region=us-east-2"
	o.SecretsProvider = "awskms://alias/rig?region=us-east-2"
	d, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Up(context.Background(), "dev", UpOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range h.cli.calls {
		if v, _ := envOf(c, "PULUMI_BACKEND_URL"); v != o.BackendURL {
			t.Fatalf("%v: backend %q", c.args, v)
		}
		if _, ok := envOf(c, "PULUMI_CONFIG_PASSPHRASE_FILE"); ok {
			t.Fatalf("%v: a local passphrase file with a KMS provider", c.args)
		}
	}
	if !h.cli.ran("stack", "init", "dev", "--secrets-provider", o.SecretsProvider) {
		t.Fatalf("stack created without the secrets provider: %v", h.cli.commands())
	}
	if _, err := os.Stat(h.state); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("created a local state folder")
	}
	want := "rig: state: s3://team-state/rig?region=us-east-2, secrets encrypted with awskms://alias/rig?region=us-east-2"
	if !strings.Contains(h.out.String(), want) {
		t.Fatalf("up did not say where state lives: %s", h.out.String())
	}

	// The default: a folder on this machine, and up says what losing it means.
	h2 := newHarness(t)
	h2.stackConfig(t, "dev", "")
	if _, err := h2.driver(t).Up(context.Background(), "dev", UpOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h2.out.String(), "on this machine only") || !strings.Contains(h2.out.String(), "rig gc") {
		t.Fatalf("default backend line: %s", h2.out.String())
	}
}

// A failed up says what exists, how to remove it, and for a lack of capacity what to change.
func TestFailedUpSaysWhatExistsAndWhatToDo(t *testing.T) {
	h := newHarness(t)
	h.stackConfig(t, "dev", "")
	h.cli.upFails = "creating EC2 Instance: operation error EC2: RunInstances, api error InsufficientInstanceCapacity: " +
		"We currently do not have sufficient c6in.16xlarge capacity in the Availability Zone you requested (us-east-2a)."
	_, err := h.driver(t).Up(context.Background(), "dev", UpOptions{})
	if err == nil {
		t.Fatal("want an error")
	}
	out := h.out.String()
	for _, want := range []string{
		"rig: FAILED to create aws:ec2/instance:Instance node-0",
		"these 1 resource(s) exist", "aws:ec2/vpc:Vpc rig-vpc vpc-0abc",
		"rig down --stack dev --no-archive",
		"EC2 has no capacity for these instances in us-east-2a",
		"pulumi config set --stack dev availabilityZone us-east-2b",
		"serverCapacityReservationId cr-…   (an EC2 capacity reservation for c6in.16xlarge in us-east-2a",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("failure report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "clientInPlacementGroup") {
		t.Errorf("a server's capacity failure offers clientInPlacementGroup:\n%s", out)
	}
	// The client failed (the servers, launched first, are up): it may leave the group.
	hc := newHarness(t)
	hc.stackConfig(t, "dev", "")
	hc.cli.upFails, hc.cli.upFailsOn = "creating EC2 Instance: api error InsufficientInstanceCapacity: "+
		"We currently do not have sufficient c6in.4xlarge capacity in the placement group.", "client-0"
	if _, err := hc.driver(t).Up(context.Background(), "dev", UpOptions{}); err == nil {
		t.Fatal("want an error")
	}
	if !strings.Contains(hc.out.String(), "pulumi config set --stack dev clientInPlacementGroup false") {
		t.Errorf("a client's capacity failure does not offer clientInPlacementGroup false:\n%s", hc.out.String())
	}
	// A multi-az stack: no reservation advice (refused there); the failing node's AZ moves to one
	// the stack does not use, or the spread group goes.
	hm := newHarness(t)
	hm.stackConfig(t, "dev", "  rig:placement: multi-az\n")
	hm.cli.upFails, hm.cli.upFailsOn = "creating EC2 Instance: api error InsufficientInstanceCapacity: "+
		"We currently do not have sufficient c6in.16xlarge capacity in the Availability Zone you requested (us-east-2b).", "node-1"
	if _, err := hm.driver(t).Up(context.Background(), "dev", UpOptions{}); err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{
		"EC2 has no capacity for these instances (node-1 in us-east-2b; a spread placement group)",
		"pulumi config set --stack dev --path 'rig:availabilityZones[1]' us-east-2d   (another AZ for us-east-2b's nodes)",
		"pulumi config set --stack dev placementStrategy none",
	} {
		if !strings.Contains(hm.out.String(), want) {
			t.Errorf("multi-az failure report lacks %q:\n%s", want, hm.out.String())
		}
	}
	if strings.Contains(hm.out.String(), "CapacityReservationId") {
		t.Errorf("multi-az failure report offers a capacity reservation:\n%s", hm.out.String())
	}
	// Another failure: no capacity advice.
	h2 := newHarness(t)
	h2.stackConfig(t, "dev", "")
	h2.cli.upFails = "creating EC2 Instance: api error UnauthorizedOperation: not allowed"
	if _, err := h2.driver(t).Up(context.Background(), "dev", UpOptions{}); err == nil {
		t.Fatal("want an error")
	}
	if strings.Contains(h2.out.String(), "capacity") || !strings.Contains(h2.out.String(), "rig down --stack dev --no-archive") {
		t.Errorf("report:\n%s", h2.out.String())
	}
}

// Every operation on a named stack refuses a name outside the grammar before the name becomes a
// path or a pulumi argument: no CLI call, no state folder.
func TestStackNameGrammar(t *testing.T) {
	h := newHarness(t)
	d := h.driver(t)
	ctx := context.Background()
	for _, name := range []string{"../x", "-rf", "a/b"} {
		_, err1 := d.Up(ctx, name, UpOptions{})
		err2 := d.Down(ctx, name, DownOptions{})
		_, err3 := d.Extend(ctx, name, 1)
		_, err4 := d.Inventory(ctx, name)
		_, _, _, err5 := d.LoadSpec(name)
		for i, err := range []error{err1, err2, err3, err4, err5} {
			if !errors.Is(err, inventory.ErrBadName) {
				t.Errorf("%q, operation %d: want ErrBadName, got %v", name, i+1, err)
			}
		}
	}
	if len(h.cli.calls) != 0 {
		t.Fatalf("pulumi was called: %v", h.cli.commands())
	}
	if _, err := os.Stat(h.state); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("state folder created: %v", err)
	}
}

// An update of a standing stack that would replace or remove volume attachments (a reordered
// rig:dataVolumes, a move from the volume* keys, a replaced instance) first has the agents of
// those nodes unmount, then detaches exactly those attachments, and only then updates; without
// a way to unmount it refuses and changes nothing; an update that keeps every attachment goes
// straight to pulumi up.
func TestUpDetachesBeforeReplacingAttachments(t *testing.T) {
	const att, inst = "aws:ec2/volumeAttachment:VolumeAttachment", "aws:ec2/instance:Instance"
	standing := func(t *testing.T) (*harness, *Driver) {
		h := newHarness(t)
		h.stackConfig(t, "dev", "")
		d := h.driver(t)
		if _, err := d.Up(context.Background(), "dev", UpOptions{}); err != nil {
			t.Fatal(err)
		}
		return h, d
	}
	unmount := func(h *harness) func(context.Context, *inventory.Inventory) error {
		return func(_ context.Context, inv *inventory.Inventory) error {
			for _, n := range inv.Nodes {
				h.log.add("unmount " + n.Name)
			}
			return nil
		}
	}

	h, d := standing(t)
	h.cli.previewSteps = []string{"same " + inst + " node-0", "same " + att + " node-0-data", "same " + att + " client-0-data"}
	if _, err := d.Up(context.Background(), "dev", UpOptions{Quiesce: unmount(h)}); err != nil {
		t.Fatal(err)
	}
	if got, want := h.log.all(), []string{"up dev", "preview dev", "up dev"}; !slices.Equal(got, want) {
		t.Fatalf("nothing to detach: events %v, want %v", got, want)
	}

	// Reordered volumes on node-0 (each at the other's device), and the volume* keys' volume of
	// client-0 moved into the list: its attachment goes, the list's is created.
	steps := []string{
		"same " + inst + " node-0",
		"replace " + att + " node-0-data-gp3-1000 deviceName", "replace " + att + " node-0-data-gp3-125 deviceName",
		"delete " + att + " client-0-data", "create " + att + " client-0-data-gp3-125",
	}
	h, d = standing(t)
	h.cli.previewSteps = steps
	_, err := d.Up(context.Background(), "dev", UpOptions{})
	if !errors.Is(err, ErrDetachNeedsUnmount) || !strings.Contains(err.Error(), "client-0, node-0") ||
		!strings.Contains(err.Error(), "node-0-data-gp3-1000: replace (deviceName)") || !strings.Contains(err.Error(), "client-0-data: delete") ||
		!strings.Contains(err.Error(), "--ssh-key") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("without a way to unmount: %v", err)
	}
	if got, want := h.log.all(), []string{"up dev", "preview dev"}; !slices.Equal(got, want) {
		t.Fatalf("refused, but events %v", got)
	}

	h, d = standing(t)
	h.cli.previewSteps = steps
	if _, err := d.Up(context.Background(), "dev", UpOptions{Quiesce: unmount(h)}); err != nil {
		t.Fatal(err)
	}
	want := []string{"up dev", "preview dev", "unmount node-0", "unmount client-0",
		"destroy dev --target client-0-data node-0-data-gp3-1000 node-0-data-gp3-125", "up dev"}
	if got := h.log.all(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}

	// A replaced instance (new user data) detaches every attachment of its node, and only its.
	h, d = standing(t)
	h.cli.previewSteps = []string{"replace " + inst + " node-0 userData", "replace " + att + " node-0-data instanceId",
		"same " + inst + " client-0", "same " + att + " client-0-data"}
	if _, err := d.Up(context.Background(), "dev", UpOptions{Quiesce: unmount(h)}); err != nil {
		t.Fatal(err)
	}
	want = []string{"up dev", "preview dev", "unmount node-0", "destroy dev --target node-0-data", "up dev"}
	if got := h.log.all(); !slices.Equal(got, want) {
		t.Fatalf("replaced instance: events %v, want %v", got, want)
	}

	// An unmount that fails stops the update before anything is detached.
	h, d = standing(t)
	h.cli.previewSteps = steps
	_, err = d.Up(context.Background(), "dev", UpOptions{Quiesce: func(context.Context, *inventory.Inventory) error {
		return errors.New("node-0: sync and unmount /data/gp3-125: busy")
	}})
	if !errors.Is(err, ErrDetachNeedsUnmount) || !strings.Contains(err.Error(), "busy") || h.cli.ran("destroy") {
		t.Fatalf("failed unmount: %v (destroyed: %v)", err, h.cli.ran("destroy"))
	}
}
