package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/agent/runq"
	"github.com/rig-dev/rig/internal/tools"
	"github.com/rig-dev/rig/target"
)

// The local target loads one run-queue program for all its agents and hands each its own
// tracer's maps: file descriptors agent.RunQueueFD.. are BPF maps in each agent, and each agent's
// --runq-index is its own. The agent binary here records its arguments and its descriptors' map
// types, each in a file of its own, and exits.
func TestAgentsShareOneRunQueueProgram(t *testing.T) {
	if sh, err := runq.OpenShared(runq.Options{}, 1); errors.Is(err, runq.ErrUnsupported) {
		tools.SkipOrFail(t, "a shared run-queue program needs BPF and root: %v", err)
	} else if err != nil {
		t.Fatal(err)
	} else {
		sh.Close()
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	bin := filepath.Join(dir, "rig")
	// TERM is ignored: the target stops the other agents when the first exits, and each must
	// finish its record.
	script := fmt.Sprintf("#!/bin/sh\ntrap '' TERM\n{ echo \"$@\"; for fd in %d %d %d; do grep ^map_type /proc/$$/fdinfo/$fd || echo none; done; } >%s.$$\nexit 1\n",
		agent.RunQueueFD, agent.RunQueueFD+1, agent.RunQueueFD+2, out)
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	tgt := New(Options{FirstAddress: "127.0.105.11"})
	if c, err := tgt.Start(context.Background(), target.StartOptions{RunDir: t.TempDir(), Servers: 1, Clients: 1, Binary: bin, Run: "test"}); c != nil || err == nil {
		t.Fatalf("start with an agent that exits: cluster %v, err %v", c, err)
	}
	files, err := filepath.Glob(out + ".*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no agent recorded anything: %v", err)
	}
	var indexes []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 4 {
			t.Fatalf("an agent recorded %q: want its arguments and three descriptors", b)
		}
		args := strings.Fields(lines[0])
		i := slices.Index(args, "--"+agent.FlagRunQueueIndex)
		if i < 0 || i+1 >= len(args) || !slices.Contains(args, "--"+agent.FlagRunQueueMinWait) {
			t.Fatalf("agent arguments %q: want --%s N and --%s", lines[0], agent.FlagRunQueueIndex, agent.FlagRunQueueMinWait)
		}
		indexes = append(indexes, args[i+1])
		// In Files' order: the slots (an array), the agent's ring buffer, the lost counts.
		if want := []string{"map_type:\t2", "map_type:\t27", "map_type:\t2"}; !slices.Equal(lines[1:], want) {
			t.Errorf("descriptors %q: want BPF maps %q", lines[1:], want)
		}
	}
	slices.Sort(indexes)
	if len(slices.Compact(slices.Clone(indexes))) != len(indexes) {
		t.Errorf("agents' tracer indexes %v: want each its own", indexes)
	}
}
