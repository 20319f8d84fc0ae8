package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// diskFaultPlaybook is diskPlaybook with a load of the given length, no timeline and a slow
// model, which a busy machine's disk still delivers, syncs included (the probe's floor is 80 %:
// a 2 ms sync failed at load 30; these tests check what is named, not figures). Its burst
// holds more than a probe writes (3 passes of 18 MiB: 7 s at 8 MB/s), so each server's probe
// takes its syncs' time, ~1.3 s, not its transfer's, ~9 s: the model keeps its cap, and so its
// own path (no passthrough), and the probe every phase and its check.
const diskFaultPlaybook = `
name: disk-fault
cluster: {servers: 3, clients: 1}
engine: {sync_level: 2}
disk: {throughput: 8MB/s, sync_latency: 20ms, burst: 20s}
preload: {orders: 2k}
load: {probe_rate: 200/s}
warmup: 1s
duration: %s
`

func needsFUSERoot(t *testing.T) {
	t.Helper()
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("end-to-end run as root (it mounts FUSE)")
	}
}

// mountFolder is shortResults whose mounts a failed test left (a killed run's dead models) are
// detached before it is removed, so that no dead mount outlives the test.
func mountFolder(t *testing.T) string {
	t.Helper()
	dir := shortResults(t)
	t.Cleanup(func() { // before shortResults' removal: cleanups run last first
		for mp := range fuseMountsUnder(t, dir) {
			unix.Unmount(mp, unix.MNT_DETACH)
		}
	})
	return dir
}

// Two runs with one --local-data and a disk: block: the second is refused before load, naming
// the run that holds the mountpoints and --local-data, and mounts nothing; the first is
// undisturbed and ends ok. (Both used to mount a model on one mountpoint: when the first
// ended, the second's engines wrote to a dead mount and it still reported ok.)
func TestFaultDiskModelsShareLocalData(t *testing.T) {
	needsFUSERoot(t)
	parallelFault(t)
	data, resA, resB := mountFolder(t), mountFolder(t), mountFolder(t)
	// A's load outlasts B's refusal (~1.5 s after A's load start at load 14) several times over.
	pb := writePlaybook(t, fmt.Sprintf(diskFaultPlaybook, "8s"))
	a, _, errA := startRun(t, "--results", resA, "--first-address", "127.0.133.11", "--local-data", data, pb)
	waitFor(t, "load start", errA, 90*time.Second)
	runA := filepath.Base(onlyRunDir(t, resA))

	b, _, errB := startRun(t, "--results", resB, "--first-address", "127.0.134.11", "--local-data", data, pb)
	err := b.Wait()
	want := "held by a live disk model: run " + runA + " (pid "
	if err == nil || !strings.Contains(errB.String(), want) || !strings.Contains(errB.String(), "another --local-data") {
		t.Errorf("second run on A's --local-data: %v\n%s\nwant a refusal naming %s", err, errB.String(), runA)
	}
	if strings.Contains(errB.String(), "load start") {
		t.Errorf("the second run got to load before it was refused:\n%s", errB.String())
	}
	if err := a.Wait(); err != nil {
		t.Fatalf("run A: %v\n%s", err, errA.String())
	}
	var s summary
	readJSON(t, filepath.Join(onlyRunDir(t, resA), "summary.json"), &s)
	if s.Status != "ok" || s.Probes.N == 0 || s.Probes.Lost != 0 {
		t.Errorf("run A: status %q (%s%s), %d probes, %d lost", s.Status, s.StatusReason, s.Error, s.Probes.N, s.Probes.Lost)
	}
	for _, d := range []string{data, resA, resB} {
		if left := fuseMountsUnder(t, d); len(left) != 0 {
			t.Errorf("mounts left under %s: %v", d, left)
		}
	}
	assertNoProcessesUnder(t, resA)
	assertNoProcessesUnder(t, resB)
}

