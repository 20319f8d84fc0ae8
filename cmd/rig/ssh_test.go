package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/agent/tune/tunetest"
	"github.com/rig-dev/rig/internal/sshdtest"
	"github.com/rig-dev/rig/inventory"
	sshtarget "github.com/rig-dev/rig/target/ssh"
	"github.com/rig-dev/rig/transport/sshx"
)

// These run the real binary (rigBin) against a real sshd.

func writeInventory(t *testing.T, nodes ...inventory.Node) string {
	t.Helper()
	b, err := json.Marshal(inventory.Inventory{Target: "aws", Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "inventory.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// rigRun runs rigBin and returns stdout, stderr and the exit code.
func rigRun(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, rigBin, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

func TestSSHVerb(t *testing.T) {
	srv := sshdtest.Start(t)
	inv := writeInventory(t, srv.Node("node-0"))
	out, errOut, code := rigRun(t, "ssh", "--inventory", inv, "--ssh-key", srv.ClientKeyFile, "node-0", "--", "sh", "-c", "echo to-stdout; echo to-stderr >&2")
	if code != 0 || out != "to-stdout\n" || !strings.Contains(errOut, "to-stderr") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	_, errOut, code = rigRun(t, "ssh", "--inventory", inv, "--ssh-key", srv.ClientKeyFile, "node-0", "--", "sh", "-c", "exit 3")
	if code != 1 || !strings.Contains(errOut, "exited 3") {
		t.Fatalf("failing command: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = rigRun(t, "ssh", "--inventory", inv, "--ssh-key", srv.ClientKeyFile, "node-9", "--", "true")
	if code != 2 || !strings.Contains(errOut, `node "node-9" is not in the inventory (nodes: node-0)`) {
		t.Fatalf("unknown node: exit %d, stderr %q", code, errOut)
	}
}

// Acceptance: with a wrong host key in the inventory, `rig ssh` exits non-zero naming the
// host-key mismatch, and runs nothing.
func TestSSHVerbRefusesWrongHostKey(t *testing.T) {
	srv := sshdtest.Start(t)
	node := srv.Node("node-0")
	node.SSH.HostKey = sshdtest.RandomHostKey(t)
	inv := writeInventory(t, node)
	marker := filepath.Join(t.TempDir(), "ran")
	out, errOut, code := rigRun(t, "ssh", "--inventory", inv, "--ssh-key", srv.ClientKeyFile, "node-0", "--", "touch", marker)
	if code == 0 || !strings.Contains(errOut, "host key mismatch for node-0") || !strings.Contains(errOut, "refusing to connect") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatal("the command ran although the host key was wrong")
	}
	if strings.Contains(srv.Log(), "Accepted publickey") || strings.Contains(srv.Log(), "Starting session") {
		t.Fatalf("the client went past the key exchange:\n%s", srv.Log())
	}
	t.Logf("rig said: %s", strings.TrimSpace(errOut))
}

// `rig agent stage` puts this very binary on a node over SSH and starts the real `rig agent`
// there; `rig agent ping` reaches it through the tunnel; staging again is a no-op.
func TestAgentStageAndPingOverSSH(t *testing.T) {
	srv := sshdtest.Start(t)
	inv := writeInventory(t, srv.Node("node-0"))
	remote := filepath.Join(t.TempDir(), "remote")
	tr, err := sshx.New(sshx.Options{KeyFiles: []string{srv.ClientKeyFile}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() }) // after the Stop below (cleanups run last-in first-out)
	t.Cleanup(func() {
		if err := sshtarget.Stop(context.Background(), tr, srv.Node("node-0"), sshtarget.Options{Base: remote}); err != nil {
			t.Errorf("stop agent: %v", err)
		}
	})

	out, errOut, code := rigRun(t, "agent", "stage", "--inventory", inv, "--ssh-key", srv.ClientKeyFile, "--remote-dir", remote)
	if code != 0 || !strings.Contains(out, "node-0") || !strings.Contains(out, "true") {
		t.Fatalf("stage: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = rigRun(t, "agent", "ping", "--inventory", inv, "--ssh-key", srv.ClientKeyFile, "--remote-dir", remote, "--json")
	var rows []struct {
		Node  string `json:"node"`
		PID   int    `json:"pid"`
		Error string `json:"error"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0].PID == 0 || rows[0].Error != "" {
		t.Fatalf("ping: exit %d\n%s\n%s", code, out, errOut)
	}
	out, _, code = rigRun(t, "agent", "stage", "--inventory", inv, "--ssh-key", srv.ClientKeyFile, "--remote-dir", remote)
	if code != 0 || strings.Contains(out, "true") {
		t.Fatalf("second stage must upload and start nothing:\n%s", out)
	}
}

// `rig tune apply` and `rig tune revert` against a fake tree: byte-identical afterwards; a bad
// profile is a usage error naming file:line:column, and changes nothing.
func TestAgentTuneRevertCLI(t *testing.T) {
	root := tunetest.FakeTree(t, t.TempDir())
	before := tunetest.Snapshot(t, root)
	dir := filepath.Join(t.TempDir(), "agent")
	prof := filepath.Join(t.TempDir(), "profile.yaml")

	os.WriteFile(prof, []byte("thp: never\nvm.dirty_ratio: 250\n"), 0o644)
	_, errOut, code := rigRun(t, "tune", "apply", "--root", root, "--dir", dir, "--profile", prof)
	if code != 2 || !strings.Contains(errOut, prof+":2:17: vm.dirty_ratio: 250 is out of range 0..100") {
		t.Fatalf("bad profile: exit %d, stderr %q", code, errOut)
	}
	if !reflect.DeepEqual(before, tunetest.Snapshot(t, root)) {
		t.Fatal("a rejected profile changed the tree")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatal("a rejected profile created the state folder")
	}

	os.WriteFile(prof, []byte("thp: never\nvm.dirty_ratio: 25\nnet.core.rmem_max: 64MiB\n"), 0o644)
	out, errOut, code := rigRun(t, "tune", "apply", "--root", root, "--dir", dir, "--profile", prof)
	if code != 0 || !strings.Contains(strings.Join(strings.Fields(out), " "), "net.core.rmem_max 212992 67108864 67108864") {
		t.Fatalf("tune: exit %d\n%s\n%s", code, out, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "sys/kernel/mm/transparent_hugepage/enabled")); string(b) != "always madvise [never]\n" {
		t.Fatalf("thp file %q", b)
	}
	out, errOut, code = rigRun(t, "tune", "revert", "--root", root, "--dir", dir)
	if code != 0 {
		t.Fatalf("revert: exit %d\n%s\n%s", code, out, errOut)
	}
	if !reflect.DeepEqual(before, tunetest.Snapshot(t, root)) {
		t.Fatal("tree differs after revert")
	}
	out, _, code = rigRun(t, "tune", "revert", "--root", root, "--dir", dir)
	if code != 0 || !strings.Contains(out, "nothing to revert") {
		t.Fatalf("second revert: exit %d %q", code, out)
	}
}
