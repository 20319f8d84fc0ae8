package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/internal/sshdtest"
	"github.com/rig-dev/rig/internal/tools"
	"github.com/rig-dev/rig/rundir"
)

// powerSSHPlaybook: probes under load; at 3 s two servers of three (a majority) lose power, and
// every server must be ready again before the end.
const powerSSHPlaybook = `
name: power-loss-ssh
cluster: {servers: 3, clients: 1}
engine: {sync_level: 2}
preload: {orders: 2k}
load: {probe_rate: 200/s}
warmup: 1s
duration: 24s
timeline:
  - {at: 3s, power_loss: {nodes: node-0+node-1, relaunch_after: 1s}}
  - {at: 4s, wait_for: {phase: ready, timeout: 19s}}
`

// rebootDown is how long a node the fake kernel reboots stays in its old boot: longer than the
// run's lease (--lease 5s), so a lease renewer that did not wait for the reboot fails the run.
const rebootDown = 6 * time.Second

// fakeKernels play the kernel of every server for a power cut, never touching the real /proc:
// each agent is staged with --sysrq-trigger and --power-proc in procs/NODE; when "b" lands in a
// trigger, the node's agent and engine are SIGKILLed (nothing synced, nothing else dropped: the
// page cache is this machine's, so what an engine wrote survives) and, rebootDown later, the
// boot id changes, as if the node had booted again. It returns the reboots seen, per node.
func fakeKernels(t *testing.T, procs, remote string, servers []string) func() map[string]int {
	t.Helper()
	for _, n := range append(servers, "client-0") {
		for rel, v := range map[string]string{"sys/kernel/sysrq": "0", "sys/kernel/random/boot_id": n + "-boot-1", "sysrq-trigger": ""} {
			p := filepath.Join(procs, n, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var mu sync.Mutex
	reboots := map[string]int{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, n := range servers {
		wg.Go(func() {
			trigger := filepath.Join(procs, n, "sysrq-trigger")
			for {
				select {
				case <-done:
					return
				case <-time.After(20 * time.Millisecond):
				}
				if b, _ := os.ReadFile(trigger); !bytes.Equal(b, []byte("b")) {
					continue
				}
				killed := killUnder(t, filepath.Join(remote, "rig-"+n)+"/")
				os.WriteFile(trigger, nil, 0o644)
				mu.Lock()
				reboots[n]++
				boot := fmt.Sprintf("%s-boot-%d", n, reboots[n]+1)
				mu.Unlock()
				t.Logf("fake kernel of %s: power cut: SIGKILL %v; back in %s as %s", n, killed, rebootDown, boot)
				select {
				case <-done:
					return
				case <-time.After(rebootDown):
				}
				os.WriteFile(filepath.Join(procs, n, "sys/kernel/random/boot_id"), []byte(boot), 0o644)
			}
		})
	}
	return func() map[string]int {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return reboots
	}
}

// killUnder SIGKILLs every process whose command line names a path under dir (a node's agent and
// engine, both run from its staged binary) and returns their pids.
func killUnder(t *testing.T, dir string) []int {
	t.Helper()
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(cmdline, []byte(dir)) && syscall.Kill(pid, syscall.SIGKILL) == nil {
			out = append(out, pid)
		}
	}
	return out
}

// TestPowerLossOverSSH runs power_loss on the SSH target (Debian's sshd on loopback), with the
// reboot played by fakeKernels: the controller cuts the power through two agents, waits for each
// node to come back in another boot, starts its agent again, claims it, and starts the engine
// afresh; the run ends ok with every server's state equal, and the durability check ran.
func TestPowerLossOverSSH(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	t.Parallel()            // its own addresses (127.0.105.x, 127.0.106.x), sshd and folders
	tools.Require(t, "fio") // the disk check of node-0's data volume, on the node
	srv := sshdtest.StartWith(t, sshdtest.Options{Host: "127.0.105.3"})
	servers := []string{"node-0", "node-1", "node-2"}
	// node-0's engine data is on a data volume of its own (a loop device standing in for EBS),
	// which the controller mounts again once the node is back.
	invFile, _, dataMount := sshInventory(t, srv, "ssh-power-test", "127.0.106")

	res, remote, procs := t.TempDir(), t.TempDir(), t.TempDir()
	stop := fakeKernels(t, procs, remote, servers)
	args := []string{"run", "--results", res, "--inventory", invFile, "--ssh-key", srv.ClientKeyFile, "--remote-dir", remote,
		"--lease", "5s", "--sysrq-trigger", filepath.Join(procs, "{node}", "sysrq-trigger"), "--agent-power-proc", filepath.Join(procs, "{node}")}
	if dataMount != "" {
		args = append(args, "--data-mount", dataMount, "--data-fs", "ext4")
	}
	out, errOut, code := rigRun(t, append(args, writePlaybook(t, powerSSHPlaybook))...)
	reboots := stop()
	if code != 0 {
		t.Fatalf("rig run exited %d:\n%s\n%s", code, out, errOut)
	}
	dir := runDirOf(t, out)
	var s analysis.Summary
	readJSON(t, filepath.Join(dir, "summary.json"), &s)
	if s.Status != "ok" {
		t.Fatalf("status %s (%s):\n%s", s.Status, s.StatusReason, errOut)
	}
	hashes := map[string]bool{}
	for _, st := range s.Nodes {
		hashes[st.StateHash] = true
	}
	if len(hashes) != 1 || hashes[""] {
		t.Errorf("state hashes after the power loss: %+v", s.Nodes)
	}
	if d := s.Durability; d == nil || d.Acked < 500 || d.Lost != 0 || !strings.Contains(d.Faults, "power loss of") {
		t.Errorf("durability %+v; want the ledger checked after a power loss, none lost", d)
	}

	evs, bad, err := rundir.ReadEvents(filepath.Join(dir, rundir.EventsFile))
	if err != nil || len(bad) > 0 {
		t.Fatalf("events: %v %v", err, bad)
	}
	cut := map[string]bool{}
	for _, e := range evs {
		if e.Action != nil && actions.KillOf(e) != nil && actions.KillOf(e).PowerLoss && actions.KillOf(e).Reboot {
			cut[e.Node] = true
		}
	}
	if len(cut) != 2 || !cut["node-0"] || !cut["node-1"] {
		t.Fatalf("power-loss events for %v; want node-0 and node-1", cut)
	}
	for n := range cut {
		if reboots[n] != 1 {
			t.Errorf("%s: the fake kernel saw %d power cuts, want 1", n, reboots[n])
		}
		var notes []string
		relaunched := false
		for _, e := range evs {
			if e.Node != n {
				continue
			}
			if e.Note != nil && e.Note.Text != "" {
				notes = append(notes, e.Note.Text)
			}
			relaunched = relaunched || (e.Action != nil && e.Action.Name == actions.ActRelaunch)
		}
		all := strings.Join(notes, "\n")
		for _, want := range []string{
			"power cut in boot " + n + "-boot-1", "lease renewals wait",
			"in boot " + n + "-boot-2 (SSH answered throughout): agent started", "lease claimed again",
			"rebooted without sync, from boot " + n + "-boot-1 to boot " + n + "-boot-2",
		} {
			if !strings.Contains(all, want) {
				t.Errorf("%s's notes lack %q:\n%s", n, want, all)
			}
		}
		if n == "node-0" && dataMount != "" && !strings.Contains(all, "data volume data mounted on "+dataMount) {
			t.Errorf("node-0's notes do not say its data volume was mounted again:\n%s", all)
		}
		if !relaunched {
			t.Errorf("%s: no relaunch event after its power loss", n)
		}
	}
	assertNoProcessesOf(t, filepath.Join(remote, "rig-node-0/bin/rig"), filepath.Join(remote, "rig-node-1/bin/rig"),
		filepath.Join(remote, "rig-node-2/bin/rig"), filepath.Join(remote, "rig-client-0/bin/rig"))
}
