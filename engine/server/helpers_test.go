package server

import (
	"context"
	"log/slog"
	"testing"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/replica"
	"github.com/rig-dev/rig/engine/server/servertest"
)

// testAdminToken stands for the agent's secret (engine/contract.go).
const testAdminToken = servertest.AdminToken

// startEngine runs a one-node reference engine (raft, log, server) on loopback, asking for
// rcvbuf bytes of UDP receive buffer.
func startEngine(t *testing.T, rcvbuf int) engine.Config {
	return startEngineWith(t, func(c *engine.Config) { c.UDPRcvbuf = rcvbuf })
}

// startEngineWith is startEngine with the config edited before the engine starts.
func startEngineWith(t *testing.T, edit func(*engine.Config)) engine.Config {
	return servertest.Start(t, func(c *engine.Config) { c.UDPNakDelay = "2ms"; edit(c) }, serve)
}

func serve(ctx context.Context, node *replica.Node, log *slog.Logger, token string) error {
	return New(node, log, token).Run(ctx)
}

func waitUntil(t *testing.T, what string, cond func() bool) { servertest.WaitUntil(t, what, cond) }
