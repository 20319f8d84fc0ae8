package tune_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/agent/tune"
	"github.com/rig-dev/rig/agent/tune/tunetest"
	"github.com/rig-dev/rig/internal/tools"
)

func opts(t *testing.T, root string) tune.Options {
	return tune.Options{Root: root, StateFile: filepath.Join(t.TempDir(), tune.StateFileName), Logger: slog.New(slog.DiscardHandler)}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var fullProfile = tune.Profile{
	"thp":                          "never",
	"thp.defrag":                   "defer+madvise",
	"vm.dirty_ratio":               "40",
	"vm.dirty_background_ratio":    "5",
	"vm.dirty_expire_centisecs":    "1500",
	"vm.dirty_writeback_centisecs": "100",
	"vm.swappiness":                "1",
	"net.core.rmem_max":            "128MiB",
	"net.core.wmem_max":            "16MiB",
	"net.core.rmem_default":        "1MiB",
	"net.core.netdev_max_backlog":  "30000",
}

func TestApplyRevertFakeTree(t *testing.T) {
	ctx := context.Background()
	root := tunetest.FakeTree(t, t.TempDir())
	before := tunetest.Snapshot(t, root)
	o := opts(t, root)

	p := tune.Profile{}
	for k, v := range fullProfile {
		p[k] = v
	}
	rep, err := tune.Apply(ctx, o, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Changes) != len(fullProfile) {
		t.Fatalf("%d changes, want %d: %+v", len(rep.Changes), len(fullProfile), rep.Changes)
	}
	for _, c := range rep.Changes {
		if c.After != c.Want {
			t.Errorf("%s: after %q want %q", c.Name, c.After, c.Want)
		}
	}
	// The files say what the kernel's would say.
	checks := map[string]string{
		"sys/kernel/mm/transparent_hugepage/enabled": "always madvise [never]\n",
		"sys/kernel/mm/transparent_hugepage/defrag":  "always defer [defer+madvise] madvise never\n",
		"proc/sys/vm/dirty_ratio":                    "40\n",
		"proc/sys/net/core/rmem_max":                 "134217728\n",
		"proc/sys/net/core/rmem_default":             "1048576\n",
	}
	for p, want := range checks {
		if got := readFile(t, filepath.Join(root, p)); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	st, err := tune.LoadState(o.StateFile)
	if err != nil {
		t.Fatal(err)
	}
	prior := map[string]string{}
	for _, v := range st.Prior {
		prior[v.Name] = v.Value
	}
	want := map[string]string{"thp.enabled": "madvise", "thp.defrag": "madvise", "vm.dirty_ratio": "20", "vm.dirty_bytes": "0",
		"vm.dirty_background_ratio": "10", "vm.dirty_background_bytes": "0", "vm.dirty_expire_centisecs": "3000",
		"vm.dirty_writeback_centisecs": "500", "vm.swappiness": "60", "net.core.rmem_max": "212992", "net.core.wmem_max": "212992",
		"net.core.rmem_default": "212992", "net.core.netdev_max_backlog": "1000"}
	if !reflect.DeepEqual(prior, want) {
		t.Fatalf("recorded prior values\n got %v\nwant %v", prior, want)
	}

	// Read reports the effective values (what the manifest records).
	got, err := tune.Read(ctx, o, []string{"thp", "vm.swappiness"})
	if err != nil || got["thp.enabled"] != "never" || got["vm.swappiness"] != "1" {
		t.Fatalf("Read: %v %v", got, err)
	}

	if _, err := tune.Revert(ctx, o); err != nil {
		t.Fatal(err)
	}
	if after := tunetest.Snapshot(t, root); !reflect.DeepEqual(before, after) {
		t.Fatalf("tree differs after revert:\nbefore %v\nafter  %v", before, after)
	}
	if _, err := os.Stat(o.StateFile); !os.IsNotExist(err) {
		t.Fatal("state file left after a complete revert")
	}
	if _, err := tune.Revert(ctx, o); !errors.Is(err, tune.ErrNotApplied) {
		t.Fatalf("second revert: want ErrNotApplied, got %v", err)
	}
}

// Two Applies before one Revert: the first recorded values win, so Revert goes back to the
// state before any tuning.
func TestApplyTwiceKeepsFirstPrior(t *testing.T) {
	ctx := context.Background()
	root := tunetest.FakeTree(t, t.TempDir())
	before := tunetest.Snapshot(t, root)
	o := opts(t, root)
	if _, err := tune.Apply(ctx, o, tune.Profile{"vm.dirty_ratio": "30"}); err != nil {
		t.Fatal(err)
	}
	rep, err := tune.Apply(ctx, o, tune.Profile{"vm.dirty_ratio": "35", "vm.swappiness": "5"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Changes[0].Name != "vm.dirty_ratio" || rep.Changes[0].Before != "30" {
		t.Fatalf("second apply saw %+v", rep.Changes)
	}
	st, _ := tune.LoadState(o.StateFile)
	if v := st.Prior[0]; v.Name != "vm.dirty_ratio" || v.Value != "20" {
		t.Fatalf("first prior %+v, want vm.dirty_ratio=20", v)
	}
	if st.Applied["vm.dirty_ratio"] != "35" || st.Applied["vm.swappiness"] != "5" {
		t.Fatalf("applied %v", st.Applied)
	}
	if _, err := tune.Revert(ctx, o); err != nil {
		t.Fatal(err)
	}
	if after := tunetest.Snapshot(t, root); !reflect.DeepEqual(before, after) {
		t.Fatalf("tree differs after revert")
	}

	// A state file recorded for another root is not applied over or reverted blindly.
	if _, err := tune.Apply(ctx, o, tune.Profile{"vm.swappiness": "7"}); err != nil {
		t.Fatal(err)
	}
	o2 := o
	o2.Root = t.TempDir()
	if _, err := tune.Revert(ctx, o2); err == nil || !strings.Contains(err.Error(), "recorded for root") {
		t.Fatalf("want root mismatch, got %v", err)
	}
	tune.Revert(ctx, o)
}

// A setting that cannot be read fails Apply before anything changed; one that does not read
// back as written fails it naming the setting.
func TestApplyFailures(t *testing.T) {
	ctx := context.Background()
	root := tunetest.FakeTree(t, t.TempDir())
	o := opts(t, root)
	os.Remove(filepath.Join(root, "proc/sys/vm/swappiness"))
	before := tunetest.Snapshot(t, root)
	_, err := tune.Apply(ctx, o, tune.Profile{"vm.dirty_ratio": "30", "vm.swappiness": "1"})
	if err == nil || !strings.Contains(err.Error(), "vm.swappiness") {
		t.Fatalf("want an error naming vm.swappiness, got %v", err)
	}
	if after := tunetest.Snapshot(t, root); !reflect.DeepEqual(before, after) {
		t.Fatal("a failed Apply changed the tree")
	}
	if _, err := os.Stat(o.StateFile); !os.IsNotExist(err) {
		t.Fatal("a failed read left a state file")
	}

	// /dev/null takes any write and reads back empty: the value "did not take".
	root = tunetest.FakeTree(t, t.TempDir())
	before = tunetest.Snapshot(t, root)
	o = opts(t, root)
	p := filepath.Join(root, "proc/sys/net/core/rmem_max")
	os.Remove(p)
	os.Symlink("/dev/null", p)
	_, err = tune.Apply(ctx, o, tune.Profile{"net.core.rmem_max": "4MiB", "vm.swappiness": "1"})
	if err == nil || !strings.Contains(err.Error(), "net.core.rmem_max: wrote 4194304, read back ") || strings.Contains(err.Error(), "swappiness") {
		t.Fatalf("want a read-back failure naming net.core.rmem_max only, got %v", err)
	}
	if got := readFile(t, filepath.Join(root, "proc/sys/vm/swappiness")); got != "1\n" {
		t.Fatalf("swappiness %q", got)
	}
	if _, err := tune.Revert(ctx, o); err != nil {
		t.Fatal(err)
	}
	os.Remove(p)
	os.WriteFile(p, []byte("212992\n"), 0o644)
	if after := tunetest.Snapshot(t, root); !reflect.DeepEqual(before, after) {
		t.Fatal("revert after a failed apply did not restore the tree")
	}
}

// Revert from another process: all it has is the state file.
func TestRevertInAnotherProcess(t *testing.T) {
	if os.Getenv("RIG_TUNE_HELPER") != "" {
		o := tune.Options{Root: os.Getenv("RIG_TUNE_ROOT"), StateFile: os.Getenv("RIG_TUNE_STATE")}
		var err error
		if os.Getenv("RIG_TUNE_HELPER") == "apply" {
			_, err = tune.Apply(context.Background(), o, tune.Profile{"thp": "always", "vm.dirty_writeback_centisecs": "200"})
		} else {
			_, err = tune.Revert(context.Background(), o)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	root := tunetest.FakeTree(t, t.TempDir())
	before := tunetest.Snapshot(t, root)
	state := filepath.Join(t.TempDir(), "state.json")
	for _, step := range []string{"apply", "revert"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRevertInAnotherProcess$")
		cmd.Env = append(os.Environ(), "RIG_TUNE_HELPER="+step, "RIG_TUNE_ROOT="+root, "RIG_TUNE_STATE="+state)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", step, err, out)
		}
		if step == "apply" && readFile(t, filepath.Join(root, "sys/kernel/mm/transparent_hugepage/enabled")) != "[always] madvise never\n" {
			t.Fatal("apply did not take")
		}
	}
	if after := tunetest.Snapshot(t, root); !reflect.DeepEqual(before, after) {
		t.Fatal("tree differs after a revert in another process")
	}
}

func TestParseProfile(t *testing.T) {
	p, err := tune.ParseProfile("p.yaml", []byte("# comment\nthp: never\nvm.dirty_ratio: 20\nnet.core.rmem_max: 128MiB\nring.eth0.rx: 4096\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := tune.Profile{"thp.enabled": "never", "vm.dirty_ratio": "20", "net.core.rmem_max": "134217728", "ring.eth0.rx": "4096"}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("got %v", p)
	}
	if p, err := tune.ParseProfile("p.json", []byte(`{"vm.swappiness": 1, "thp.defrag": "never"}`)); err != nil || p["vm.swappiness"] != "1" {
		t.Fatalf("json: %v %v", p, err)
	}
	for _, tc := range []struct{ in, want string }{
		{"vm.dirty_ratio: 20\nvm.dirty_ratoi: 5\n", `p.yaml:2:1: unknown setting "vm.dirty_ratoi"; valid settings: net.core.netdev_max_backlog`},
		{"vm.dirty_ratio: 200\n", "p.yaml:1:17: vm.dirty_ratio: 200 is out of range 0..100"},
		{"thp: sometimes\n", `p.yaml:1:6: thp.enabled: "sometimes" is not one of always, madvise, never`},
		{"net.core.rmem_max: 12 parsecs\n", `p.yaml:1:20: net.core.rmem_max: "12 parsecs" is not an integer number of bytes`},
		{"thp: never\nthp.enabled: never\n", "p.yaml:2:1: thp.enabled is set twice"},
		{"vm.swappiness: [1, 2]\n", "p.yaml:1:16: vm.swappiness: want a single value"},
		{"- vm.swappiness\n", "p.yaml:1:1: a tuning profile is a mapping"},
		{"vm.swappiness: 1\n  bad: indent\n", "p.yaml:"},
		{"ring.this-name-is-too-long-for-linux.rx: 1\n", `p.yaml:1:1: unknown setting "ring.this-name-is-too-long-for-linux.rx"`},
		{"", "p.yaml: tuning profile is empty"},
	} {
		_, err := tune.ParseProfile("p.yaml", []byte(tc.in))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want prefix %q", tc.in, err, tc.want)
		}
	}
}

// An ethtool stand-in that keeps ring sizes in files, so the ring logic (record, apply, read
// back, revert, limit check) runs without an ENA NIC; TestRingsRealEthtool covers the real tool.
func fakeEthtool(t *testing.T) (bin, dir string) {
	dir = t.TempDir()
	os.WriteFile(filepath.Join(dir, "rx"), []byte("1024\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "tx"), []byte("1024\n"), 0o644)
	bin = filepath.Join(dir, "ethtool")
	script := `#!/bin/sh
d=` + dir + `
case "$1" in
-g) printf 'Ring parameters for %s:\nPre-set maximums:\nRX:\t\t8192\nRX Mini:\tn/a\nRX Jumbo:\tn/a\nTX:\t\t4096\nCurrent hardware settings:\nRX:\t\t%s\nRX Mini:\tn/a\nRX Jumbo:\tn/a\nTX:\t\t%s\nRX Buf Len:\t\tn/a\n' "$2" "$(cat $d/rx)" "$(cat $d/tx)" ;;
-G) [ "$2" = eth9 ] || { echo "no such device $2" >&2; exit 1; }; echo "$4" > $d/$3 ;;
esac
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, dir
}

func TestRings(t *testing.T) {
	ctx := context.Background()
	bin, dir := fakeEthtool(t)
	root := tunetest.FakeTree(t, t.TempDir())
	o := opts(t, root)

	// Without an explicit ethtool, a fake root refuses to touch a real NIC.
	if _, err := tune.Apply(ctx, o, tune.Profile{"ring.eth9.rx": "4096"}); err == nil || !strings.Contains(err.Error(), "ring sizes live in the NIC driver") {
		t.Fatalf("want refusal, got %v", err)
	}
	os.Remove(o.StateFile)

	o.Ethtool = bin
	rep, err := tune.Apply(ctx, o, tune.Profile{"ring.eth9.rx": "4096", "ring.eth9.tx": "2048", "vm.swappiness": "10"})
	if err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(dir, "rx")) != "4096\n" || readFile(t, filepath.Join(dir, "tx")) != "2048\n" {
		t.Fatal("rings not set")
	}
	if last := rep.Changes[len(rep.Changes)-1]; !strings.HasPrefix(last.Name, "ring.") {
		t.Fatalf("rings must be applied last (a ring change resets the NIC): %+v", rep.Changes)
	}
	if _, err := tune.Revert(ctx, o); err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(dir, "rx")) != "1024\n" || readFile(t, filepath.Join(dir, "tx")) != "1024\n" {
		t.Fatal("rings not reverted")
	}

	_, err = tune.Apply(ctx, o, tune.Profile{"ring.eth9.tx": "8192"})
	if err == nil || !strings.Contains(err.Error(), "ring.eth9.tx") || !strings.Contains(err.Error(), "at most 4096") {
		t.Fatalf("want a limit error naming ring.eth9.tx, got %v", err)
	}
	tune.Revert(ctx, o)
}

func requireRoot(t *testing.T, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s needs root, and CI runs as root", what)
		}
		t.Skipf("%s needs root", what)
	}
}

func sysctlN(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command(tools.Require(t, "sysctl"), "-n", name).Output()
	if err != nil {
		t.Fatalf("sysctl -n %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

// One real setting on this machine: apply, check with sysctl -n, revert, check again.
func TestRealSysctl(t *testing.T) {
	requireRoot(t, "writing /proc/sys")
	ctx := context.Background()
	const name = "vm.dirty_expire_centisecs"
	orig := sysctlN(t, name)
	t.Cleanup(func() { // whatever happens, the machine keeps its value
		os.WriteFile("/proc/sys/vm/dirty_expire_centisecs", []byte(orig+"\n"), 0)
	})
	n, _ := strconv.Atoi(orig)
	want := strconv.Itoa(n + 1)
	o := opts(t, "/")
	rep, err := tune.Apply(ctx, o, tune.Profile{name: want})
	if err != nil {
		t.Fatal(err)
	}
	if got := sysctlN(t, name); got != want || rep.Changes[0].After != want || rep.Changes[0].Before != orig {
		t.Fatalf("after apply: sysctl says %s, report %+v; want %s", got, rep.Changes, want)
	}
	if _, err := tune.Revert(ctx, o); err != nil {
		t.Fatal(err)
	}
	if got := sysctlN(t, name); got != orig {
		t.Fatalf("after revert: sysctl says %s, want %s", got, orig)
	}
}

// The kernel couples vm.dirty_ratio and vm.dirty_bytes: writing one zeroes the other. A node in
// "bytes" mode must come back in bytes mode, not with dirty_bytes lost.
func TestRealDirtyBytesCoupling(t *testing.T) {
	requireRoot(t, "writing /proc/sys")
	ctx := context.Background()
	ratio, bytes := sysctlN(t, "vm.dirty_ratio"), sysctlN(t, "vm.dirty_bytes")
	t.Cleanup(func() {
		if bytes != "0" {
			os.WriteFile("/proc/sys/vm/dirty_bytes", []byte(bytes), 0)
		} else {
			os.WriteFile("/proc/sys/vm/dirty_ratio", []byte(ratio), 0)
		}
	})
	// Put the machine in bytes mode at roughly the threshold it had (4 GiB), briefly.
	if err := os.WriteFile("/proc/sys/vm/dirty_bytes", []byte("4294967296"), 0); err != nil {
		t.Fatal(err)
	}
	if sysctlN(t, "vm.dirty_ratio") != "0" {
		t.Fatal("kernel did not zero dirty_ratio; coupling assumption wrong")
	}
	o := opts(t, "/")
	if _, err := tune.Apply(ctx, o, tune.Profile{"vm.dirty_ratio": "20"}); err != nil {
		t.Fatal(err)
	}
	if sysctlN(t, "vm.dirty_bytes") != "0" || sysctlN(t, "vm.dirty_ratio") != "20" {
		t.Fatal("apply did not switch to ratio mode")
	}
	if _, err := tune.Revert(ctx, o); err != nil {
		t.Fatal(err)
	}
	if b, r := sysctlN(t, "vm.dirty_bytes"), sysctlN(t, "vm.dirty_ratio"); b != "4294967296" || r != "0" {
		t.Fatalf("after revert dirty_bytes=%s dirty_ratio=%s, want 4294967296 and 0", b, r)
	}
}

// The real ethtool: read this machine's ring sizes and "apply" the current ones (no write,
// nothing changes), so parsing and the read-back path meet real output.
func TestRingsRealEthtool(t *testing.T) {
	tools.Require(t, "ethtool")
	ifaces, _ := os.ReadDir("/sys/class/net")
	for _, i := range ifaces {
		name := i.Name()
		if exec.Command("ethtool", "-g", name).Run() != nil {
			continue
		}
		o := opts(t, "/")
		cur, err := tune.Read(context.Background(), o, []string{"ring." + name + ".rx"})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := tune.Apply(context.Background(), o, tune.Profile{"ring." + name + ".rx": cur["ring."+name+".rx"]})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tune.Revert(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %+v", name, rep.Changes)
		return
	}
	t.Skip("no interface here reports ring sizes")
}

// rig tune revert --dir names the folder its state file is read from: a FIFO there is refused
// at once, naming it, not waited on for ever.
func TestLoadStateRefusesAFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), tune.StateFileName)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := tune.LoadState(p); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "tuning state "+p+" is a named pipe (FIFO)") {
			t.Fatalf("LoadState of a FIFO: %v", err)
		}
	case <-time.After(30 * time.Second): // a guard against hanging the suite, not a measurement
		t.Fatal("LoadState blocked on a FIFO")
	}
}
