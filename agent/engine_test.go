package agent

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/agent/hog"
	"github.com/rig-dev/rig/agent/supervise/supervisetest"
	"github.com/rig-dev/rig/internal/testaddr"
	"github.com/rig-dev/rig/rundir"

	"github.com/klauspost/compress/gzip"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/internal/ctlsock"
)

// testEngine is the engine test double from agent/supervise/testdata, built once.
var testEngine string

// When the test binary runs with this variable set it is an agent process (for the test that
// kills the agent and checks that its engine dies with it).
const childAgentEnv = "RIG_AGENT_TEST_CHILD"

func TestMain(m *testing.M) {
	// The agent starts its own executable as `rig agent hog` for a cpu hog: here, this binary.
	if len(os.Args) > 2 && os.Args[1] == "agent" && os.Args[2] == "hog" {
		os.Exit(hog.Main(os.Args[3:], os.Stdout, os.Stderr))
	}
	if os.Getenv(childAgentEnv) == "1" {
		runChildAgent()
		return
	}
	dir, err := os.MkdirTemp("", "agent-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if testEngine, err = supervisetest.BuildEngine(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func runChildAgent() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err := Serve(ctx, Options{Dir: os.Getenv("RIG_AGENT_TEST_DIR"),
		Binary: os.Getenv("RIG_AGENT_TEST_ENGINE"), Node: "child"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func dialSocket(sock string) DialFunc {
	return func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}
}

// socketHTTP is a plain HTTP client for raw requests to the agent's control socket.
func socketHTTP(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return dialSocket(sock)(ctx)
	}}}
}

