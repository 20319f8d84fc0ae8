package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/agent/runq"
	"github.com/rig-dev/rig/agent/sample"
	"github.com/rig-dev/rig/agent/tune"
	"github.com/rig-dev/rig/agent/tune/tunetest"
	"github.com/rig-dev/rig/internal/testfs"
	"github.com/rig-dev/rig/rundir"
)

// nodeAgent runs Serve in this process on dir and root; stop ends it like SIGTERM would.
type nodeAgent struct {
	c    *Client
	stop func()
}

func startNodeAgent(t *testing.T, dir, root string) *nodeAgent {
	t.Helper()
	return startAgentWith(t, Options{Dir: dir, Root: root})
}

// startAgentWith runs Serve with o, on a socket in o.Dir, as node n0.
func startAgentWith(t *testing.T, o Options) *nodeAgent {
	t.Helper()
	o.Listener, o.Node, o.Logger = listenSocket(t, o.Dir), "n0", slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, o)
	}()
	a := &nodeAgent{c: NewClient("n0", dialSocket(SocketPath(o.Dir)))}
	var stopped bool
	a.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		a.c.Close()
	}
	t.Cleanup(a.stop)
	return a
}

// Apply through one agent, stop it, revert through a new one: the fake tree is byte-identical
// to what it was before the apply.
func TestTuneRevertAcrossAgentRestart(t *testing.T) {
	ctx := context.Background()
	root := tunetest.FakeTree(t, t.TempDir())
	before := tunetest.Snapshot(t, root)
	dir := t.TempDir()

	a := startNodeAgent(t, dir, root)
	rep, err := a.c.Tune(ctx, tune.Profile{"thp": "never", "vm.dirty_ratio": "40", "vm.dirty_background_ratio": "5",
		"vm.dirty_expire_centisecs": "1000", "vm.dirty_writeback_centisecs": "100", "vm.swappiness": "1",
		"net.core.rmem_max": "64MiB", "net.core.wmem_max": "64MiB", "net.core.rmem_default": "4MiB", "net.core.netdev_max_backlog": "50000"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Changes) != 10 {
		t.Fatalf("report %+v", rep)
	}
	st, err := a.c.TuneState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Recorded == nil || st.Current["thp.enabled"] != "never" || st.Current["net.core.rmem_max"] != "67108864" {
		t.Fatalf("state %+v", st)
	}
	if reflect.DeepEqual(before, tunetest.Snapshot(t, root)) {
		t.Fatal("apply changed nothing")
	}
	a.stop()

	b := startNodeAgent(t, dir, root)
	if _, err := b.c.Revert(ctx); err != nil {
		t.Fatal(err)
	}
	if after := tunetest.Snapshot(t, root); !reflect.DeepEqual(before, after) {
		t.Fatalf("tree after revert differs:\nbefore %v\nafter  %v", before, after)
	}
	rep, err = b.c.Revert(ctx)
	if err != nil || len(rep.Changes) != 0 {
		t.Fatalf("second revert: %+v %v", rep, err)
	}
	if st, _ := b.c.TuneState(ctx); st.Recorded != nil {
		t.Fatalf("state after revert: %+v", st)
	}
}

func TestTuneErrorsOverHTTP(t *testing.T) {
	ctx := context.Background()
	root := tunetest.FakeTree(t, t.TempDir())
	a := startNodeAgent(t, t.TempDir(), root)
	_, err := a.c.Tune(ctx, tune.Profile{"vm.dirty_ratoi": "5"})
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), `unknown setting "vm.dirty_ratoi"`) {
		t.Fatalf("want 400 naming the setting, got %v", err)
	}
	p := filepath.Join(root, "proc/sys/vm/swappiness")
	os.Remove(p)
	os.Symlink("/dev/null", p)
	_, err = a.c.Tune(ctx, tune.Profile{"vm.swappiness": "5"})
	if err == nil || !strings.Contains(err.Error(), "vm.swappiness: wrote 5, read back") {
		t.Fatalf("want a read-back error naming vm.swappiness, got %v", err)
	}
}

func TestFactsOverHTTP(t *testing.T) {
	a := startNodeAgent(t, t.TempDir(), "/")
	f, err := a.c.Facts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if f.Kernel == "" || f.CPUs == 0 || f.MemTotalBytes == 0 {
		t.Fatalf("facts %+v", f)
	}
}

