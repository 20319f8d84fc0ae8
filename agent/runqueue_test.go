package agent

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/agent/runq"
	"github.com/rig-dev/rig/internal/tools"
)

// An agent given its part of a shared run-queue program (Options.RunQueue, as the local target
// hands it) places its samplers' waits through it; a second sampler running beside the first
// would read the same ring, so it gets a program of its own, and once the first stops the next
// sampler takes the shared one again.
func TestSamplersShareTheInheritedRunQueue(t *testing.T) {
	sh, files := sharedFiles(t)
	h := &runq.Handle{Slots: int(files[0].Fd()), Ring: int(files[1].Fd()), Lost: int(files[2].Fd()), MinWait: sh.MinWait()}
	dir := t.TempDir()
	a := startAgentWith(t, Options{Dir: dir, Root: "/", RunQueue: h})
	ctx := context.Background()
	const shared = "one program for this machine's agents"
	start := func(name string) string {
		t.Helper()
		info, err := a.c.StartSamples(ctx, SamplesRequest{Name: name, Interval: "50ms", PIDs: []int{os.Getpid()}, SchedInterval: "20ms"})
		if err != nil {
			t.Fatal(err)
		}
		return info.RunQueue
	}
	if got := start("first"); !strings.Contains(got, shared) {
		t.Fatalf("first sampler: run queue %q, want %q", got, shared)
	}
	if got := start("second"); strings.Contains(got, shared) {
		t.Errorf("a second sampler beside the first: run queue %q, want a program of its own or samples only", got)
	}
	for _, name := range []string{"first", "second"} {
		if _, err := a.c.StopSamples(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	// The stop returns once the sampler has closed its placer.
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := start("third")
		if strings.Contains(got, shared) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the first stopped: run queue %q, want %q again", got, shared)
		}
		if _, err := a.c.StopSamples(ctx, "third"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// InheritedRunQueue makes the inherited descriptors close-on-exec, so nothing the agent starts
// holds the program's maps, and refuses a handle without its descriptors or threshold. Run in a
// child of this test binary, which gets a shared program's maps as descriptors 3-5 as an agent
// of the local target does.
func TestInheritedRunQueueNotPassedOn(t *testing.T) {
	if os.Getenv("RIG_TEST_INHERITED_RUNQ") == "1" {
		if _, err := InheritedRunQueue(0, 0); err == nil {
			t.Fatal("a threshold of 0 accepted")
		}
		if _, err := InheritedRunQueue(0, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("sh", "-c", "for fd in 3 4 5; do readlink /proc/$$/fd/$fd; done; true").Output()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "bpf-map") {
			t.Fatalf("a process the agent starts holds %q", out)
		}
		return
	}
	_, files := sharedFiles(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestInheritedRunQueueNotPassedOn$", "-test.count=1")
	cmd.Env = append(os.Environ(), "RIG_TEST_INHERITED_RUNQ=1")
	cmd.ExtraFiles = files
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if _, err := InheritedRunQueue(-1, time.Millisecond); err == nil {
		t.Error("a negative index accepted")
	}
}

// sharedFiles is a shared run-queue program for one tracer and that tracer's files, both closed
// when the test ends.
func sharedFiles(t *testing.T) (*runq.Shared, []*os.File) {
	t.Helper()
	sh, err := runq.OpenShared(runq.Options{}, 1)
	if errors.Is(err, runq.ErrUnsupported) {
		tools.SkipOrFail(t, "a shared run-queue program needs BPF and root: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })
	files, err := sh.Files(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, f := range files {
			f.Close()
		}
	})
	return sh, files
}
