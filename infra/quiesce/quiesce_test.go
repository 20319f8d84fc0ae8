package quiesce

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/agent/disk"
	"github.com/rig-dev/rig/internal/looptest"
	"github.com/rig-dev/rig/internal/sshdtest"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/target"
	sshtarget "github.com/rig-dev/rig/target/ssh"
	"github.com/rig-dev/rig/transport/sshx"
)

// The test binary is the "rig" staged on the node: run as `BINARY agent …` it is the agent.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		fs := flag.NewFlagSet("agent", flag.ContinueOnError)
		socket, dir := fs.String("socket", "", ""), fs.String("dir", "", "")
		root, node := fs.String("root", "/", ""), fs.String("node", "", "")
		if fs.Parse(os.Args[2:]) != nil {
			os.Exit(2)
		}
		abs, _ := filepath.Abs(*dir)
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		if err := agent.Serve(ctx, agent.Options{Socket: *socket, Dir: abs, Root: *root, Node: *node,
			Logger: slog.New(slog.NewJSONHandler(os.Stderr, nil))}); err != nil {
			fmt.Fprintln(os.Stderr, "agent:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Over a real OpenSSH server: the agent is started, the mounted data volume (a loop device) is
// synced and unmounted with what was written on it, the agent is stopped again, and a node
// without a data volume is left alone.
func TestNodesUnmountsOverSSH(t *testing.T) {
	dev := looptest.Device(t, 64<<20)
	if dev == "" {
		t.Skip("needs root and losetup for a loop device")
	}
	srv := sshdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mp := filepath.Join(t.TempDir(), "data")
	t.Cleanup(func() { exec.Command("umount", mp).Run() })
	if _, err := disk.Prepare(ctx, disk.Options{Device: dev, MountPoint: mp, Format: true}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mp, "raft.log"), []byte("entries"), 0o644); err != nil {
		t.Fatal(err)
	}
	server, client := srv.Node("node-0"), srv.Node("client-0")
	server.DataDevice, client.Role = dev, inventory.RoleClient
	inv := &inventory.Inventory{Target: "aws", Nodes: []inventory.Node{server, client}}
	self, _ := os.Executable()
	var out bytes.Buffer
	o := Options{KeyFiles: []string{srv.ClientKeyFile}, Dir: t.TempDir(), DataMount: mp, Binary: self, Out: &out}
	res, err := Nodes(ctx, inv, o)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !res[0].Unmount.Unmounted || !res[0].Unmount.Synced || res[1].Skipped == "" {
		t.Fatalf("results %+v\n%s", res, out.String())
	}
	if b, _ := exec.Command("findmnt", "-n", mp).Output(); len(b) != 0 {
		t.Fatalf("still mounted: %s", b)
	}
	if !strings.Contains(out.String(), "node-0: engine stopped, "+mp+" synced") {
		t.Fatalf("output %q", out.String())
	}
	// The agent is gone again.
	tr, err := sshx.New(sshx.Options{KeyFiles: o.KeyFiles})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	sock, err := sshtarget.Socket(ctx, tr, server, sshtarget.Options{Base: o.Dir})
	if err != nil {
		t.Fatal(err)
	}
	c := target.AgentClient(tr, server, sock, "")
	defer c.Close()
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	defer pcancel()
	if _, err := c.Ping(pctx); err == nil {
		t.Fatal("the agent still answers")
	}
	// What was written is on the device.
	if _, err := disk.Prepare(ctx, disk.Options{Device: dev, MountPoint: mp}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(mp, "raft.log")); err != nil || string(b) != "entries" {
		t.Fatalf("after remount: %q %v", b, err)
	}
}