// listenSocket listens on the agent's default control socket in dir, as Serve would.
func listenSocket(t *testing.T, dir string) net.Listener {
	t.Helper()
	ln, err := ctlsock.Listen(SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

type engineAgent struct {
	c    *Client
	dir  string
	http *http.Client // raw requests to the agent's socket
	stop func()       // stops the agent and waits for Serve to return
}

func startEngineAgent(t *testing.T) *engineAgent {
	t.Helper()
	dir := t.TempDir()
	ln := listenSocket(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	go func() {
		done <- Serve(ctx, Options{Listener: ln, Dir: dir, Node: "node-0", Binary: testEngine, Logger: log})
	}()
	a := &engineAgent{c: NewClient("node-0", dialSocket(SocketPath(dir))), dir: dir, http: socketHTTP(SocketPath(dir))}
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

func engineStartReq(t *testing.T, env ...string) StartRequest {
	return StartRequest{
		Config: engine.Config{Node: "node-0", AdminAddr: testaddr.Free(t), SyncLevel: 1, SnapshotBlock: 1 << 20},
		Env:    append([]string{"TESTENGINE_PHASE=100ms"}, env...),
	}
}

// waitEngineTransition long-polls until ok matches, returning everything read.
func waitEngineTransition(t *testing.T, c *Client, since *uint64, what string, ok func(rundir.Transition) bool) []rundir.Transition {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var got []rundir.Transition
	for time.Now().Before(deadline) {
		trs, err := c.Transitions(context.Background(), *since, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range trs {
			got = append(got, tr)
			*since = tr.Seq
			if ok(tr) {
				return got
			}
		}
	}
	t.Fatalf("timed out waiting for %s; saw %+v", what, got)
	return nil
}

// runningEnginePID is the running engine's pid as the agent reports it.
func runningEnginePID(t *testing.T, c *Client) int {
	t.Helper()
	st, err := c.EngineStatus(context.Background())
	if err != nil || !st.Running || st.PID == 0 {
		t.Fatalf("engine status = %+v, %v", st, err)
	}
	return st.PID
}

func trLeader(tr rundir.Transition) bool {
	return tr.Kind == rundir.TransRole && tr.To == engine.RoleLeader
}
func trDown(tr rundir.Transition) bool {
	return tr.Kind == rundir.TransPhase && tr.To == rundir.PhaseDown
}

func wantErrContains(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q lacks %q", err, p)
		}
	}
}

func TestEngineLifecycleOverHTTP(t *testing.T) {
	a := startEngineAgent(t)
	c, ctx := a.c, context.Background()

	// Before any start.
	st, err := c.EngineStatus(ctx)
	if err != nil || st.Running || st.Launches == nil || len(st.Launches) != 0 || st.LastSeq != 0 {
		t.Fatalf("status before start = %+v, %v", st, err)
	}
	if exit, err := c.StopEngineWithin(ctx, 0); err != nil || exit != nil {
		t.Fatalf("stop before start = %v, %v; want nil, nil", exit, err)
	}
	wantErrContains(t, c.Signal(ctx, "KILL"), "409", "never started")
	wantErrContains(t, c.Relaunch(ctx), "409")

	// Bad input: 400, saying which field.
	bad := engineStartReq(t)
	bad.Config.AdminAddr = "10.0.0.1:9000"
	wantErrContains(t, c.StartEngine(ctx, bad), "400", "config.admin_addr", "loopback")

	// Start and watch it come up.
	if err := c.StartEngine(ctx, engineStartReq(t)); err != nil {
		t.Fatal(err)
	}
	p := runningEnginePID(t, c)
	wantErrContains(t, c.StartEngine(ctx, engineStartReq(t)), "409", "running")

	var since uint64
	got := waitEngineTransition(t, c, &since, "leader", trLeader)
	if got[0].Kind != rundir.TransLaunch || got[0].PID != p || got[0].Node != "node-0" {
		t.Fatalf("first transition = %+v", got[0])
	}

	// Snapshot and step-down through the agent's proxy.
	body, err := c.EngineAdmin(ctx, "/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	var snap engine.Snapshot
	if err := json.Unmarshal(body, &snap); err != nil || snap.Index == 0 {
		t.Fatalf("snapshot answer %q: %v", body, err)
	}
	got = waitEngineTransition(t, c, &since, "snapshot", func(tr rundir.Transition) bool { return tr.Kind == rundir.TransSnapshot })
	if tr := got[len(got)-1]; tr.To != strconv.FormatUint(snap.Index, 10) || tr.Status.LastSnapshot.TakeMs != snap.TakeMs {
		t.Fatalf("snapshot transition %+v for snapshot %+v", tr, snap)
	}
	if _, err := c.EngineAdmin(ctx, "/step-down"); err != nil {
		t.Fatal(err)
	}
	waitEngineTransition(t, c, &since, "step-down", func(tr rundir.Transition) bool {
		return tr.Kind == rundir.TransRole && tr.From == engine.RoleLeader && tr.To == engine.RoleFollower
	})
	_, err = c.EngineAdmin(ctx, "/step-down") // the engine's own refusal comes back as is
	wantErrContains(t, err, "409", "not leader")
	_, err = c.EngineAdmin(ctx, "/shutdown")
	wantErrContains(t, err, "400", "/snapshot or /step-down")
	// GET /trace is forwarded (not refused with 400): this engine has no recorder and says so.
	_, err = c.EngineTrace(ctx)
	wantErrContains(t, err, "404")

	// GETs go to the engine now, query and all.
	fresh, err := c.EngineStatusHash(ctx)
	if err != nil || fresh.PID != p || fresh.StateHash != fmt.Sprintf("hash-at-%d", fresh.AppliedIndex) {
		t.Fatalf("status with hash = %+v, %v", fresh, err)
	}
	if m, err := c.EngineMetrics(ctx); err != nil || string(m) != "testengine_up 1\n" {
		t.Fatalf("metrics = %q, %v", m, err)
	}

	// kill -9, then relaunch on the same folder.
	if err := c.Signal(ctx, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	got = waitEngineTransition(t, c, &since, "down", trDown)
	if down := got[len(got)-1]; down.Exit == nil || down.Exit.Signal != "KILL" || down.PID != p {
		t.Fatalf("down = %+v", down)
	}
	_, err = c.EngineAdmin(ctx, "/snapshot")
	wantErrContains(t, err, "409", "not running")
	wantErrContains(t, c.Signal(ctx, "NOPE"), "400", "KILL, TERM")

	if err := c.Relaunch(ctx); err != nil {
		t.Fatal(err)
	}
	p2 := runningEnginePID(t, c)
	if p2 == p {
		t.Fatalf("relaunch kept pid %d", p)
	}
	wantErrContains(t, c.Relaunch(ctx), "409", "running")
	got = waitEngineTransition(t, c, &since, "leader after relaunch", trLeader)
	if got[0].Kind != rundir.TransLaunch || got[0].Launch != 2 {
		t.Fatalf("after relaunch first = %+v", got[0])
	}
	st, err = c.EngineStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Running || st.PID != p2 || len(st.Launches) != 2 || st.Status == nil || st.Status.Phase != engine.PhaseReady ||
		st.Status.Config["snapshot_block"] != float64(1<<20) || st.LastSeq != since || st.Launches[0].Exit == nil {
		t.Fatalf("status = %+v", st)
	}

	// A long poll with nothing new returns empty after the wait.
	t0 := time.Now()
	trs, err := c.Transitions(ctx, since, 100*time.Millisecond)
	if err != nil || len(trs) != 0 || time.Since(t0) < 90*time.Millisecond {
		t.Fatalf("idle long poll = %v, %v after %v", trs, err, time.Since(t0))
	}

	exit, err := c.StopEngineWithin(ctx, 5*time.Second)
	if err != nil || exit == nil || exit.Code != 0 {
		t.Fatalf("stop = %+v, %v", exit, err)
	}
	got = waitEngineTransition(t, c, &since, "down after stop", trDown)
	if len(got) != 2 || got[0].Kind != rundir.TransSignal || got[0].To != "TERM" || got[1].Exit.Code != 0 {
		t.Fatalf("stop transitions = %+v", got)
	}
	// Transitions are on disk too, for collect.
	b, err := os.ReadFile(filepath.Join(a.dir, rundir.TransitionsFile))
	if err != nil || bytes.Count(b, []byte("\n")) != int(since) {
		t.Fatalf("transitions.jsonl: %d lines, want %d (%v)", bytes.Count(b, []byte("\n")), since, err)
	}
}

func TestStrictRequestBodies(t *testing.T) {
	a := startEngineAgent(t)
	resp, err := a.http.Post("http://agent/v1/engine/start", "application/json", strings.NewReader(`{"confg":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "confg") {
		t.Fatalf("unknown field: %s %s", resp.Status, b)
	}
	for _, q := range []string{"since=x", "wait=forever", "wait=2h"} {
		resp, err := a.http.Get("http://agent/v1/engine/transitions?" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("transitions?%s: %s, want 400", q, resp.Status)
		}
	}
}

func TestClock(t *testing.T) {
	a := startEngineAgent(t)
	s, err := a.c.ClockOffset(context.Background(), 5)
	if err != nil {
		t.Fatal(err)
	}
	// Same machine, same clock: the offset is within the round trip.
	if s.RTT <= 0 || s.Offset > s.RTT || -s.Offset > s.RTT {
		t.Fatalf("clock sample %+v", s)
	}
}

func collectEntries(t *testing.T, r io.Reader) map[string][]byte {
	t.Helper()
	gz, err := gzip.NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = b
	}
}

func TestCollect(t *testing.T) {
	a := startEngineAgent(t)
	c, ctx := a.c, context.Background()
	if err := c.StartEngine(ctx, engineStartReq(t, "TESTENGINE_DATA_BYTES=300000")); err != nil {
		t.Fatal(err)
	}
	var since uint64
	waitEngineTransition(t, c, &since, "leader", trLeader)
	os.MkdirAll(filepath.Join(a.dir, "samples"), 0o755)
	os.WriteFile(filepath.Join(a.dir, "samples", "vmstat.ndjson"), bytes.Repeat([]byte("x"), 300000), 0o644)

	// Default: the big raft file is left out (limit 100 kB here), big files elsewhere stay in.
	var buf bytes.Buffer
	if err := c.Collect(ctx, &buf, CollectOptions{MaxFile: 100000}); err != nil {
		t.Fatal(err)
	}
	ent := collectEntries(t, &buf)
	for _, name := range []string{"engine.log", "engine.json", "transitions.jsonl", "data/", "data/meta.json", CollectSkippedFile} {
		if _, ok := ent[name]; !ok {
			t.Errorf("collect lacks %s (has %d entries)", name, len(ent))
		}
	}
	if !bytes.Contains(ent["engine.log"], []byte("testengine: node node-0")) {
		t.Errorf("engine.log in the archive: %q", ent["engine.log"])
	}
	if _, ok := ent["data/raft.db"]; ok {
		t.Error("data/raft.db over the limit was collected")
	}
	if len(ent["samples/vmstat.ndjson"]) != 300000 {
		t.Errorf("samples file outside the data folder: %d bytes", len(ent["samples/vmstat.ndjson"]))
	}
	if !bytes.Contains(ent[CollectSkippedFile], []byte(`"path": "data/raft.db"`)) {
		t.Errorf("%s = %s", CollectSkippedFile, ent[CollectSkippedFile])
	}

	// all=1 takes everything.
	buf.Reset()
	if err := c.Collect(ctx, &buf, CollectOptions{All: true, MaxFile: 100000}); err != nil {
		t.Fatal(err)
	}
	ent = collectEntries(t, &buf)
	if len(ent["data/raft.db"]) != 300000 {
		t.Errorf("all=1: data/raft.db has %d bytes", len(ent["data/raft.db"]))
	}
	if _, ok := ent[CollectSkippedFile]; ok {
		t.Error("all=1 should skip nothing")
	}

	// CollectInto unpacks what the engine wrote, byte for byte.
	out := t.TempDir()
	if err := c.CollectInto(ctx, out, CollectOptions{}); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join(a.dir, "engine.json"))
	got, err := os.ReadFile(filepath.Join(out, "engine.json"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("engine.json unpacked: %v", err)
	}
	// The default limit (8 MiB) keeps a 300 kB raft file.
	if fi, err := os.Stat(filepath.Join(out, "data", "raft.db")); err != nil || fi.Size() != 300000 {
		t.Fatalf("raft.db under the default limit: %v", err)
	}
}

func TestExtractCollectRefusesEscapes(t *testing.T) {
	for _, name := range []string{"../evil", "/etc/evil", "a/../../evil"} {
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		tw := tar.NewWriter(gz)
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
		tw.Write([]byte("x"))
		tw.Close()
		gz.Close()
		dir := t.TempDir()
		err := ExtractCollect(&buf, filepath.Join(dir, "out"))
		wantErrContains(t, err, "outside")
		if _, err := os.Stat(filepath.Join(dir, "evil")); err == nil {
			t.Fatalf("%s escaped", name)
		}
	}
}

func TestAgentShutdownStopsEngine(t *testing.T) {
	a := startEngineAgent(t)
	if err := a.c.StartEngine(context.Background(), engineStartReq(t)); err != nil {
		t.Fatal(err)
	}
	p := runningEnginePID(t, a.c)
	var since uint64
	waitEngineTransition(t, a.c, &since, "a phase", func(tr rundir.Transition) bool { return tr.Kind == rundir.TransPhase })
	a.stop()
	if pidAlive(p) {
		t.Fatalf("engine pid %d still alive after the agent stopped", p)
	}
}

// startChildAgent runs an agent in a process of its own (this test binary), to be killed.
func startChildAgent(t *testing.T) (*exec.Cmd, *Client) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childAgentEnv+"=1", "RIG_AGENT_TEST_DIR="+dir, "RIG_AGENT_TEST_ENGINE="+testEngine)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	c := NewClient("child", dialSocket(SocketPath(dir)))
	t.Cleanup(c.Close)
	for i := 0; ; i++ {
		pr, err := c.Ping(context.Background())
		if err == nil {
			if pr.PID != cmd.Process.Pid || pr.Node != "child" {
				t.Fatalf("ping answered by %+v, not the child agent %d", pr, cmd.Process.Pid)
			}
			return cmd, c
		}
		if i > 500 {
			t.Fatalf("child agent never answered: %v\n%s", err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The agent is SIGKILLed (no chance to clean up): the kernel must kill its engine (Pdeathsig).
func TestKilledAgentTakesEngineDown(t *testing.T) {
	cmd, c := startChildAgent(t)
	ctx := context.Background()
	if err := c.StartEngine(ctx, engineStartReq(t)); err != nil {
		t.Fatal(err)
	}
	p := runningEnginePID(t, c)
	var since uint64
	waitEngineTransition(t, c, &since, "a phase", func(tr rundir.Transition) bool { return tr.Kind == rundir.TransPhase })
	if !pidAlive(p) {
		t.Fatalf("engine %d not running before the agent is killed", p)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	waitGone(t, p, "engine")
}

// waitGone fails unless pid (what) is gone within 10 s of its agent's death; it kills it if not.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for pidAlive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("%s pid %d outlived its killed agent", what, pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive: the pid exists and is not a zombie (an orphan whose new parent has not reaped it yet
// is dead for our purpose).
func pidAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
