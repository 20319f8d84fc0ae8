package ssh

import (
	"context"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/agent/tune"
	"github.com/rig-dev/rig/agent/tune/tunetest"
	"github.com/rig-dev/rig/internal/sshdtest"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/transport"
	"github.com/rig-dev/rig/transport/sshx"
)

// The test binary is the "rig" these tests stage: run as `BINARY agent --socket … --dir …
// --root … --node …` it is an agent, like `rig agent`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		os.Exit(runAgent(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func runAgent(args []string) int {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	socket := fs.String("socket", "", "")
	dir := fs.String("dir", "", "")
	root := fs.String("root", "/", "")
	node := fs.String("node", "", "")
	trigger := fs.String("sysrq-trigger", "", "")
	powerProc := fs.String("power-proc", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	abs, _ := filepath.Abs(*dir)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := agent.Serve(ctx, agent.Options{Socket: *socket, Dir: abs, Root: *root, Node: *node, SysrqTrigger: *trigger, PowerProc: *powerProc, Logger: log}); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		return 1
	}
	return 0
}

func sshTransport(t *testing.T, srv *sshdtest.Server) *sshx.Transport {
	tr, err := sshx.New(sshx.Options{KeyFiles: []string{srv.ClientKeyFile}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// The whole path over a real OpenSSH server: stage the binary, start the agent, reach it through
// the tunnel, tune a fake tree, restart the agent, revert, pull a file back; stage again as a
// no-op; replace the binary.
func TestStageOverSSH(t *testing.T) {
	srv := sshdtest.Start(t)
	tr := sshTransport(t, srv)
	node := srv.Node("node-0")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	root := tunetest.FakeTree(t, t.TempDir())
	before := tunetest.Snapshot(t, root)
	base := t.TempDir()
	remote := NodeDir(base, node)
	opts := Options{Base: base, Root: root, Logger: quiet()}
	t.Cleanup(func() {
		if err := Stop(context.Background(), tr, node, opts); err != nil {
			t.Errorf("stop agent: %v", err)
		}
	})

	res, err := Stage(ctx, tr, node, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Uploaded || !res.Started || res.PID == 0 || res.Arch == "" {
		t.Fatalf("first stage: %+v", res)
	}
	self, _ := os.Executable()
	if h, _ := fileHash(filepath.Join(remote, "bin", "rig")); h != res.SHA256 || h != mustHash(t, self) {
		t.Fatal("the staged binary is not this one")
	}

	// The agent outlived the SSH session that started it, and answers through the tunnel.
	if want := filepath.Join(base, "rig-node-0", "agent", "ctl", "agent.sock"); res.Socket != want {
		t.Fatalf("agent socket %q, want %q", res.Socket, want)
	}
	c := target.AgentClient(tr, node, res.Socket, "")
	defer c.Close()
	pr, err := c.Ping(ctx)
	if err != nil || pr.PID != res.PID || pr.Node != "node-0" {
		t.Fatalf("ping through the tunnel: %+v %v", pr, err)
	}

	// Staging again changes nothing.
	again, err := Stage(ctx, tr, node, opts)
	if err != nil {
		t.Fatal(err)
	}
	if again.Uploaded || again.Started || again.PID != res.PID {
		t.Fatalf("second stage was not a no-op: %+v", again)
	}

	// Tune through the tunnel.
	rep, err := c.Tune(ctx, tune.Profile{"thp": "never", "vm.dirty_ratio": "35", "net.core.rmem_max": "32MiB"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Changes) != 3 {
		t.Fatalf("tune report %+v", rep)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "proc/sys/net/core/rmem_max")); string(b) != "33554432\n" {
		t.Fatalf("rmem_max %q", b)
	}

	// Pull the tuning state back through sftp: it names every prior value.
	local := filepath.Join(t.TempDir(), "pulled", "state.json")
	if err := tr.Download(ctx, node, filepath.Join(remote, "agent", tune.StateFileName), local); err != nil {
		t.Fatal(err)
	}
	st, err := tune.LoadState(local)
	if err != nil || len(st.Prior) != 4 { // three settings and vm.dirty_bytes
		t.Fatalf("pulled state: %+v %v", st, err)
	}

	// Restart the agent: the new one reverts from the state file alone.
	if err := Stop(ctx, tr, node, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ping(ctx); err == nil {
		t.Fatal("agent still answers after Stop")
	}
	res2, err := Stage(ctx, tr, node, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Uploaded || !res2.Started || res2.PID == res.PID {
		t.Fatalf("restart: %+v", res2)
	}
	if _, err := c.Revert(ctx); err != nil {
		t.Fatal(err)
	}
	if after := tunetest.Snapshot(t, root); !reflect.DeepEqual(before, after) {
		t.Fatalf("fake tree differs after revert by a restarted agent:\nbefore %v\nafter  %v", before, after)
	}

	// A different binary (here: this one with a trailing byte, still a valid ELF) is uploaded
	// and replaces the running agent.
	changed := filepath.Join(t.TempDir(), "rig")
	b, _ := os.ReadFile(self)
	os.WriteFile(changed, append(b, 0), 0o755)
	opts.Binaries = map[string]string{res.Arch: changed}
	res3, err := Stage(ctx, tr, node, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !res3.Uploaded || !res3.Started || res3.PID == res2.PID || res3.SHA256 == res.SHA256 {
		t.Fatalf("new binary: %+v", res3)
	}
	if alive(ctx, tr, node, res2.PID) {
		t.Fatalf("old agent pid %d still running", res2.PID)
	}
}

func mustHash(t *testing.T, p string) string {
	h, err := fileHash(p)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// A node whose host key is wrong gets nothing: no connection past the key check, no upload.
func TestStageRefusesWrongHostKey(t *testing.T) {
	srv := sshdtest.Start(t)
	tr := sshTransport(t, srv)
	node := srv.Node("node-0")
	node.SSH.HostKey = sshdtest.RandomHostKey(t)
	base := t.TempDir()
	remote := NodeDir(base, node)
	_, err := Stage(context.Background(), tr, node, Options{Base: base, Logger: quiet()})
	if !errors.Is(err, transport.ErrHostKey) || !strings.Contains(err.Error(), "host key mismatch") {
		t.Fatalf("want a host key error, got %v", err)
	}
	if _, err := os.Stat(remote); !os.IsNotExist(err) {
		t.Fatal("something was staged on a node with a wrong host key")
	}
}

// All stages several nodes at once; a failing node does not stop the others and is named.
func TestAllInParallel(t *testing.T) {
	a, b := sshdtest.Start(t), sshdtest.Start(t)
	tr, err := sshx.New(sshx.Options{KeyFiles: []string{a.ClientKeyFile, b.ClientKeyFile}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	bad := b.Node("node-bad")
	bad.SSH.HostKey = sshdtest.RandomHostKey(t)
	nodes := []inventory.Node{a.Node("node-a"), b.Node("node-b"), bad}
	for i := range nodes { // one port, an address each: the agents' hosts come from the inventory
		nodes[i].PrivateAddress = fmt.Sprintf("127.0.9.%d", i+1)
	}
	opts := Options{Base: t.TempDir(), Logger: quiet(), Parallel: 2}
	defer func() {
		for _, n := range nodes[:2] {
			if err := Stop(context.Background(), tr, n, opts); err != nil {
				t.Errorf("stop agent on %s: %v", n.Name, err)
			}
		}
	}()
	res, err := All(context.Background(), tr, nodes, opts)
	if err == nil || !strings.Contains(err.Error(), "node-bad") || strings.Contains(err.Error(), "node-a:") {
		t.Fatalf("want an error naming node-bad only, got %v", err)
	}
	for _, r := range res[:2] {
		if !r.Started || r.PID == 0 {
			t.Fatalf("result %+v", r)
		}
	}
	if res[0].PID == res[1].PID {
		t.Fatal("two nodes, one agent?")
	}
}

func TestParallelCap(t *testing.T) {
	var cur, peak, ran atomic.Int32
	nodes := make([]inventory.Node, 7)
	for i := range nodes {
		nodes[i].Name = fmt.Sprintf("n%d", i)
	}
	err := Parallel(context.Background(), nodes, 3, func(ctx context.Context, i int, n inventory.Node) error {
		c := cur.Add(1)
		for {
			p := peak.Load()
			if c <= p || peak.CompareAndSwap(p, c) {
				break
			}
		}
		time.Sleep(30 * time.Millisecond)
		cur.Add(-1)
		ran.Add(1)
		if i == 4 {
			return fmt.Errorf("%s: boom", n.Name)
		}
		return nil
	})
	if ran.Load() != 7 || peak.Load() > 3 || peak.Load() < 2 {
		t.Fatalf("ran %d, peak %d (cap 3)", ran.Load(), peak.Load())
	}
	if err == nil || err.Error() != "n4: boom" {
		t.Fatalf("err %v", err)
	}
}

// A controller on another architecture cross-builds: here a tiny program for linux/arm64.
func TestCrossBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the arm64 runtime")
	}
	src := FindSource(".")
	if src == "" {
		t.Fatal("FindSource did not find the rig module above target/ssh")
	}
	out := filepath.Join(t.TempDir(), "hello-arm64")
	if err := CrossBuild(context.Background(), BuildOptions{Dir: src, Package: "./target/ssh/testdata/hello", GOARCH: "arm64", Out: out}); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 || f.OSABI != elf.ELFOSABI_NONE {
		t.Fatalf("machine %v", f.Machine)
	}
	if err := CrossBuild(context.Background(), BuildOptions{Dir: src, Package: "./no/such/pkg", GOARCH: "arm64", Out: out}); err == nil || !strings.Contains(err.Error(), "no/such/pkg") {
		t.Fatalf("a failing build must say why: %v", err)
	}
	if FindSource(t.TempDir()) != "" {
		t.Fatal("found a rig module in an empty temp dir")
	}
}
