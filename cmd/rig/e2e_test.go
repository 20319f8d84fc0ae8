package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The end-to-end tests build the real binary and run real playbooks on the local target: three
// raft engine processes on loopback, their agents, and the load generator.

var rigBin string

func TestMain(m *testing.M) {
	if os.Getenv(probeEnv) != "" {
		runProbes() // a copy of this binary, run as nobody by the fault suite
	}
	if d := os.Getenv(hogEnv); d != "" {
		runHog(d) // a CPU hog beside a run (e2e_causes_test.go)
	}
	if out := os.Getenv(rssWrapEnv); out != "" {
		os.Exit(runMeasured(out, os.Args[1:])) // a small parent that measures one rig's peak RSS
	}
	dir, err := os.MkdirTemp("", "rig-e2e-")
	if err != nil {
		panic(err)
	}
	rigBin = filepath.Join(dir, "rig")
	out, err := exec.Command("go", "build", "-o", rigBin, ".").CombinedOutput()
	if err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// shortQuickstart is the quickstart at a scale CI can afford, with the same timeline shape:
// 600 probes/s for the 11 s after warm-up (6,600, above checkQuickstartRun's 5,000), and the
// relaunched follower ready well before the end (it takes ~1 s here).
const shortQuickstart = `
name: quickstart-short
cluster: {servers: 3, clients: 1}
engine: {sync_level: 1}
preload: {orders: 20k}
load: {probe_rate: 600/s}
warmup: 1s
duration: 12s
timeline:
  - {at: 2s, snapshot: {}}
  - {at: 3s, kill: {node: follower, signal: KILL, relaunch_after: 2s}}
  - {at: 5s, wait_for: {phase: ready, timeout: 30s}}
  - {at: 5s, snapshot: {}}
`

type summary struct {
	Status       string `json:"status"`
	StatusReason string `json:"status_reason"`
	Error        string `json:"error"`
	Nodes        map[string]struct {
		StateHash string `json:"state_hash"`
		Phase     string `json:"phase"`
	} `json:"nodes"`
	Probes struct {
		N    int `json:"n"`
		Lost int `json:"lost"`
	} `json:"probes"`
	Snapshots []struct {
		Index  uint64             `json:"index"`
		TakeMs map[string]float64 `json:"take_ms"`
	} `json:"snapshots"`
	Restarts []struct {
		Node            string   `json:"node"`
		LaunchToReadyMs *float64 `json:"launch_to_ready_ms"`
	} `json:"restarts"`
}

// checkQuickstartRun asserts what every shortQuickstart run must show, whatever the engine driver.
func checkQuickstartRun(t *testing.T, dir string) {
	t.Helper()
	var s summary
	readJSON(t, filepath.Join(dir, "summary.json"), &s)
	if s.Status != "ok" {
		t.Errorf("status %q: %s%s", s.Status, s.StatusReason, s.Error)
	}
	if len(s.Nodes) != 3 {
		t.Fatalf("nodes %v", s.Nodes)
	}
	var hash string
	for n, st := range s.Nodes {
		if st.StateHash == "" || (hash != "" && st.StateHash != hash) {
			t.Errorf("state hashes differ or missing: %v", s.Nodes)
		}
		hash = st.StateHash
		if st.Phase != "ready" {
			t.Errorf("%s ended in phase %q", n, st.Phase)
		}
	}
	if s.Probes.N < 5000 || s.Probes.Lost != 0 {
		t.Errorf("probes %+v: want ≥5000 answered, none lost", s.Probes)
	}
	if len(s.Snapshots) != 2 {
		t.Fatalf("snapshots %+v, want 2", s.Snapshots)
	}
	for i, sn := range s.Snapshots {
		if len(sn.TakeMs) != 3 {
			t.Errorf("snapshot %d has takes from %d nodes, want 3: %v", i, len(sn.TakeMs), sn.TakeMs)
		}
	}
	if len(s.Restarts) != 1 || s.Restarts[0].LaunchToReadyMs == nil {
		t.Errorf("restarts %+v: want one that reached ready", s.Restarts)
	}
	for _, f := range []string{"manifest.json", "events.jsonl", "report.md", "loadgen/probes.bin", "node-0/engine.log"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("run folder lacks %s", f)
		}
	}
}

