package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rig-dev/rig/internal/looptest"
	"github.com/rig-dev/rig/internal/sshdtest"
	"github.com/rig-dev/rig/internal/tools"
	"github.com/rig-dev/rig/inventory"
)

// TestRunOverSSH runs a playbook on a "remote" cluster reached only through a real OpenSSH sshd:
// the rig stages itself on every node over SFTP, starts the agents as daemons, reaches them
// through direct-tcpip tunnels, and collects the node folders back. All four nodes are the same
// host (one sshd), kept apart by their own loopback private addresses and rig folders.
func TestRunOverSSH(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	t.Parallel()            // its own addresses, sshd and folders: it may run beside the other end-to-end runs
	tools.Require(t, "fio") // the disk check of node-0's data volume, on the node
	srv := sshdtest.Start(t)
	// node-0's engine data goes on a data volume of its own (a loop device standing in for EBS):
	// found, formatted and mounted by its agent.
	invFile, dataDevice, dataMount := sshInventory(t, srv, "ssh-test", "127.0.65")

	res := t.TempDir()
	remote := t.TempDir()
	args := []string{"run", "--results", res, "--inventory", invFile, "--ssh-key", srv.ClientKeyFile, "--remote-dir", remote}
	if dataMount != "" {
		args = append(args, "--data-mount", dataMount, "--data-fs", "ext4")
	}
	stdout := runRigOK(t, append(args, writePlaybook(t, shortQuickstart))...)
	dir := runDirOf(t, stdout)
	var s summary
	readJSON(t, filepath.Join(dir, "summary.json"), &s)
	if s.Status != "ok" || s.Probes.Lost != 0 || s.Probes.N < 5000 || len(s.Snapshots) != 2 || len(s.Restarts) != 1 {
		t.Errorf("summary %+v", s)
	}
	hashes := map[string]bool{}
	for _, st := range s.Nodes {
		hashes[st.StateHash] = true
	}
	if len(hashes) != 1 || hashes[""] {
		t.Errorf("state hashes %v", s.Nodes)
	}
	// Collected back over SSH: each node's engine log and transitions, the probes.
	for _, f := range []string{"node-1/engine.log", "node-1/transitions.jsonl", "loadgen/probes.bin", "client-0/samples/os-*.ndjson"} {
		if m, _ := filepath.Glob(filepath.Join(dir, f)); len(m) == 0 {
			t.Errorf("not collected: %s", f)
		}
	}
	if dataMount != "" {
		var m struct {
			Disks map[string]struct {
				Device     string `json:"device"`
				Formatted  bool   `json:"formatted"`
				MountPoint string `json:"mount_point"`
			} `json:"disks"`
		}
		readJSON(t, filepath.Join(dir, "manifest.json"), &m)
		d := m.Disks["node-0"]
		if d.Device != dataDevice || !d.Formatted || d.MountPoint != dataMount {
			t.Errorf("manifest disks %+v: want node-0's %s formatted and mounted on %s", m.Disks, dataDevice, dataMount)
		}
		log, _ := os.ReadFile(filepath.Join(dir, "node-0", "engine.log"))
		if !bytes.Contains(log, []byte(dataMount+"/rig/")) {
			t.Errorf("node-0's engine did not keep its log on the data volume %s", dataMount)
		}
	}
	// This run's own staged binaries only: other packages' tests (infra/quiesce) stage theirs
	// under the same names, and other end-to-end runs of this package run beside it.
	assertNoProcessesOf(t, filepath.Join(remote, "rig-node-0/bin/rig"), filepath.Join(remote, "rig-client-0/bin/rig"))
}

// sshInventory writes the inventory of a 3-server, 1-client cluster on srv, the nodes kept apart
// by private addresses prefix.11..14, with node-0's engine data on a loop device of its own
// where one can be made (the device, and where the run is to mount it; else both ""), and
// returns the file.
func sshInventory(t *testing.T, srv *sshdtest.Server, target, prefix string) (invFile, dataDevice, dataMount string) {
	t.Helper()
	inv := inventory.Inventory{Target: target}
	for i, name := range []string{"node-0", "node-1", "node-2", "client-0"} {
		n := srv.Node(name)
		n.PrivateAddress = fmt.Sprintf("%s.%d", prefix, 11+i)
		if name == "client-0" {
			n.Role = inventory.RoleClient
		}
		inv.Nodes = append(inv.Nodes, n)
	}
	if dataDevice = looptest.Device(t, 128<<20); dataDevice != "" {
		inv.Nodes[0].DataDevice = dataDevice
		dataMount = filepath.Join(t.TempDir(), "data")
		t.Cleanup(func() { exec.Command("umount", dataMount).Run() })
	}
	invFile = filepath.Join(t.TempDir(), "inventory.json")
	b, err := json.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(invFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return invFile, dataDevice, dataMount
}
