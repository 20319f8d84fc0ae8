package ssh

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/internal/sshdtest"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/target"
)

// progressLog collects progress lines.
type progressLog struct {
	mu    sync.Mutex
	lines []string
}

func (p *progressLog) add(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, fmt.Sprintf(format, args...))
}

func (p *progressLog) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// The same boot id is a node that has not gone down yet; failed reads are a node that is down;
// another id ends the wait.
func TestWaitBootWaitsForAnotherBoot(t *testing.T) {
	reads := []error{nil, nil, errors.New("connection refused"), errors.New("connection refused"), nil}
	ids := []string{"boot-1", "boot-1", "", "", "boot-2"}
	i := 0
	var p progressLog
	boot, down, err := waitBoot(context.Background(), bootWait{Node: "node-1", Old: "boot-1", Timeout: time.Minute,
		Every: time.Millisecond, Progress: p.add,
		Read: func(context.Context) (string, error) {
			defer func() { i++ }()
			return ids[i], reads[i]
		}})
	if err != nil || boot != "boot-2" || !down || i != 5 {
		t.Fatalf("waitBoot = %q, down %v, %v after %d reads; want boot-2, down, no error after 5", boot, down, err, i)
	}
	if s := p.String(); !strings.Contains(s, "node-1: down (connection refused)") || !strings.Contains(s, "node-1: back in boot boot-2") {
		t.Fatalf("progress:\n%s", s)
	}
}

// A node that keeps its boot id is not back, however long it answers: the wait ends at its
// bound with an error naming the node, the bound and what it last read, and reports progress
// on the way.
func TestWaitBootTimesOut(t *testing.T) {
	var p progressLog
	reads := 0
	_, down, err := waitBoot(context.Background(), bootWait{Node: "node-2", Old: "boot-1", Timeout: 300 * time.Millisecond,
		Every: 10 * time.Millisecond, Report: 100 * time.Millisecond, Progress: p.add,
		Read: func(context.Context) (string, error) { reads++; return "boot-1", nil }})
	if !errors.Is(err, errNotBack) || down {
		t.Fatalf("waitBoot: %v (down %v), want errNotBack", err, down)
	}
	for _, want := range []string{"node-2", "within 300ms of the power cut", "still in boot boot-1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if reads < 5 {
		t.Errorf("%d reads in 300 ms at one per 10 ms", reads)
	}
	if !strings.Contains(p.String(), "node-2: waiting for another boot") {
		t.Errorf("no progress while waiting:\n%s", p.String())
	}
}

// A cancelled run ends the wait at once.
func TestWaitBootCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := waitBoot(ctx, bootWait{Node: "node-0", Old: "b", Timeout: time.Minute,
		Read: func(ctx context.Context) (string, error) { return "", ctx.Err() }})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("waitBoot on a cancelled context: %v", err)
	}
}

// fakeReboot plays the node's kernel for a power cut, without touching the real /proc: when
// the agent writes "b" to trigger, it kills the agent's process (SIGKILL: nothing is shut
// down or synced) and gives root's boot id a new value, as a reboot would. It returns the pids
// it killed when the test ends.
func fakeReboot(t *testing.T, trigger, root string, pid func() int, newBoot string) <-chan int {
	t.Helper()
	killed := make(chan int, 1)
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if b, _ := os.ReadFile(trigger); string(b) != "b" {
				continue
			}
			p := pid()
			if err := syscall.Kill(p, syscall.SIGKILL); err != nil {
				t.Errorf("fake reboot: kill agent %d: %v", p, err)
			}
			if err := os.WriteFile(trigger, nil, 0o644); err != nil {
				t.Errorf("fake reboot: %v", err)
			}
			if err := os.WriteFile(filepath.Join(root, "proc/sys/kernel/random/boot_id"), []byte(newBoot+"\n"), 0o644); err != nil {
				t.Errorf("fake reboot: %v", err)
			}
			killed <- p
			return
		}
	}()
	return killed
}

// A power cut over a real OpenSSH server, with the reboot played by the test: the agent,
// staged with a trigger file of the test's and a fake /proc, cuts the power for the run that
// holds its lease; the cluster waits for the new boot id over SSH and starts the agent anew,
// whose client the cluster hands out from then on.
func TestRebootOverSSH(t *testing.T) {
	srv := sshdtest.StartWith(t, sshdtest.Options{Host: "127.0.105.2"})
	tr := sshTransport(t, srv)
	node := srv.Node("node-1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	root := t.TempDir()
	for rel, v := range map[string]string{"proc/sys/kernel/sysrq": "0", "proc/sys/kernel/random/boot_id": "boot-1"} {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	trigger := filepath.Join(t.TempDir(), "sysrq-trigger")
	if err := os.WriteFile(trigger, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	opts := Options{Base: t.TempDir(), Root: root, SysrqTrigger: trigger, Logger: quiet()}
	t.Cleanup(func() {
		if err := Stop(context.Background(), tr, node, opts); err != nil {
			t.Errorf("stop agent: %v", err)
		}
	})
	res, err := Stage(ctx, tr, node, opts)
	if err != nil {
		t.Fatal(err)
	}
	const run = "run-power"
	c := &Cluster{inv: &inventory.Inventory{Nodes: []inventory.Node{node}}, tr: tr, stage: opts, run: run, log: quiet(),
		agents:  map[string]*agent.Client{node.Name: target.AgentClient(tr, node, res.Socket, run)},
		sockets: map[string]string{node.Name: res.Socket}}
	if _, err := c.Agent(node.Name).Lease(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	killed := fakeReboot(t, trigger, root, func() int { return res.PID }, "boot-2")

	var p progressLog
	old, err := c.PowerCut(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.AwaitBoot(ctx, node, old, target.RebootOptions{Timeout: 30 * time.Second, Progress: p.add})
	if err != nil {
		t.Fatalf("reboot: %v\nprogress:\n%s", err, p.String())
	}
	if pid := <-killed; pid != res.PID {
		t.Fatalf("the fake reboot killed %d, the agent was %d", pid, res.PID)
	}
	if old != "boot-1" || got.OldBoot != old || got.NewBoot != "boot-2" || !got.Agent.Started || got.Agent.PID == res.PID || got.Back <= 0 {
		t.Fatalf("rebooted: %+v (agent before: pid %d)", got, res.PID)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "proc/sys/kernel/sysrq")); strings.TrimSpace(string(b)) != "128" {
		t.Errorf("kernel.sysrq after the cut: %q, want the reboot bit set (128)", b)
	}
	// The cluster's client reaches the new agent, as the run: it holds no lease yet.
	pr, err := c.Agent(node.Name).Ping(ctx)
	if err != nil || pr.PID != got.Agent.PID {
		t.Fatalf("ping after the reboot: %+v %v (new agent pid %d)", pr, err, got.Agent.PID)
	}
	if ls, err := c.Agent(node.Name).LeaseState(ctx); err != nil || ls.Run != "" {
		t.Fatalf("lease of the new agent: %+v %v; want none held", ls, err)
	}
	if !strings.Contains(p.String(), "node-1: back in boot boot-2") {
		t.Errorf("progress:\n%s", p.String())
	}
}
