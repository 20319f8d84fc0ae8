package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/agent/disk"
	"github.com/rig-dev/rig/internal/looptest"
	"github.com/rig-dev/rig/internal/sshdtest"
	"github.com/rig-dev/rig/internal/tools"
	"github.com/rig-dev/rig/inventory"
)

// rig disk-check through a real OpenSSH sshd: the agent is staged, finds each of node-0's two
// data volumes (loop devices standing in for EBS), formats and mounts each at --data-mount/NAME,
// and runs the real fio on it. One volume is provisioned for less than this disk delivers, the
// other for far more: that one fails, naming the figure, both numbers and the snapshot caveat.
func TestDiskCheckOverSSH(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	t.Parallel() // its own addresses (127.0.90.x), sshd, loop devices and folders
	srv, n, mount := serverWithTwoVolumes(t, "127.0.90.11")
	invFile := writeInventory(t, n)
	remote := t.TempDir()
	cmd := exec.Command(rigBin, "disk-check", "--inventory", invFile, "--ssh-key", srv.ClientKeyFile, "--remote-dir", remote,
		"--data-mount", mount, "--data-fs", "ext4", "--size", "8MiB", "--runtime", "300ms", "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("rig disk-check: %v, want exit 1 (slow falls short)\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	var rows []struct {
		Node  string           `json:"node"`
		Check disk.VolumeCheck `json:"check"`
		Error string           `json:"error"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("rows %+v, %v:\n%s", rows, err, stdout.String())
	}
	f, s := rows[0], rows[1]
	t.Logf("fast: %+v", f.Check.Measured)
	if f.Check.Volume != "fast" || !f.Check.Compared || f.Error != "" || f.Check.Measured.SeqWriteMBps <= 1.048576 ||
		f.Check.Measured.Syncs == 0 || f.Check.Measured.FioVersion == "" {
		t.Errorf("fast: %+v", f)
	}
	for _, want := range []string{"node-0's data volume slow", "sequential write", "of the provisioned 100000 MiB/s", "short", "restored from a snapshot"} {
		if !strings.Contains(s.Error, want) || s.Check.Volume != "slow" {
			t.Errorf("slow: %q lacks %q", s.Error, want)
		}
	}
	// Each volume mounted at a folder of its own, its result kept there for rig run.
	for _, v := range []string{"fast", "slow"} {
		if _, err := os.Stat(filepath.Join(mount, v, ".rig-disk-check.json")); err != nil {
			t.Errorf("%s: no kept result: %v", v, err)
		}
	}
	assertNoProcessesOf(t, filepath.Join(remote, "rig-node-0/bin/rig"))
}

// disk.volume on the local target is refused before anything starts, by rig validate (at the
// value that asks for it) and by rig run; with a stack config, a volume it lacks is refused
// naming the valid ones.
func TestDiskVolumeRefused(t *testing.T) {
	pb := writePlaybook(t, "name: v\nload: {probe_rate: 100/s}\nduration: 5s\nmatrix:\n  disk.volume: [gp3-125, gp3-9]\n")
	_, errOut, err := runRig(t, "validate", pb)
	if err == nil || !strings.Contains(errOut, "pb.yaml:5:17: matrix.disk.volume[0]") || !strings.Contains(errOut, "disk model, which the local target has instead") {
		t.Errorf("validate on the local target: %v\n%s", err, errOut)
	}
	res := t.TempDir()
	_, _, err = runRig(t, "run", "--results", res, pb)
	if err == nil || !strings.Contains(err.Error(), "disk.volume: gp3-125, gp3-9: the local target has no data volumes") {
		t.Errorf("run on the local target: %v", err)
	}
	if entries, _ := os.ReadDir(res); len(entries) != 0 {
		t.Errorf("rig run created %d entries in the results folder", len(entries))
	}
	_, errOut, err = runRig(t, "validate", pb, "--stack-config", "../../infra/spec/testdata/Pulumi.two-volumes.yaml")
	if err == nil || strings.Contains(errOut, "matrix.disk.volume[0]") ||
		!strings.Contains(errOut, `pb.yaml:5:26: matrix.disk.volume[1]: "gp3-9": every server of ../../infra/spec/testdata/Pulumi.two-volumes.yaml has no such data volume; valid: gp3-125, gp3-1000`) {
		t.Errorf("validate against the stack config: %v\n%s", err, errOut)
	}
}

// A sweep over SSH whose matrix is disk.volume: each round's engine data lands on the volume it
// names, mounted at --data-mount/NAME; fio checks the volume before load and the manifest keeps
// provisioned beside measured. The volume provisioned beyond what this disk delivers stops its
// run before load, saying which figure and by how much.
func TestRunOnDiskVolumesOverSSH(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	t.Parallel() // its own addresses (127.0.90.x), sshd, loop devices and folders
	srv, n, mount := serverWithTwoVolumes(t, "127.0.90.21")
	client := srv.Node("client-0")
	client.Role, client.PrivateAddress = inventory.RoleClient, "127.0.90.22"
	invFile := writeInventory(t, n, client)
	res, remote := t.TempDir(), t.TempDir()
	pb := writePlaybook(t, "name: vols\ncluster: {servers: 1, clients: 1}\npreload: {orders: 2k}\nload: {probe_rate: 200/s}\n"+
		"warmup: 1s\nduration: 3s\nmatrix:\n  disk.volume: [fast, slow]\n")
	cmd := exec.Command(rigBin, "run", "--results", res, "--inventory", invFile, "--ssh-key", srv.ClientKeyFile, "--remote-dir", remote,
		"--data-mount", mount, "--data-fs", "ext4", pb)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("rig run: exit 0, want a failure (the slow volume's run)\nstderr:\n%s", stderr.String())
	}
	sweeps, _ := filepath.Glob(filepath.Join(res, "*-vols"))
	if len(sweeps) != 1 {
		t.Fatalf("sweep folders %v\nstderr:\n%s", sweeps, stderr.String())
	}
	type manifest struct {
		Status     string                      `json:"status"`
		Error      string                      `json:"error"`
		Disks      map[string]disk.Result      `json:"disks"`
		DiskChecks map[string]disk.VolumeCheck `json:"disk_checks"`
	}
	var ok, short manifest
	readJSON(t, filepath.Join(sweeps[0], "r01", "manifest.json"), &ok)
	readJSON(t, filepath.Join(sweeps[0], "r02", "manifest.json"), &short)
	d, c := ok.Disks["node-0"], ok.DiskChecks["node-0"]
	if ok.Status != "ok" || d.Volume != "fast" || d.Device != n.Volumes[0].VolumeID || d.MountPoint != filepath.Join(mount, "fast") ||
		c.Volume != "fast" || !c.Compared || c.Provisioned.ThroughputMiBps != 1 || c.Measured.SeqWriteMBps <= 0 || c.Error != "" {
		t.Errorf("r01 (fast): status %s %s, disk %+v, check %+v\nstderr:\n%s", ok.Status, ok.Error, d, c, stderr.String())
	}
	if log, _ := os.ReadFile(filepath.Join(sweeps[0], "r01", "node-0", "engine.log")); !bytes.Contains(log, []byte(filepath.Join(mount, "fast", "rig"))) {
		t.Errorf("r01's engine did not keep its data on the fast volume")
	}
	c = short.DiskChecks["node-0"]
	if short.Status != "failed" || c.Volume != "slow" || c.Error == "" ||
		!strings.Contains(short.Error, "node-0's data volume slow") || !strings.Contains(short.Error, "before load") ||
		!strings.Contains(short.Error, "of the provisioned 100000 MiB/s") {
		t.Errorf("r02 (slow): status %s, error %q, check %+v", short.Status, short.Error, c)
	}
	if ev, _ := os.ReadFile(filepath.Join(sweeps[0], "r02", "events.jsonl")); !bytes.Contains(ev, []byte(`"start"`)) ||
		bytes.Contains(ev, []byte("load_start")) || bytes.Contains(ev, []byte("engines_started")) {
		t.Errorf("r02 started engines or load on a volume that falls short:\n%s", ev)
	}
	assertNoProcessesOf(t, filepath.Join(remote, "rig-node-0/bin/rig"), filepath.Join(remote, "rig-client-0/bin/rig"))
}

// serverWithTwoVolumes starts an sshd and gives its server node-0 (at private address addr) two
// data volumes, loop devices of 96 MiB standing in for EBS: fast, provisioned for less than this
// disk delivers (1 MiB/s, 100 IOPS), and slow, for far more (100,000 MiB/s). It returns where
// they are to be mounted (--data-mount) and unmounts them when the test ends.
func serverWithTwoVolumes(t *testing.T, addr string) (*sshdtest.Server, inventory.Node, string) {
	t.Helper()
	tools.Require(t, "fio") // the disk check, on the node
	fast, slow := looptest.Device(t, 96<<20), looptest.Device(t, 96<<20)
	if fast == "" || slow == "" {
		t.Skip("no loop devices here (needs root and losetup)")
	}
	srv := sshdtest.Start(t)
	n := srv.Node("node-0")
	n.PrivateAddress = addr
	n.Volumes = []inventory.Volume{
		{Name: "fast", VolumeID: fast, Type: "gp3", IOPS: 100, ThroughputMiBps: 1},
		{Name: "slow", VolumeID: slow, Type: "gp3", IOPS: 100, ThroughputMiBps: 100000},
	}
	mount := filepath.Join(t.TempDir(), "data")
	t.Cleanup(func() {
		for _, v := range n.Volumes {
			exec.Command("umount", n.MountPoint(mount, v)).Run()
		}
	})
	return srv, n, mount
}