func writePlaybook(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pb.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// dumpLogs shows the end of every node's engine log, for a failed run.
func dumpLogs(t *testing.T, stdout string) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		logs, _ := filepath.Glob(filepath.Join(f[1], "*", "engine.log"))
		for _, p := range logs {
			b, _ := os.ReadFile(p)
			if len(b) > 3000 {
				b = b[len(b)-3000:]
			}
			t.Logf("%s:\n%s", p, b)
		}
	}
}

func runDirOf(t *testing.T, stdout string) string {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			return f[1]
		}
	}
	t.Fatalf("no run folder in output %q", stdout)
	return ""
}

// runRigOK runs rig with args, fails the test (with both outputs and the nodes' logs) unless it
// exits 0, and returns its stdout.
func runRigOK(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(rigBin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		dumpLogs(t, stdout.String())
		t.Fatalf("rig %s: %v\nstdout:\n%s\nstderr:\n%s", args[0], err, stdout.String(), stderr.String())
	}
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		if f := strings.Fields(l); len(f) == 2 && filepath.IsAbs(f[1]) {
			noTmpFiles(t, f[1])
		}
	}
	return stdout.String()
}

func TestQuickstartEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run takes ~40 s")
	}
	t.Parallel() // its own addresses and folders: it may run beside the other end-to-end runs
	res := t.TempDir()
	stdout := runRigOK(t, "run", "--results", res, "--first-address", "127.0.3.11", writePlaybook(t, shortQuickstart))
	dir := runDirOf(t, stdout)
	checkQuickstartRun(t, dir)
	assertNoProcessesUnder(t, res)
	// rig run indexed the run it finished (docs/results.md), with its command line.
	if out := runRigOK(t, "history", "--results", res); !strings.Contains(out, filepath.Base(dir)) {
		t.Errorf("rig history does not list %s:\n%s", filepath.Base(dir), out)
	}
	if out := runRigOK(t, "history", "log", "--results", res); !strings.Contains(out, "--first-address 127.0.3.11") {
		t.Errorf("the log lacks the run's command line:\n%s", out)
	}
}

func TestInterruptStopsEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	res := t.TempDir()
	cmd := exec.Command(rigBin, "run", "--results", res, "--first-address", "127.0.4.11", writePlaybook(t, shortQuickstart))
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt once the load is running, like a user pressing Ctrl-C mid-run.
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stderr.String(), "load start") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if err == nil {
		t.Errorf("interrupted run exited 0")
	}
	dir := runDirOf(t, stdout.String())
	var m struct {
		Status string `json:"status"`
	}
	readJSON(t, filepath.Join(dir, "manifest.json"), &m)
	var s summary
	readJSON(t, filepath.Join(dir, "summary.json"), &s)
	if m.Status != "interrupted" || s.Status != "interrupted" {
		t.Errorf("manifest status %q, summary status %q; want interrupted", m.Status, s.Status)
	}
	if s.Probes.N == 0 {
		t.Errorf("summary kept no probes: %+v", s.Probes)
	}
	noTmpFiles(t, res)
	assertNoProcesses(t)
}

// assertNoProcesses fails if any process still runs the test's rig binary (or a command line
// containing one of also, e.g. a binary staged over SSH).
func assertNoProcesses(t *testing.T, also ...string) {
	t.Helper()
	assertNoneRunning(t, func(cmdline []byte) bool { return matchesAny(cmdline, also) })
}

// assertNoneRunning fails for every live process whose command line matches.
func assertNoneRunning(t *testing.T, match func(cmdline []byte) bool) {
	t.Helper()
	time.Sleep(200 * time.Millisecond)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !match(b) {
			continue
		}
		if st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); bytes.Contains(st, []byte(") Z ")) {
			continue // a zombie has exited
		}
		t.Errorf("process left behind: pid %s: %s", e.Name(), bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
	}
}

