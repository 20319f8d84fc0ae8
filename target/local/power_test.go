package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/target"
)

// A power loss on the local target is its disk model's (DropUnsynced, a target.PowerLosser);
// its agents can never reboot this machine: they are started without --sysrq-trigger, so
// every power cut asked of them is refused (agent/power.go). The agent binary here only
// records its arguments and exits.
func TestAgentsCannotCutPower(t *testing.T) {
	var _ target.PowerLosser = (*Cluster)(nil)
	dir := t.TempDir()
	args := filepath.Join(dir, "args")
	bin := filepath.Join(dir, "rig")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"$@\" >>"+args+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tgt := New(Options{FirstAddress: "127.0.104.11"})
	c, err := tgt.Start(context.Background(), target.StartOptions{RunDir: t.TempDir(), Servers: 3, Clients: 1, Binary: bin, Run: "test"})
	if c != nil || err == nil {
		t.Fatalf("start with an agent that exits: cluster %v, err %v", c, err)
	}
	b, err := os.ReadFile(args)
	if err != nil || !strings.Contains(string(b), "agent ") {
		t.Fatalf("agent arguments %q, %v: the agent was not started", b, err)
	}
	if strings.Contains(string(b), "sysrq") {
		t.Fatalf("a local agent was started with %q: it could reboot this machine", b)
	}
}
