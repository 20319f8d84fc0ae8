package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/command"
	"github.com/rig-dev/rig/internal/testaddr"
	"github.com/rig-dev/rig/internal/tools"
	"github.com/rig-dev/rig/recording"
	"github.com/rig-dev/rig/rundir"
)

// TestTakeJFRRecording runs a JVM engine (recording/testdata/JfrProbe.java: a force per loop)
// through the command driver with recording on, takes its recording while it runs, kills it
// with SIGKILL and takes again: the inside file holds the forces from both takes once each,
// relative to the data folder, the second take's from the killed JVM's repository.
func TestTakeJFRRecording(t *testing.T) {
	tools.Require(t, "java")
	javac := tools.Require(t, "javac")
	tools.Require(t, "jcmd")
	tools.Require(t, "jfr")
	cp := t.TempDir()
	if out, err := exec.Command(javac, "-d", cp, "../recording/testdata/JfrProbe.java").CombinedOutput(); err != nil {
		t.Fatalf("javac: %v: %s", err, out)
	}
	dir := t.TempDir()
	a := startAgentWith(t, Options{Dir: dir})
	ctx := context.Background()
	req := StartRequest{
		Config:    engine.Config{Node: "node-0", AdminAddr: testaddr.Free(t)},
		Command:   &command.Spec{Binary: "java", Args: []string{"-cp", cp, "JfrProbe", "{{.DataDir}}", "100000"}},
		Recording: recording.FormatJFR,
	}
	if err := a.c.StartEngine(ctx, req); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.c.StopEngine(context.Background()) })
	waitLog := func(line string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for time.Now().Before(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, rundir.EngineLogFile))
			if strings.Contains(string(b), line+"\n") {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		b, _ := os.ReadFile(filepath.Join(dir, rundir.EngineLogFile))
		t.Fatalf("engine.log never said %q:\n%s", line, b)
	}
	waitLog("loop 5")
	first, err := a.c.TakeRecording(ctx, RecordingRequest{Window: "01-snapshot", Defer: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Files) != 1 || first.Spans != 0 {
		t.Fatalf("first take: %+v, want one dump, not read yet", first)
	}
	if _, err := os.Stat(filepath.Join(dir, rundir.InsideFile)); !os.IsNotExist(err) {
		t.Fatalf("a deferred take wrote the inside file (%v)", err)
	}
	waitLog("loop 15")
	time.Sleep(1500 * time.Millisecond) // past the repository's 1 s flush
	if err := a.c.Signal(ctx, "KILL"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := a.c.EngineStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed engine did not exit")
		}
		time.Sleep(20 * time.Millisecond)
	}
	second, err := a.c.TakeRecording(ctx, RecordingRequest{Window: "end"})
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Files) != 1 || second.Spans == 0 {
		t.Fatalf("take after the kill: %+v, want the killed JVM's repository read, and the first dump", second)
	}
	spans, err := rundir.ReadInside(filepath.Join(dir, rundir.InsideFile))
	if err != nil {
		t.Fatal(err)
	}
	forces := map[int64]int{}
	for _, s := range spans {
		if s.Kind != rundir.InsideForce {
			continue
		}
		if s.File != "archive/0-0.rec" || s.Role != rundir.RoleArchiveSegment {
			t.Errorf("force %+v: want archive/0-0.rec, relative to the data folder, an archive segment", s)
		}
		forces[s.AtNs]++
	}
	for at, n := range forces {
		if n > 1 {
			t.Errorf("force at %d is in the inside file %d times", at, n)
		}
	}
	if len(forces) < 15 {
		t.Errorf("%d forces in the inside file, want ≥ 15 (the loops before the kill)", len(forces))
	}
	// A third take finds nothing new: the killed JVM's repository was read to its end.
	third, err := a.c.TakeRecording(ctx, RecordingRequest{Window: "again"})
	if err != nil || third.Spans != 0 {
		t.Errorf("third take: %+v, %v; want nothing", third, err)
	}
}
