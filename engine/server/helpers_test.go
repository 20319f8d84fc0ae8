package server

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/replica"
	"github.com/rig-dev/rig/internal/testaddr"
)

// testAdminToken stands for the agent's secret (engine/contract.go).
const testAdminToken = "test-admin-secret"

// startEngine runs a one-node reference engine (raft, log, server) on loopback, asking for
// rcvbuf bytes of UDP receive buffer.
func startEngine(t *testing.T, rcvbuf int) engine.Config {
	return startEngineWith(t, func(c *engine.Config) { c.UDPRcvbuf = rcvbuf })
}

// startEngineWith is startEngine with the config edited before the engine starts.
func startEngineWith(t *testing.T, edit func(*engine.Config)) engine.Config {
	t.Helper()
	peer := engine.Peer{Node: "node-0", RaftAddr: testaddr.Free(t), ClientAddr: testaddr.Free(t)}
	cfg := engine.Config{
		Node: "node-0", Dir: filepath.Join(t.TempDir(), "n0"), RaftAddr: peer.RaftAddr, ClientAddr: peer.ClientAddr,
		AdminAddr: testaddr.Free(t), Peers: []engine.Peer{peer}, Bootstrap: true, HeartbeatTimeout: "50ms",
		ElectionTimeout: "50ms", UDPNakDelay: "2ms",
	}
	edit(&cfg)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	node, err := replica.New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(node, log, testAdminToken).Run(ctx) }()
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
		node.Shutdown()
	})
	waitUntil(t, "leader", func() bool { return node.IsLeader() })
	return cfg
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
