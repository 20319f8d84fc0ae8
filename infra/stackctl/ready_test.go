package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/internal/sshdtest"
	"github.com/rig-dev/rig/inventory"
)

// rig-stack ready (the wait that up ends with) reads the stack's inventory through the pulumi
// CLI and waits for its nodes over real SSH: a node whose cloud-init file is missing fails the
// wait by name, the file there passes it, and a node whose pinned key is not the server's is
// refused.
func TestReadyWaitsForTheStacksNodes(t *testing.T) {
	e := setup(t)
	if err := os.MkdirAll(filepath.Join(e.state, "rig", "pulumi"), 0o700); err != nil {
		t.Fatal(err)
	}
	srv := sshdtest.Start(t)
	marker := filepath.Join(t.TempDir(), "boot-finished")
	writeInventory := func(nodes ...inventory.Node) {
		t.Helper()
		b, err := json.Marshal(map[string]any{"bucket": "rig-dev-1", "inventory": inventory.Inventory{Target: "aws", Nodes: nodes}})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(os.Getenv("FAKE_OUTPUTS"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	client := srv.Node("client-0")
	client.Role = inventory.RoleClient
	writeInventory(srv.Node("node-0"), client)
	args := []string{"ready", "--stack", "dev", "--ssh-key", srv.ClientKeyFile, "--ready-marker", marker}

	out, err := run(t, e, append(args, "--ready-timeout", "1s")...)
	if err == nil || !strings.Contains(err.Error(), "stack dev is up but not ready: 2 node(s) not ready after 1s: node-0 (ssh answers with its pinned host key; cloud-init has not finished") ||
		!strings.Contains(err.Error(), "client-0 (") {
		t.Fatalf("without the cloud-init file: %v\n%s", err, out)
	}

	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, e, args...)
	// The nodes here are this machine, so cloud-init's packages (spec.NodePackages: fio) are
	// there exactly when this machine has them.
	if _, lookErr := exec.LookPath("fio"); lookErr != nil {
		if err == nil || !strings.Contains(err.Error(), "package step (package_update, packages: fio) did not install fio") {
			t.Fatalf("with the cloud-init file, without fio: %v\n%s", err, out)
		}
	} else if err != nil || !strings.Contains(out, "  node-0: ready after") || !strings.Contains(out, "rig: all 2 node(s) ready after") {
		t.Fatalf("with the cloud-init file: %v\n%s", err, out)
	}

	impostor := srv.Node("node-0")
	impostor.SSH.HostKey = sshdtest.RandomHostKey(t)
	writeInventory(impostor)
	out, err = run(t, e, args...)
	if err == nil || !strings.Contains(err.Error(), "node-0 refused: ssh connect on node-0: host key mismatch for node-0") {
		t.Fatalf("with a wrong pinned key: %v\n%s", err, out)
	}

	if _, err := run(t, e, append(args, "--ready-timeout", "-1s")...); err == nil || !strings.Contains(err.Error(), "--ready-timeout -1s") {
		t.Errorf("a negative timeout: %v", err)
	}
}
