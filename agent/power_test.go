package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// procTree is a fake root with the two /proc files a power cut reads (kernel.sysrq and the
// boot id), and a trigger file beside it. Nothing here ever touches the real /proc: a write
// to /proc/sysrq-trigger would reboot the machine running the tests.
func procTree(t *testing.T, sysrq string) (root, trigger string) {
	t.Helper()
	root = t.TempDir()
	for rel, v := range map[string]string{"proc/sys/kernel/sysrq": sysrq, "proc/sys/kernel/random/boot_id": "3f1c-boot-1\n"} {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	trigger = filepath.Join(t.TempDir(), "sysrq-trigger")
	if err := os.WriteFile(trigger, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return root, trigger
}

func readTrimmed(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// An agent started without a trigger (every agent of the local target, every test's) refuses a
// power cut, even for the run holding its lease.
func TestPowerCutRefusedWithoutTrigger(t *testing.T) {
	root, _ := procTree(t, "0")
	a := startAgentWith(t, Options{Dir: t.TempDir(), Root: root})
	a.c.Run = "run-1"
	if _, err := a.c.Lease(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err := a.c.PowerCut(context.Background())
	if err == nil || !strings.Contains(err.Error(), "501") || !strings.Contains(err.Error(), "--sysrq-trigger") {
		t.Fatalf("power cut without a trigger: %v; want 501 naming --sysrq-trigger", err)
	}
	if got := readTrimmed(t, filepath.Join(root, "proc/sys/kernel/sysrq")); got != "0" {
		t.Errorf("kernel.sysrq changed to %q by a refused cut", got)
	}
}

// The run holding the lease cuts the power: the agent answers with the boot it leaves, sets
// kernel.sysrq's reboot bit where it was clear, and then writes "b" to its trigger. A request
// from no run or another run writes nothing.
func TestPowerCutWritesTrigger(t *testing.T) {
	for _, c := range []struct{ prior, after string }{{"0", "128"}, {"16", "144"}, {"1", "1"}, {"176", "176"}} {
		t.Run("sysrq="+c.prior, func(t *testing.T) {
			root, trigger := procTree(t, c.prior)
			dir := t.TempDir()
			a := startAgentWith(t, Options{Dir: dir, Root: root, SysrqTrigger: trigger})
			ctx := context.Background()
			if _, err := a.c.PowerCut(ctx); err == nil || !strings.Contains(err.Error(), "409") {
				t.Fatalf("power cut with no run: %v; want 409", err)
			}
			a.c.Run = "run-1"
			if _, err := a.c.Lease(ctx, time.Minute); err != nil {
				t.Fatal(err)
			}
			other := NewClient("n0", dialSocket(SocketPath(dir)))
			defer other.Close()
			other.Run = "run-2"
			if _, err := other.PowerCut(ctx); err == nil || !strings.Contains(err.Error(), "409") {
				t.Fatalf("power cut by another run: %v; want 409", err)
			}
			time.Sleep(2 * powerCutDelay)
			if got := readTrimmed(t, trigger); got != "" {
				t.Fatalf("trigger holds %q after refused cuts", got)
			}

			res, err := a.c.PowerCut(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.BootID != "3f1c-boot-1" || res.Sysrq != c.prior {
				t.Errorf("answer %+v; want boot 3f1c-boot-1, sysrq %s", res, c.prior)
			}
			if got := readTrimmed(t, filepath.Join(root, "proc/sys/kernel/sysrq")); got != c.after {
				t.Errorf("kernel.sysrq %s became %q; want %s", c.prior, got, c.after)
			}
			deadline := time.Now().Add(5 * time.Second)
			for readTrimmed(t, trigger) != "b" {
				if time.Now().After(deadline) {
					t.Fatalf("trigger holds %q 5s after the cut; want b", readTrimmed(t, trigger))
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
