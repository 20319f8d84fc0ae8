package stack

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/inventory"
)

// hermetic clears the variables that select a backend and returns a fresh PULUMI_HOME.
func hermetic(t *testing.T) {
	t.Helper()
	t.Setenv("PULUMI_HOME", t.TempDir())
	t.Setenv("PULUMI_BACKEND_URL", "")
	t.Setenv("PULUMI_CONFIG_PASSPHRASE", "")
	t.Setenv("PULUMI_CONFIG_PASSPHRASE_FILE", "")
}

// fakePulumi puts an executable `pulumi` first on PATH that logs its arguments and environment
// and answers `stack output` for the stack "dev" with outputs, and "no stack" for others.
func fakePulumi(t *testing.T, outputs string) (logFile string) {
	t.Helper()
	bin := t.TempDir()
	logFile = filepath.Join(bin, "calls.log")
	script := `#!/bin/sh
echo "args: $*" >> "` + logFile + `"
echo "backend: $PULUMI_BACKEND_URL" >> "` + logFile + `"
case "$*" in
  "stack output --json --stack dev") cat <<'EOF'
` + outputs + `
EOF
  ;;
  *) echo "error: no stack named 'other' found" >&2; exit 255 ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "pulumi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return logFile
}

const devOutputs = `{"bucket":"rig-dev-1","expiresAt":"2025-06-01T20:00:00Z","retainBucket":true,
"inventory":{"target":"aws","bucket":"rig-dev-1","expires_at":"2025-06-01T20:00:00Z","nodes":[
 {"name":"node-0","role":"server","address":"198.51.100.10","private_address":"10.42.1.10",
  "ssh":{"user":"ec2-user","port":22,"host_key":"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA"},
  "data_device":"vol-0abc","device_name":"/dev/sdf","instance_type":"c6in.16xlarge"}]}}`

func TestTargetReadsStackOutputsWithThePulumiCLI(t *testing.T) {
	hermetic(t)
	log := fakePulumi(t, devOutputs)
	state := t.TempDir()
	var target inventory.Target = NewTarget(TargetOptions{Stack: "dev", StateDir: state})
	if target.Name() != "aws" || target.(*Target).Stack() != "dev" {
		t.Fatalf("name %q", target.Name())
	}
	inv, err := target.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n, ok := inv.Node("node-0")
	if !ok || inv.Target != "aws" || n.SSH.HostKey == "" || n.DataDevice != "vol-0abc" {
		t.Fatalf("%+v", inv)
	}
	calls, _ := os.ReadFile(log)
	if !strings.Contains(string(calls), "backend: file://"+filepath.ToSlash(state)) {
		t.Fatalf("the CLI did not get rig's backend:\n%s", calls)
	}

	_, err = NewTarget(TargetOptions{Stack: "other", StateDir: state}).Inventory(context.Background())
	if !errors.Is(err, ErrNoStack) {
		t.Fatalf("want ErrNoStack, got %v", err)
	}
}

func TestTargetWithoutStacksOrCLI(t *testing.T) {
	hermetic(t)
	log := fakePulumi(t, devOutputs)
	missing := filepath.Join(t.TempDir(), "never-created")
	_, err := NewTarget(TargetOptions{Stack: "dev", StateDir: missing}).Inventory(context.Background())
	if !errors.Is(err, ErrNoStack) {
		t.Fatalf("want ErrNoStack for an empty local backend, got %v", err)
	}
	if _, err := os.Stat(log); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the CLI ran although rig's backend does not exist")
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("reading an inventory created the backend folder")
	}

	t.Setenv("PATH", t.TempDir())
	_, err = NewTarget(TargetOptions{Stack: "dev"}).Inventory(context.Background())
	if !errors.Is(err, ErrNoPulumi) || !strings.Contains(err.Error(), "get.pulumi.com") {
		t.Fatalf("want ErrNoPulumi saying what to install, got %v", err)
	}
}

func TestTargetRefusesInventoryWithoutHostKeys(t *testing.T) {
	hermetic(t)
	fakePulumi(t, strings.Replace(devOutputs, `"host_key":"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA"`, `"host_key":""`, 1))
	_, err := NewTarget(TargetOptions{Stack: "dev", StateDir: t.TempDir()}).Inventory(context.Background())
	if err == nil || !strings.Contains(err.Error(), "host_key") {
		t.Fatalf("an inventory without host keys must be refused, got %v", err)
	}
}

func TestChooseBackend(t *testing.T) {
	hermetic(t)
	state := filepath.Join(t.TempDir(), "state")
	b, err := ChooseBackend(state, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Own || b.Env["PULUMI_BACKEND_URL"] != "file://"+filepath.ToSlash(state) || b.Exists() {
		t.Fatalf("%+v", b)
	}
	var out bytes.Buffer
	if err := b.Prepare(&out); err != nil {
		t.Fatal(err)
	}
	pf := b.Env["PULUMI_CONFIG_PASSPHRASE_FILE"]
	st, err := os.Stat(pf)
	if err != nil || st.Mode().Perm() != 0o600 || !b.Exists() || !strings.Contains(out.String(), pf) {
		t.Fatalf("passphrase %s: %v %v; said %q", pf, st, err, out.String())
	}
	first, _ := os.ReadFile(pf)
	if err := b.Prepare(&out); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(pf); !bytes.Equal(first, again) {
		t.Fatal("Prepare replaced an existing passphrase: existing secrets would become unreadable")
	}

	t.Setenv("PULUMI_CONFIG_PASSPHRASE", "mine")
	if b, _ := ChooseBackend(state, nil); b.Env["PULUMI_CONFIG_PASSPHRASE_FILE"] != "" {
		t.Fatal("overrode the user's passphrase")
	}
	t.Setenv("PULUMI_BACKEND_URL", "s3://team-state")
	if b, _ := ChooseBackend(state, nil); b.Own || b.Env["PULUMI_BACKEND_URL"] != "" {
		t.Fatalf("overrode the user's backend: %+v", b)
	}
	t.Setenv("PULUMI_BACKEND_URL", "")
	if err := os.WriteFile(filepath.Join(os.Getenv("PULUMI_HOME"), "credentials.json"), []byte(`{"current":"https://api.pulumi.com"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// A login made elsewhere never moves rig's stacks; the state line says it is not used.
	if b, _ := ChooseBackend(state, nil); !b.Own || !strings.Contains(b.Where(""), "your `pulumi login` is not used") {
		t.Fatalf("a pulumi login chose the backend: %+v %s", b, b.Where(""))
	}
}

func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rig-stack")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunDriverPassesArgsStreamsAndExitCodes(t *testing.T) {
	project := t.TempDir()
	bin := writeScript(t, `echo "in $(pwd): $*"; read line; echo "got $line"; echo warn >&2; exit 0`)
	var out, errOut bytes.Buffer
	err := RunDriver(context.Background(), DriverOptions{ProjectDir: project, Binary: bin,
		Stdin: strings.NewReader("y\n"), Stdout: &out, Stderr: &errOut}, "gc", "--yes")
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(project)
	if got := out.String(); !strings.Contains(got, "in "+real+": gc --yes") || !strings.Contains(got, "got y") || errOut.String() != "warn\n" {
		t.Fatalf("stdout %q stderr %q", got, errOut.String())
	}

	t.Setenv("RIG_STACK_DRIVER", writeScript(t, "exit 2"))
	err = RunDriver(context.Background(), DriverOptions{ProjectDir: project}, "up", "--stack", "x")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 2 || ee.Verb != "up" {
		t.Fatalf("want ExitError 2 from up, got %v", err)
	}
}

func TestRunDriverWithoutGo(t *testing.T) {
	t.Setenv("RIG_STACK_DRIVER", "")
	t.Setenv("PATH", t.TempDir())
	err := RunDriver(context.Background(), DriverOptions{ProjectDir: t.TempDir(), CacheDir: t.TempDir()}, "status")
	if !errors.Is(err, ErrNoGo) {
		t.Fatalf("want ErrNoGo, got %v", err)
	}
}

// The stack target refuses a name outside the grammar before the pulumi CLI sees it.
func TestTargetRefusesBadStackNames(t *testing.T) {
	hermetic(t)
	log := fakePulumi(t, devOutputs)
	for _, name := range []string{"../x", "-rf", "a/b"} {
		_, err := NewTarget(TargetOptions{Stack: name, StateDir: t.TempDir()}).Inventory(context.Background())
		if !errors.Is(err, inventory.ErrBadName) {
			t.Errorf("%q: want ErrBadName, got %v", name, err)
		}
	}
	if calls, err := os.ReadFile(log); err == nil {
		t.Fatalf("pulumi ran: %s", calls)
	}
}