// The controller SIGKILLed during a disk: run leaves its three models mounted and dead. rig
// archive of the folder skips them and the control sockets, naming each, instead of failing;
// rig report of the abandoned run detaches the mounts and names them (stderr, summary.json,
// report.md); archived again, the folder has no dead mount left to skip.
func TestFaultDiskModelControllerKilled(t *testing.T) {
	needsFUSERoot(t)
	parallelFault(t)
	res := mountFolder(t)
	cmd, _, stderr := startRun(t, "--results", res, "--first-address", "127.0.135.11", writePlaybook(t, fmt.Sprintf(diskFaultPlaybook, "60s")))
	waitFor(t, "load start", stderr, 90*time.Second)
	dir := onlyRunDir(t, res)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for processesOf(dir) {
		if time.Now().After(deadline) {
			t.Fatalf("processes of %s left 20 s after the controller was killed", dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
	nodes := []string{"node-0", "node-1", "node-2"}
	for _, n := range nodes {
		if err := deadMount(filepath.Join(dir, n, "disk")); err != nil {
			t.Error(err)
		}
	}
	sock := filepath.Join(dir, "client-0", "ctl", "loadgen.sock")
	if fi, err := os.Lstat(sock); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("%s after the kill: %v, %v; want the socket the killed load generator left", sock, fi, err)
	}

	// Archived as the kill left it: the dead mounts and the socket are skipped, named.
	id := filepath.Base(dir)
	out, errOut, code := rigRun(t, "archive", dir, "--to", t.TempDir())
	if code != 0 {
		t.Fatalf("rig archive with dead mounts: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"skipped " + id + "/client-0/ctl/loadgen.sock: a socket", "skipped " + id + "/node-0/disk: a dead mount", "verified"} {
		if !strings.Contains(out, want) {
			t.Errorf("rig archive output does not say %q:\n%s", want, out)
		}
	}

	out, errOut, code = rigRun(t, "report", dir)
	if code != 0 {
		t.Fatalf("rig report: exit %d\n%s%s", code, out, errOut)
	}
	var s struct {
		Status   string   `json:"status"`
		Warnings []string `json:"warnings"`
	}
	readJSON(t, filepath.Join(dir, "summary.json"), &s)
	rep, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	for _, n := range nodes {
		want := "detached the dead disk model mount " + filepath.Join(dir, n, "disk") + " (mounted by run " + id + " (pid "
		if !strings.Contains(errOut, want) || !strings.Contains(strings.Join(s.Warnings, "\n"), want) || !strings.Contains(string(rep), want) {
			t.Errorf("rig report does not name %s/disk as detached (stderr, summary.json, report.md):\n%s", n, errOut)
		}
	}
	if s.Status != "abandoned" {
		t.Errorf("status %q, want abandoned", s.Status)
	}
	if left := fuseMountsUnder(t, res); len(left) != 0 {
		t.Errorf("mounts left after rig report: %v", left)
	}
	if fi, err := os.Stat(filepath.Join(dir, "node-0", "disk")); err != nil || !fi.IsDir() {
		t.Errorf("node-0/disk after rig report: %v; want the plain folder under the mount", err)
	}

	out, errOut, code = rigRun(t, "archive", dir, "--to", t.TempDir())
	if code != 0 || !strings.Contains(out, "skipped "+id+"/client-0/ctl/loadgen.sock: a socket") || strings.Contains(out, "dead mount") {
		t.Errorf("rig archive after rig report: exit %d; want the socket skipped and no dead mount\n%s%s", code, out, errOut)
	}
	t.Logf("rig archive:\n%s", out)
}

// A disk model unmounted under a live run (here detached, as a second run's unmount once did)
// fails the run at once, naming the node and the model, instead of letting it report ok.
func TestFaultDiskModelLostMidRun(t *testing.T) {
	needsFUSERoot(t)
	parallelFault(t)
	res := mountFolder(t)
	cmd, stdout, stderr := startRun(t, "--results", res, "--first-address", "127.0.136.11", writePlaybook(t, fmt.Sprintf(diskFaultPlaybook, "60s")))
	waitFor(t, "load start", stderr, 90*time.Second)
	dir := onlyRunDir(t, res)
	if err := unix.Unmount(filepath.Join(dir, "node-1", "disk"), unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	lost := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("the run ended ok with its disk model lost:\n%s", stderr.String())
		}
	case <-time.After(45 * time.Second):
		t.Fatalf("the run went on 45 s after node-1's disk model was detached (load 60 s):\n%s", stderr.String())
	}
	t.Logf("the run stopped %s after the model was detached", time.Since(lost).Round(time.Millisecond))
	var m struct{ Status, Error string }
	readJSON(t, filepath.Join(runDirOf(t, stdout.String()), "manifest.json"), &m)
	want := "disk model of node-1: disk model lost: " + filepath.Join(dir, "node-1", "disk")
	if m.Status != "failed" || !strings.Contains(m.Error, want) {
		t.Errorf("manifest status %q error %q; want failed naming %q", m.Status, m.Error, want)
	}
	if left := fuseMountsUnder(t, res); len(left) != 0 {
		t.Errorf("mounts left: %v", left)
	}
	assertNoProcessesUnder(t, res)
}

// The controller SIGKILLed during a disk: run with --local-data: the next run on the same
// --local-data detaches the dead models' mounts as it starts, naming each with the run that
// left it, mounts its own and ends ok.
func TestFaultDiskModelNextRunReclaims(t *testing.T) {
	needsFUSERoot(t)
	parallelFault(t)
	data, resA, resB := mountFolder(t), mountFolder(t), mountFolder(t)
	a, _, errA := startRun(t, "--results", resA, "--first-address", "127.0.137.11", "--local-data", data, writePlaybook(t, fmt.Sprintf(diskFaultPlaybook, "60s")))
	waitFor(t, "load start", errA, 90*time.Second)
	runA := filepath.Base(onlyRunDir(t, resA))
	a.Process.Signal(syscall.SIGKILL)
	a.Wait()
	nodes := []string{"node-0", "node-1", "node-2"}
	for _, n := range nodes {
		if err := deadMount(filepath.Join(data, n, "disk")); err != nil {
			t.Fatal(err)
		}
	}
	b, _, errB := startRun(t, "--results", resB, "--first-address", "127.0.138.11", "--local-data", data, writePlaybook(t, fmt.Sprintf(diskFaultPlaybook, "8s")))
	if err := b.Wait(); err != nil {
		t.Fatalf("the next run on the same --local-data: %v\n%s", err, errB.String())
	}
	for _, n := range nodes {
		mp := filepath.Join(data, n, "disk")
		found := false
		for _, line := range strings.Split(errB.String(), "\n") {
			found = found || strings.Contains(line, "detached the dead disk model mount "+mp+" (mounted by run "+runA+" (pid ")
		}
		if !found {
			t.Errorf("the next run does not name %s as detached, left by run %s:\n%s", mp, runA, errB.String())
		}
	}
	var s summary
	readJSON(t, filepath.Join(onlyRunDir(t, resB), "summary.json"), &s)
	if s.Status != "ok" || s.Probes.N == 0 {
		t.Errorf("the next run: status %q (%s%s), %d probes", s.Status, s.StatusReason, s.Error, s.Probes.N)
	}
	for _, d := range []string{data, resA, resB} {
		if left := fuseMountsUnder(t, d); len(left) != 0 {
			t.Errorf("mounts left under %s: %v", d, left)
		}
	}
	assertNoProcessesUnder(t, resB)
}

// deadMount says why mp is not a dead FUSE mount, nil when it is: every access fails with
// ENOTCONN (or ECONNABORTED for a request the connection's abort caught in flight).
func deadMount(mp string) error {
	var st unix.Stat_t
	err := unix.Stat(mp, &st)
	for range 50 {
		if !errors.Is(err, unix.ECONNABORTED) {
			break
		}
		time.Sleep(100 * time.Millisecond)
		err = unix.Stat(mp, &st)
	}
	if !errors.Is(err, unix.ENOTCONN) {
		return fmt.Errorf("stat %s after the controller was killed: %v; want ENOTCONN (the dead model this test is about)", mp, err)
	}
	return nil
}