// The agent reports the room on the filesystem that will hold a folder not made yet, as the
// filesystem itself counts it: a tmpfs of 4 MiB, then the same after 3 MiB were written to it.
func TestDiskSpaceOverHTTP(t *testing.T) {
	ctx := context.Background()
	fs := testfs.Tmpfs(t, 4<<20)
	a := startNodeAgent(t, fs, "/")
	sp, err := a.c.DiskSpace(ctx, "data/run-1/node-0")
	if err != nil {
		t.Fatal(err)
	}
	if sp.Path != filepath.Join(fs, "data/run-1/node-0") || sp.StatPath != fs || sp.TotalBytes != 4<<20 || sp.FreeBytes > 4<<20 || sp.FreeBytes < 3<<20 {
		t.Fatalf("space of a fresh 4 MiB tmpfs: %+v", sp)
	}
	testfs.Fill(t, filepath.Join(fs, "filler"), 1<<20)
	after, err := a.c.DiskSpace(ctx, filepath.Join(fs, "data"))
	if err != nil {
		t.Fatal(err)
	}
	if after.FreeBytes > 1<<20 || after.FreeBytes < 1<<20-64<<10 || after.Filesystem != sp.Filesystem {
		t.Fatalf("space after filling to 1 MiB free: %+v (before %+v)", after, sp)
	}
	other, err := a.c.DiskSpace(ctx, t.TempDir())
	if err != nil || other.Filesystem == sp.Filesystem {
		t.Fatalf("another filesystem: %+v, %v; want a different filesystem id than %s", other, err, sp.Filesystem)
	}
	if _, err := a.c.DiskSpace(ctx, ""); err == nil || !strings.Contains(err.Error(), "path is empty") {
		t.Fatalf("no path: %v", err)
	}
}

func TestSamplesOverHTTP(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := startNodeAgent(t, dir, "/")
	pidFile := filepath.Join(dir, "engine.pid")
	os.WriteFile(pidFile, []byte("1\n"), 0o644)
	info, err := a.c.StartSamples(ctx, SamplesRequest{Name: "os", Interval: "50ms", PIDFiles: []string{"engine.pid"}, SchedInterval: "20ms"})
	if err != nil {
		t.Fatal(err)
	}
	if !info.Running || info.Path != filepath.Join(dir, "samples", "os.ndjson") {
		t.Fatalf("info %+v", info)
	}
	// Where the kernel places the waits, the samples only spread the rest, at the longer
	// interval whatever was asked.
	switch placed := "placed by the kernel"; {
	case strings.HasPrefix(info.RunQueue, placed):
		if want := fmt.Sprintf("each of at least %v, beside samples every %v", runq.DefaultMinWait, sample.PlacedSchedInterval); !strings.Contains(info.RunQueue, want) {
			t.Errorf("run queue %q: want %q", info.RunQueue, want)
		}
	case !strings.HasPrefix(info.RunQueue, "sampled only: "):
		t.Errorf("run queue %q: want %q or sampled only", info.RunQueue, placed)
	}
	if _, err := a.c.StartSamples(ctx, SamplesRequest{Name: "os"}); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("second start of the same name: %v", err)
	}
	for _, bad := range []SamplesRequest{{Name: "../x"}, {Name: "ok", Interval: "1ms"}, {Name: "ok", Devices: []string{"nosuchdisk"}}, {Name: "ok", SchedInterval: "1us"}} {
		if _, err := a.c.StartSamples(ctx, bad); err == nil || !strings.Contains(err.Error(), "400") {
			t.Fatalf("%+v: want 400, got %v", bad, err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	var buf bytes.Buffer
	if err := a.c.ReadSamples(ctx, "os", &buf); err != nil {
		t.Fatal(err)
	}
	got, err := rundir.ReadSamples(&buf)
	if err != nil || len(got) < 2 {
		t.Fatalf("%d samples, %v", len(got), err)
	}
	if len(got[0].Procs) != 1 || got[0].Procs[0].PID != 1 || got[0].Agent.PID != os.Getpid() {
		t.Fatalf("sample %+v", got[0])
	}
	info, err = a.c.StopSamples(ctx, "os")
	if err != nil || info.Running {
		t.Fatalf("stop: %+v %v", info, err)
	}
	if _, err := os.Stat(filepath.Join(dir, rundir.SchedDir, "os"+rundir.SchedExt)); err != nil {
		t.Errorf("scheduler samples: %v", err)
	}
	list, _ := a.c.ListSamples(ctx)
	if len(list) != 1 || list[0].Running {
		t.Fatalf("list %+v", list)
	}
	if _, err := a.c.StopSamples(ctx, "nope"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("stop unknown: %v", err)
	}

	// A sampler left running stops with the agent; its file stays readable by the next agent.
	if _, err := a.c.StartSamples(ctx, SamplesRequest{Name: "left", Interval: "20ms"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	a.stop()
	path := filepath.Join(dir, "samples", "left.ndjson")
	var size int64 = -1
	for deadline := time.Now().Add(2 * time.Second); ; {
		st, _ := os.Stat(path)
		if st.Size() > 0 && st.Size() == size {
			break // no new line in 100ms at a 20ms interval: stopped
		}
		size = st.Size()
		if time.Now().After(deadline) {
			t.Fatal("sampler still writing 2s after the agent stopped")
		}
		time.Sleep(100 * time.Millisecond)
	}
	st2, _ := os.Stat(path)
	b := startNodeAgent(t, dir, "/")
	buf.Reset()
	if err := b.c.ReadSamples(ctx, "left", &buf); err != nil || buf.Len() != int(st2.Size()) {
		t.Fatalf("read after restart: %d bytes, %v", buf.Len(), err)
	}
}
