// Package servertest runs a one-node reference engine (raft, log, TCP and UDP ingress, admin
// API) on loopback for tests of the engine's clients.
package servertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/replica"
	"github.com/rig-dev/rig/internal/testaddr"
)

// Serve runs the engine's listeners until ctx is done: server.New(node, log, token).Run. It is
// passed in so that package server's own tests can use this package too.
type Serve func(ctx context.Context, node *replica.Node, log *slog.Logger, token string) error

// Start runs the engine until the test ends and returns its config once it leads. edit, if not
// nil, changes the config before the engine starts.
func Start(t testing.TB, edit func(*engine.Config), serve Serve) engine.Config {
	t.Helper()
	peer := engine.Peer{Node: "node-0", RaftAddr: testaddr.Free(t), ClientAddr: testaddr.Free(t)}
	cfg := engine.Config{
		Node: "node-0", Dir: filepath.Join(t.TempDir(), "n0"), RaftAddr: peer.RaftAddr, ClientAddr: peer.ClientAddr,
		AdminAddr: testaddr.Free(t), Peers: []engine.Peer{peer}, Bootstrap: true, HeartbeatTimeout: "50ms",
		ElectionTimeout: "50ms",
	}
	if edit != nil {
		edit(&cfg)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	node, err := replica.New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, node, log, AdminToken) }()
	if err := node.Start(); err != nil {
		cancel()
		<-done
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
		node.Shutdown()
	})
	WaitUntil(t, "leader", func() bool { return node.IsLeader() })
	return cfg
}

// AdminToken stands for the agent's secret (engine/contract.go): the engines Start runs accept
// admin requests that carry it.
const AdminToken = "test-admin-secret"

// WaitUntil polls cond every 5 ms for up to 15 s.
func WaitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// UDP reads the engine's UDP ingress status with every burst.
func UDP(t testing.TB, cfg engine.Config) *engine.UDP {
	t.Helper()
	st, err := Status(cfg.AdminAddr)
	if err != nil {
		t.Fatal(err)
	}
	if st.UDP == nil {
		t.Fatal("status has no udp section")
	}
	return st.UDP
}

// Status is GET /status?udp=1 on an engine's admin address.
func Status(admin string) (*engine.Status, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+admin+"/status?udp=1", nil)
	if err != nil {
		return nil, err
	}
	engine.AuthorizeAdmin(req, AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status: %s", resp.Status)
	}
	var st engine.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, err
	}
	return &st, nil
}
