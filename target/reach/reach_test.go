package reach

import (
	"context"
	"crypto/ed25519"
	"encoding/pem"
	"os"

	"errors"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/target"
	sshtarget "github.com/rig-dev/rig/target/ssh"
)

func TestOpenPicksByInventory(t *testing.T) {
	dir := t.TempDir()
	node := inventory.Node{Name: "node-0", Role: inventory.RoleServer, Address: "127.0.0.11", Dir: filepath.Join(dir, "node-0")}
	acc, err := Open(&inventory.Inventory{Target: inventory.TargetLocal, Nodes: []inventory.Node{node}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer acc.Transport().Close()
	if _, ok := acc.(target.Stager); ok {
		t.Error("the local access stages rig: every run starts its own agents")
	}
	if sock, err := acc.AgentSocket(context.Background(), node); err != nil || sock != agent.SocketPath(node.Dir) {
		t.Errorf("local agent socket %q, %v; want %q", sock, err, agent.SocketPath(node.Dir))
	}

	remote := &inventory.Inventory{Target: "aws", Nodes: []inventory.Node{node}}
	if _, err := Open(remote, Options{}); !errors.Is(err, ErrOptions) {
		t.Errorf("SSH access without a connect timeout: %v, want ErrOptions", err)
	}
	acc, err = Open(remote, Options{Login: sshtarget.Login{KeyFiles: []string{filepath.Join(dir, "nokey")}, ConnectTimeout: time.Second}})
	if !errors.Is(err, ErrOptions) {
		t.Errorf("SSH access with a missing key file: %v, want ErrOptions", err)
	}
	_, priv, _ := ed25519.GenerateKey(nil)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(key, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	acc, err = Open(remote, Options{Login: sshtarget.Login{KeyFiles: []string{key}, ConnectTimeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer acc.Transport().Close()
	if _, ok := acc.(target.Stager); !ok {
		t.Error("the SSH access cannot stage rig")
	}
}
