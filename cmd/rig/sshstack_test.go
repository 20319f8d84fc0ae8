package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/rig-dev/rig/infra/stack"
	"github.com/rig-dev/rig/internal/sshdtest"
	"github.com/rig-dev/rig/inventory"
)

// A `pulumi` on PATH that answers `stack output` from a file, as the CLI would for a stack of
// rig's local backend.
const outputsPulumi = `#!/bin/sh
case "$*" in
  "stack output --json --stack dev") cat "$FAKE_OUTPUTS" ;;
  *) echo "error: no stack named 'x' found" >&2; exit 255 ;;
esac
`

type stackEnv struct {
	project, state, outputs string
	env                     []string // for a rig subprocess
}

// stackWithNodes makes a project folder, rig's local backend and a stack "dev" whose inventory
// holds nodes.
func stackWithNodes(t *testing.T, nodes ...inventory.Node) stackEnv {
	t.Helper()
	root := t.TempDir()
	e := stackEnv{project: filepath.Join(root, "repo"), state: filepath.Join(root, "state"), outputs: filepath.Join(root, "outputs.json")}
	bin := filepath.Join(root, "bin")
	for _, d := range []string{e.project, bin, filepath.Join(e.state, "rig", "pulumi")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, b := range map[string]string{
		filepath.Join(e.project, "Pulumi.yaml"): "name: rig\nruntime: go\n",
		filepath.Join(bin, "pulumi"):            outputsPulumi,
	} {
		if err := os.WriteFile(p, []byte(b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.setNodes(t, nodes...)
	vars := map[string]string{
		"PATH": bin + string(os.PathListSeparator) + os.Getenv("PATH"), "FAKE_OUTPUTS": e.outputs, "XDG_STATE_HOME": e.state,
		"PULUMI_BACKEND_URL": "", "PULUMI_CONFIG_PASSPHRASE": "", "PULUMI_CONFIG_PASSPHRASE_FILE": "",
	}
	for k, v := range vars {
		t.Setenv(k, v)
		e.env = append(e.env, k+"="+v)
	}
	e.env = append(os.Environ(), e.env...)
	return e
}

func (e stackEnv) setNodes(t *testing.T, nodes ...inventory.Node) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"inventory": inventory.Inventory{Target: "aws", Nodes: nodes}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.outputs, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// rigSub runs the rig binary (rig ssh --stack execs ssh, which must not replace the test).
func (e stackEnv) rigSub(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(rigBin, args...)
	cmd.Env = e.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), errOut.String(), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), 0
}

// rig ssh-config's blocks, saved to a file, take the real OpenSSH client to the stack's node with
// its host key pinned; a node whose pinned key is not the server's is refused by ssh itself.
func TestSSHConfigWorksWithOpenSSH(t *testing.T) {
	srv := sshdtest.Start(t)
	client := srv.Node("client-0")
	client.Role = inventory.RoleClient
	e := stackWithNodes(t, srv.Node("node-0"), client)
	out, errOut, err := runRig(t, "ssh-config", "--stack", "dev", "--project-dir", e.project, "--ssh-key", srv.ClientKeyFile)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	known := filepath.Join(e.state, "rig", "ssh", "dev", "known_hosts")
	for _, want := range []string{"Host rig-dev-node-0\n", "Host rig-dev-client-0\n", "  HostName " + srv.Host + "\n",
		"  UserKnownHostsFile " + known + "\n", "  StrictHostKeyChecking yes\n", "  IdentityFile " + srv.ClientKeyFile + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("ssh-config lacks %q:\n%s", want, out)
		}
	}
	conf := filepath.Join(t.TempDir(), "rig-dev.conf")
	if err := os.WriteFile(conf, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	ssh := func(host string) (string, error) {
		b, err := exec.Command("ssh", "-F", conf, "-o", "BatchMode=yes", host, "echo", "hello from", host).CombinedOutput()
		return string(b), err
	}
	for _, host := range []string{"rig-dev-node-0", "rig-dev-client-0"} {
		if got, err := ssh(host); err != nil || strings.TrimSpace(got) != "hello from "+host {
			t.Errorf("ssh -F %s: %v\n%s", host, err, got)
		}
	}
	before, _ := os.ReadFile(known)

	impostor := srv.Node("node-0")
	impostor.SSH.HostKey = sshdtest.RandomHostKey(t)
	e.setNodes(t, impostor)
	out, errOut, err = runRig(t, "ssh-config", "--stack", "dev", "--project-dir", e.project, "--ssh-key", srv.ClientKeyFile)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if err := os.WriteFile(conf, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ssh("rig-dev-node-0")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 255 || !strings.Contains(got, "Host key verification failed") || strings.Contains(got, "hello") {
		t.Errorf("ssh to a node whose pinned key is not the server's: %v\n%s", err, got)
	}
	after, _ := os.ReadFile(known)
	if bytes.Equal(before, after) || bytes.Contains(after, []byte(strings.Fields(srv.HostKey)[1])) {
		t.Errorf("the known_hosts file still pins the server's key after the inventory changed:\n%s", after)
	}
}

// rig ssh --stack becomes ssh: the command's words arrive as given, the exit status is the
// command's, a wrong host key is refused by ssh, an unknown node is a usage error naming the
// stack's nodes.
func TestSSHStackExecsOpenSSH(t *testing.T) {
	srv := sshdtest.Start(t)
	e := stackWithNodes(t, srv.Node("node-0"))
	base := []string{"ssh", "--stack", "dev", "--project-dir", e.project, "--ssh-key", srv.ClientKeyFile}
	out, errOut, code := e.rigSub(t, append(base, "node-0", "--", "printf", "%s|", "a b", "it's", "$HOME")...)
	if code != 0 || out != "a b|it's|$HOME|" {
		t.Errorf("rig ssh --stack: exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	if _, errOut, code := e.rigSub(t, append(base, "node-0", "--", "sh", "-c", "exit 7")...); code != 7 {
		t.Errorf("exit status %d, want the command's 7: %s", code, errOut)
	}
	if _, errOut, code := e.rigSub(t, append(base, "node-9", "--", "true")...); code != 2 || !strings.Contains(errOut, `node "node-9" is not in stack dev (nodes: node-0)`) {
		t.Errorf("unknown node: exit %d: %s", code, errOut)
	}
	if _, errOut, code := e.rigSub(t, append(base, "--sudo", "node-0", "--", "true")...); code != 2 || !strings.Contains(errOut, "--sudo and --cd are for --inventory") {
		t.Errorf("--sudo with --stack: exit %d: %s", code, errOut)
	}
	impostor := srv.Node("node-0")
	impostor.SSH.HostKey = sshdtest.RandomHostKey(t)
	e.setNodes(t, impostor)
	out, errOut, code = e.rigSub(t, append(base, "node-0", "--", "echo", "reached")...)
	if code != 255 || strings.Contains(out, "reached") || !strings.Contains(errOut, "Host key verification failed") {
		t.Errorf("wrong host key: exit %d, stdout %q, stderr %s", code, out, errOut)
	}
}

// The argv rig ssh --stack builds: every pinning option before the destination, "--" before it,
// the login user and port of the inventory; and without --ssh-key, the private half of the
// stack's rig:publicKey found in ~/.ssh.
func TestSSHStackArgv(t *testing.T) {
	srv := sshdtest.Start(t)
	n := srv.Node("node-0")
	e := stackWithNodes(t, n)
	home := t.TempDir()
	t.Setenv("HOME", home)
	sshDir := filepath.Join(home, ".ssh")
	if err := os.MkdirAll(sshDir, 0o700); err != nil {
		t.Fatal(err)
	}
	pub := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(srv.ClientSigner.PublicKey())))
	priv, err := os.ReadFile(srv.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]string{"id_ed25519": string(priv), "id_ed25519.pub": pub + "\n",
		"other.pub": sshdtest.RandomHostKey(t) + "\n"} {
		if err := os.WriteFile(filepath.Join(sshDir, name), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(e.project, "Pulumi.dev.yaml"), []byte("config:\n  rig:publicKey: "+pub+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var o sshCmdOptions
	o.stack = stackSSHFlags{name: "dev", infra: infraFlags{DriverFlags: stack.DriverFlags{ProjectDir: e.project}}}
	got, err := o.stackArgv(context.Background(), []string{"node-0", "ls", "a b"})
	if err != nil {
		t.Fatal(err)
	}
	known := filepath.Join(e.state, "rig", "ssh", "dev", "known_hosts")
	want := []string{"ssh", "-o", "Port=" + strconv.Itoa(srv.Port), "-o", "User=" + srv.User, "-o", "HostKeyAlias=rig-dev-node-0",
		"-o", "UserKnownHostsFile=" + known, "-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=yes",
		"-o", "CheckHostIP=no", "-o", "UpdateHostKeys=no", "-o", "IdentityFile=" + filepath.Join(sshDir, "id_ed25519"),
		"-o", "IdentitiesOnly=yes", "--", srv.Host, "ls", "'a b'"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("argv\n%q\nwant\n%q", got, want)
	}
	b, err := os.ReadFile(known)
	if err != nil || !strings.Contains(string(b), "\nrig-dev-node-0 "+srv.HostKey+"\n") {
		t.Errorf("known_hosts %v:\n%s", err, b)
	}
}