// parallelFault lets a fault test run beside the other fault tests: each starts its cluster on
// loopback addresses no other test uses at the same time, and looks for its own leftover
// processes only (assertNoProcessesUnder). Go runs such tests once every test that is not
// parallel has finished, at most -parallel (GOMAXPROCS) at once, so the end-to-end runs that
// measure latency (quickstart, command driver, SSH) never share the machine with them. The
// fault runs are light (200 probes/s, 2k–20k orders) and check what is named, not latency.
func parallelFault(t *testing.T) {
	t.Helper()
	t.Parallel()
}

// assertNoProcessesUnder fails if any process whose command line names a path under dir (the
// test's results folder: the controller's --results, the agents' --dir, the engines' and load
// generators' --config) still runs.
func assertNoProcessesUnder(t *testing.T, dir string) {
	t.Helper()
	// dir itself as an argument (NUL-terminated in cmdline), or a path under it.
	assertNoneRunning(t, func(b []byte) bool {
		return bytes.Contains(b, []byte(dir+"\x00")) || bytes.Contains(b, []byte(dir+"/"))
	})
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
}

func matchesAny(cmdline []byte, also []string) bool {
	return bytes.HasPrefix(cmdline, []byte(rigBin)) || containsAny(cmdline, also)
}

// assertNoProcessesOf fails if any process runs a command line containing one of names: for a
// test that runs beside others, whose rig processes are theirs.
func assertNoProcessesOf(t *testing.T, names ...string) {
	t.Helper()
	assertNoneRunning(t, func(cmdline []byte) bool { return containsAny(cmdline, names) })
}

func containsAny(cmdline []byte, also []string) bool {
	for _, a := range also {
		if bytes.Contains(cmdline, []byte(a)) {
			return true
		}
	}
	return false
}

// lockedBuffer is a bytes.Buffer a test may read while a child process writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestTuningAppliedReadBackReverted runs a playbook with kernel tuning on the local target: the
// setting must be applied and read back while the run lasts (recorded in the manifest), and
// this machine's value must be what it was once the run is over.
func TestTuningAppliedReadBackReverted(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	const key = "/proc/sys/vm/dirty_expire_centisecs"
	orig, err := os.ReadFile(key)
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and " + key)
	}
	var before int
	fmt.Sscan(string(orig), &before)
	want := before + 7
	pb := fmt.Sprintf(`
name: tuned
cluster: {servers: 3, clients: 1}
tuning: {vm.dirty_expire_centisecs: %d}
preload: {orders: 1k}
load: {probe_rate: 200/s}
warmup: 1s
duration: 4s
`, want)
	res := t.TempDir()
	cmd := exec.Command(rigBin, "run", "--tune-local", "--results", res, "--first-address", "127.0.8.11", writePlaybook(t, pb))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		os.WriteFile(key, orig, 0o644)
		t.Fatalf("rig run: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	noTmpFiles(t, res)
	after, _ := os.ReadFile(key)
	if strings.TrimSpace(string(after)) != strings.TrimSpace(string(orig)) {
		os.WriteFile(key, orig, 0o644)
		t.Fatalf("%s is %q after the run, was %q: not reverted", key, after, orig)
	}
	var m struct {
		Tuning map[string]struct {
			Applied struct {
				Changes []struct{ Name, Before, Want, After string }
			}
			Reverted struct {
				Changes []struct{ Name, Before, Want, After string }
			}
		}
	}
	readJSON(t, filepath.Join(runDirOf(t, stdout.String()), "manifest.json"), &m)
	tn, ok := m.Tuning["node-0"]
	if !ok || len(tn.Applied.Changes) == 0 || len(tn.Reverted.Changes) == 0 {
		t.Fatalf("manifest tuning %+v", m.Tuning)
	}
	var seen bool
	for _, c := range tn.Applied.Changes {
		if strings.HasSuffix(c.Name, "dirty_expire_centisecs") {
			seen = true
			if c.After != fmt.Sprint(want) || c.Before != strings.TrimSpace(string(orig)) {
				t.Errorf("applied change %+v: want before %s, read back %d", c, orig, want)
			}
		}
	}
	if !seen {
		t.Errorf("no dirty_expire_centisecs change in %+v", tn.Applied.Changes)
	}
}
