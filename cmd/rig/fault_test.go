package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/internal/testfs"
)

// The fault suite (docs/security.md): each test makes one fault happen to a real run on the
// local target and checks what the rig does about it.

// probeEnv, when set, makes the test binary a prober: it makes the requests listed in the
// variable (JSON []probe), prints one probeResult per line and exits. The tests run it as the
// unprivileged user nobody.
const probeEnv = "RIG_TEST_PROBE"

type probe struct {
	Net, Addr, Method, Path string
}

type probeResult struct {
	probe
	Status int    // HTTP status, 0 when no answer came
	Err    string // why no answer came
}

func runProbes() {
	var ps []probe
	if err := json.Unmarshal([]byte(os.Getenv(probeEnv)), &ps); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, p := range ps {
		hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, p.Net, p.Addr)
		}}}
		req, _ := http.NewRequest(p.Method, "http://x"+p.Path, strings.NewReader(`{}`))
		res := probeResult{probe: p}
		if resp, err := hc.Do(req); err != nil {
			res.Err = err.Error()
		} else {
			res.Status = resp.StatusCode
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		enc.Encode(res)
	}
	os.Exit(0)
}

// asNobody runs the probes as uid/gid 65534 from a copy of this test binary that nobody may
// execute.
func asNobody(t *testing.T, ps []probe) []probeResult {
	t.Helper()
	dir, err := os.MkdirTemp("", "rig-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	self, _ := os.Executable()
	bin := filepath.Join(dir, "prober")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(ps)
	cmd := exec.Command(bin)
	cmd.Dir = "/"
	cmd.Env = []string{probeEnv + "=" + string(js)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("prober as nobody: %v\n%s", err, out)
	}
	var res []probeResult
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var r probeResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("prober output %q: %v", sc.Text(), err)
		}
		res = append(res, r)
	}
	if len(res) != len(ps) {
		t.Fatalf("prober made %d of %d requests:\n%s", len(res), len(ps), out)
	}
	return res
}

// shortResults is a results folder with a short path (so control sockets stay in the node
// folders) that every user may enter, so only the 0700 socket folders keep anyone out.
func shortResults(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "rf")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startRun starts `rig run` and returns it with its output.
func startRun(t *testing.T, args ...string) (*exec.Cmd, *lockedBuffer, *lockedBuffer) {
	t.Helper()
	cmd := exec.Command(rigBin, append([]string{"run"}, args...)...)
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd, &stdout, &stderr
}

func waitFor(t *testing.T, what string, stderr *lockedBuffer, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(stderr.String(), what) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within %s:\n%s", what, timeout, stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// onlyRunDir is the one run folder in res.
func onlyRunDir(t *testing.T, res string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(res, "2*"))
	if len(m) != 1 {
		t.Fatalf("run folders in %s: %v", res, m)
	}
	return m[0]
}

const faultPlaybook = `
name: faults
cluster: {servers: 3, clients: 1}
preload: {orders: 2k}
load: {probe_rate: 200/s}
warmup: 1s
duration: %s
`

// During a live run, the user nobody tries every control path: the agents' sockets, the load
// generator's, the engines' admin API (without the agent's secret) and the agent's old TCP
// port. Every request is refused, and the run ends ok, undisturbed.
func TestFaultUnprivilegedRequestsRefused(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("end-to-end run as root (it switches to nobody)")
	}
	parallelFault(t)
	res := shortResults(t)
	// nobody's requests take ~0.3 s (at load 12): the 8 s load is live throughout, and long
	// enough that a short run's 10 % overrun allowance holds beside another cluster.
	cmd, stdout, stderr := startRun(t, "--results", res, "--first-address", "127.0.5.11", writePlaybook(t, fmt.Sprintf(faultPlaybook, "8s")))
	waitFor(t, "load start", stderr, 90*time.Second)
	dir := onlyRunDir(t, res)
	var ps []probe
	for i, n := range []string{"node-0", "node-1", "node-2", "client-0"} {
		sock := filepath.Join(dir, n, "ctl", "agent.sock")
		if _, err := os.Stat(sock); err != nil {
			t.Fatalf("agent socket of %s: %v", n, err)
		}
		ps = append(ps, probe{"unix", sock, "GET", "/v1/ping"},
			probe{"unix", sock, "POST", "/v1/engine/start"},
			probe{"unix", sock, "POST", "/v1/tune"},
			probe{"tcp", fmt.Sprintf("127.0.5.%d:7400", 11+i), "GET", "/v1/ping"})
		if n != "client-0" {
			admin := fmt.Sprintf("127.0.5.%d:7002", 11+i)
			ps = append(ps, probe{"tcp", admin, "POST", "/step-down"}, probe{"tcp", admin, "POST", "/snapshot"}, probe{"tcp", admin, "GET", "/status"})
		}
	}
	ps = append(ps, probe{"unix", filepath.Join(dir, "client-0", "ctl", "loadgen.sock"), "POST", "/stop"})
	for _, r := range asNobody(t, ps) {
		switch {
		case r.Net == "unix" && !strings.Contains(r.Err, "permission denied"):
			t.Errorf("nobody: %s %s on %s: status %d, err %q; want permission denied", r.Method, r.Path, r.Addr, r.Status, r.Err)
		case r.Net == "tcp" && strings.HasSuffix(r.Addr, ":7002") && r.Status != http.StatusUnauthorized:
			t.Errorf("nobody: %s %s on engine admin %s: status %d, err %q; want 401", r.Method, r.Path, r.Addr, r.Status, r.Err)
		case r.Net == "tcp" && strings.HasSuffix(r.Addr, ":7400") && r.Err == "":
			t.Errorf("nobody: %s %s on %s answered %d: nothing may listen there", r.Method, r.Path, r.Addr, r.Status)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the run failed: %v\n%s", err, stderr.String())
	}
	var s summary
	readJSON(t, filepath.Join(runDirOf(t, stdout.String()), "summary.json"), &s)
	if s.Status != "ok" {
		t.Fatalf("summary status %q", s.Status)
	}
	events, _ := os.ReadFile(filepath.Join(dir, "events.jsonl"))
	if strings.Contains(string(events), `"step_down"`) || strings.Contains(string(events), `"action":"snapshot"`) {
		t.Errorf("a refused request left a trace in the run:\n%s", events)
	}
	noTmpFiles(t, res)
}

// Two local runs at once on different addresses both finish ok, each with its own agents; a
// third on the addresses of the first stops at once, naming the run that holds them.
func TestFaultSimultaneousLocalRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	parallelFault(t)
	pb := writePlaybook(t, fmt.Sprintf(faultPlaybook, "6s"))
	resA, resB, resC := shortResults(t), shortResults(t), shortResults(t)
	a, _, errA := startRun(t, "--results", resA, "--first-address", "127.0.6.11", pb)
	b, _, errB := startRun(t, "--results", resB, "--first-address", "127.0.7.11", pb)
	waitFor(t, "agents up", errA, 90*time.Second)
	runA := filepath.Base(onlyRunDir(t, resA))

	start := time.Now()
	c, _, errC := startRun(t, "--results", resC, "--first-address", "127.0.6.13", pb) // overlaps A's node-2 and client
	err := c.Wait()
	if err == nil || !strings.Contains(errC.String(), "in use by run "+runA) {
		t.Errorf("third run on A's addresses: %v\n%s\nwant a refusal naming %s", err, errC.String(), runA)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the refusal took %s; it must come before anything starts", took)
	}
	for name, r := range map[string]struct {
		cmd *exec.Cmd
		res string
		err *lockedBuffer
	}{"A": {a, resA, errA}, "B": {b, resB, errB}} {
		if err := r.cmd.Wait(); err != nil {
			t.Errorf("run %s: %v\n%s", name, err, r.err.String())
			continue
		}
		dir := onlyRunDir(t, r.res)
		var s summary
		readJSON(t, filepath.Join(dir, "summary.json"), &s)
		if s.Status != "ok" || s.Probes.N == 0 {
			t.Errorf("run %s: status %q, %d probes", name, s.Status, s.Probes.N)
		}
		// No cross-talk: each agent served only its own run.
		for _, n := range []string{"node-0", "client-0"} {
			recs, _ := os.ReadFile(filepath.Join(dir, n, "lease.jsonl"))
			if !strings.Contains(string(recs), `"run":"`+filepath.Base(dir)+`"`) || strings.Count(string(recs), "\n") != 1 {
				t.Errorf("run %s: %s lease records %q, want one release by its own run", name, n, recs)
			}
		}
		noTmpFiles(t, r.res)
	}
}

// A node name that would climb out of its folder is refused before anything is staged.
func TestFaultTraversalNamesRefused(t *testing.T) {
	inv := filepath.Join(t.TempDir(), "inv.json")
	os.WriteFile(inv, []byte(`{"target":"aws","nodes":[
		{"name":"s0/../../../../escaped","role":"server","address":"127.0.0.1","ssh":{"user":"root","port":22,"host_key":"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"}}]}`), 0o644)
	res := shortResults(t)
	out, errOut, code := rigRun(t, "run", "--inventory", inv, "--results", res, writePlaybook(t, fmt.Sprintf(faultPlaybook, "6s")))
	if code == 0 || !strings.Contains(errOut, "nodes[0].name") || !strings.Contains(errOut, "no '/'") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want a refusal naming nodes[0].name", code, out, errOut)
	}
	if m, _ := filepath.Glob("/tmp/escaped*"); len(m) != 0 {
		t.Fatalf("something escaped: %v", m)
	}
}

// Stack names outside the grammar are refused by every verb that takes one, naming the flag and
// what is valid, before anything runs or is written: no pulumi, no stack driver, no state
// folder, no results folder, no file in the project.
func TestFaultTraversalStackNamesRefused(t *testing.T) {
	root := t.TempDir()
	project, bin, state, res := filepath.Join(root, "repo"), filepath.Join(root, "bin"), filepath.Join(root, "state"), filepath.Join(root, "results")
	ran := filepath.Join(root, "ran.log")
	os.MkdirAll(project, 0o755)
	os.MkdirAll(bin, 0o755)
	os.WriteFile(filepath.Join(project, "Pulumi.yaml"), []byte("name: rig\nruntime: go\n"), 0o644)
	os.WriteFile(filepath.Join(project, "Pulumi.-rf.yaml"), []byte("config:\n  rig:owner: alice\n"), 0o644)
	// Anything that would run is recorded: the pulumi CLI and the stack driver.
	logger := "#!/bin/sh\necho \"$0 $*\" >> " + ran + "\n"
	os.WriteFile(filepath.Join(bin, "pulumi"), []byte(logger), 0o755)
	os.WriteFile(filepath.Join(bin, "rig-stack"), []byte(logger), 0o755)
	pb := writePlaybook(t, fmt.Sprintf(faultPlaybook, "6s"))
	for _, name := range []string{"../x", "-rf", "a/b"} {
		for _, args := range [][]string{
			{"up", "--stack=" + name, "--project-dir", project},
			{"up", "--stack=" + name, "--dry-run", "--project-dir", project},
			{"down", "--stack=" + name, "--project-dir", project, "--results", res},
			{"extend", "--stack=" + name, "--hours", "1", "--project-dir", project},
			{"run", "--stack=" + name, "--results", res, pb},
			{"validate", "--stack=" + name, pb},
		} {
			cmd := exec.Command(rigBin, args...)
			cmd.Dir = project
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "XDG_STATE_HOME="+state,
				"RIG_STACK_DRIVER="+filepath.Join(bin, "rig-stack"), "PULUMI_BACKEND_URL=")
			var errOut strings.Builder
			cmd.Stderr = &errOut
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(errOut.String(), "--stack") ||
				!strings.Contains(errOut.String(), "want a letter or digit") {
				t.Errorf("rig %v: %v, stderr %q; want exit 2 naming --stack and what is valid", args, err, errOut.String())
			}
		}
	}
	// A stack config whose file name is outside the grammar is refused by name, before it is read.
	_, errOut, code := rigRun(t, "validate", pb, "--stack-config", filepath.Join(project, "Pulumi.-rf.yaml"))
	if code != 2 || !strings.Contains(errOut, "the stack name in") {
		t.Errorf("validate --stack-config Pulumi.-rf.yaml: exit %d, stderr %q", code, errOut)
	}
	if b, err := os.ReadFile(ran); err == nil {
		t.Errorf("something ran: %s", b)
	}
	for _, p := range []string{state, res, filepath.Join(root, "x"), filepath.Join(project, "a")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was created", p)
		}
	}
	if ents, _ := os.ReadDir(project); len(ents) != 2 {
		t.Errorf("the project folder changed: %v", ents)
	}
}

// A lease length outside 5s..10m, or not a duration, is refused naming --lease and the valid
// range, before anything starts or is written.
func TestRunLeaseFlagBounds(t *testing.T) {
	res := filepath.Join(t.TempDir(), "results")
	for _, v := range []string{"1s", "11m", "0s", "soon"} {
		_, errOut, code := rigRun(t, "run", "--lease", v, "--results", res, "quickstart")
		if code != 2 || !strings.Contains(errOut, "--lease") || (v != "soon" && !strings.Contains(errOut, "from 5s to 10m0s")) {
			t.Errorf("--lease %s: exit %d, stderr %q; want exit 2 naming --lease and the range", v, code, errOut)
		}
	}
	if _, err := os.Stat(res); !errors.Is(err, os.ErrNotExist) {
		t.Error("the results folder was created")
	}
}

// The controller is SIGKILLed mid-run with kernel tuning applied: its agents undo the run by
// themselves — every tuned value is back, no agent or engine is left — within the lease, and
// each records what it did.
func TestFaultControllerKilled(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("end-to-end run as root (it tunes this machine's kernel)")
	}
	parallelFault(t)
	keys := []string{"/proc/sys/vm/dirty_expire_centisecs", "/proc/sys/vm/dirty_writeback_centisecs"}
	orig := map[string]string{}
	for _, k := range keys {
		b, err := os.ReadFile(k)
		if err != nil {
			t.Skip("needs " + k)
		}
		orig[k] = strings.TrimSpace(string(b))
	}
	t.Cleanup(func() { // whatever happens, this machine gets its values back
		for k, v := range orig {
			os.WriteFile(k, []byte(v), 0o644)
		}
	})
	var expire, writeback int
	fmt.Sscan(orig[keys[0]], &expire)
	fmt.Sscan(orig[keys[1]], &writeback)
	pb := fmt.Sprintf(faultPlaybook, "60s") + fmt.Sprintf("tuning: {vm.dirty_expire_centisecs: %d, vm.dirty_writeback_centisecs: %d}\n", expire+11, writeback+13)
	res := shortResults(t)
	cmd, _, stderr := startRun(t, "--tune-local", "--results", res, "--first-address", "127.0.9.11", writePlaybook(t, pb))
	waitFor(t, "load start", stderr, 90*time.Second)
	for _, k := range keys {
		if b, _ := os.ReadFile(k); strings.TrimSpace(string(b)) == orig[k] {
			t.Fatalf("%s not tuned during the run", k)
		}
	}
	dir := onlyRunDir(t, res)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	killed := time.Now()
	deadline := killed.Add(15 * time.Second) // runner.DefaultLeaseTTL
	for {
		back := true
		for _, k := range keys {
			b, _ := os.ReadFile(k)
			back = back && strings.TrimSpace(string(b)) == orig[k]
		}
		if back && !processesOf(dir) {
			break
		}
		if time.Now().After(deadline) {
			for _, k := range keys {
				b, _ := os.ReadFile(k)
				t.Errorf("%s is %s, was %s", k, strings.TrimSpace(string(b)), orig[k])
			}
			t.Fatalf("15 s after the controller died: tuning or processes left (see %s)", dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("undone %s after the controller was killed", time.Since(killed).Round(time.Millisecond))
	assertNoProcessesUnder(t, res)
	recs, _ := os.ReadFile(filepath.Join(dir, "node-0", "lease.jsonl"))
	if !strings.Contains(string(recs), `"event":"agent_stopped"`) || !strings.Contains(string(recs), `"tuning_reverted":2`) {
		t.Errorf("node-0 lease records %q: want the undo with 2 settings reverted", recs)
	}

	// The manifest still says running; rig report calls the run abandoned, with when the
	// controller was last heard from.
	var m struct{ Status string }
	readJSON(t, filepath.Join(dir, "manifest.json"), &m)
	if m.Status != "running" {
		t.Fatalf("manifest status %q, want running (the controller never finished it)", m.Status)
	}
	if out, errOut, code := rigRun(t, "report", dir); code != 0 {
		t.Fatalf("rig report: exit %d\n%s\n%s", code, out, errOut)
	}
	var s struct {
		Status              string     `json:"status"`
		ControllerLastHeard *time.Time `json:"controller_last_heard"`
	}
	readJSON(t, filepath.Join(dir, "summary.json"), &s)
	if s.Status != "abandoned" || s.ControllerLastHeard == nil || killed.Sub(*s.ControllerLastHeard) > 10*time.Second || s.ControllerLastHeard.After(killed) {
		t.Errorf("summary after the kill: %+v (killed at %s); want abandoned, last heard just before the kill", s, killed)
	}
	if rep, _ := os.ReadFile(filepath.Join(dir, "report.md")); !strings.Contains(string(rep), "(abandoned)") || !strings.Contains(string(rep), "last heard from at") {
		t.Errorf("report.md does not call the run abandoned:\n%.600s", rep)
	}
	noTmpFiles(t, res)
}

// processesOf reports whether a process runs with dir in its command line.
func processesOf(dir string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), dir) {
			if st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); !strings.Contains(string(st), ") Z ") {
				return true
			}
		}
	}
	return false
}

// A node's agent stops answering (SIGSTOP: a hung node or a cut link) until its lease lapses:
// the run fails at once, naming the lease, when it lapsed and why renewals failed, in its
// error, manifest, summary.json and report.md; the agent, once it runs again, undoes the run by
// itself and records it; nothing is left running.
func TestFaultLeaseLapseNamed(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	parallelFault(t)
	res := shortResults(t)
	cmd, stdout, stderr := startRun(t, "--lease", "5s", "--results", res, "--first-address", "127.0.13.11",
		writePlaybook(t, fmt.Sprintf(faultPlaybook, "60s")))
	waitFor(t, "load start", stderr, 90*time.Second)
	dir := onlyRunDir(t, res)
	pid := agentPid(t, dir, "node-1")
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	waitFor(t, "lease on node-1 lapsed at", stderr, 20*time.Second)
	// Renewals were tried for the lease's length (less one renewal period) before giving up.
	d := time.Since(stopped)
	if d < 3*time.Second {
		t.Errorf("the lapse was declared %s after the agent stopped answering; the lease is 5s", d)
	}
	t.Logf("lapse declared %s after node-1's agent stopped answering (lease 5s, renewed every 1.25s)", d.Round(time.Millisecond))
	syscall.Kill(pid, syscall.SIGCONT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("the run ended ok although node-1's lease lapsed:\n%s", stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the run did not stop within 60s of the lapse (the load was 60s):\n%s", stderr.String())
	}
	const want = "its agent stopped the engine and reverted tuning"
	var m struct{ Status, Error string }
	readJSON(t, filepath.Join(runDirOf(t, stdout.String()), "manifest.json"), &m)
	if m.Status != "failed" || !strings.HasPrefix(m.Error, "lease on node-1 lapsed at") || !strings.Contains(m.Error, "renewals failing: ") ||
		!strings.Contains(m.Error, want) || strings.Contains(m.Error, "engine exited outside the schedule") {
		t.Errorf("manifest status %q error %q: want the lapse, named, as the cause", m.Status, m.Error)
	}
	t.Logf("run error: %s", m.Error)
	var s struct{ Error string }
	readJSON(t, filepath.Join(dir, "summary.json"), &s)
	rep, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	if !strings.Contains(s.Error, want) || !strings.Contains(string(rep), "lease on node-1 lapsed at") {
		t.Errorf("summary.json error %q / report.md do not name the lapse", s.Error)
	}
	recs, _ := os.ReadFile(filepath.Join(dir, "node-1", "lease.jsonl"))
	if !strings.Contains(string(recs), `"event":"lapsed"`) {
		t.Errorf("node-1 lease records %q: want the agent's own undo", recs)
	}
	assertNoProcessesUnder(t, res)
}

// agentPid is the pid of node's agent of the run in dir (the local target starts it with
// --node NODE --dir DIR/NODE).
func agentPid(t *testing.T, dir, node string) int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(string(b), "\x00")
		if err == nil && len(args) > 1 && args[1] == "agent" && strings.Contains(string(b), "\x00"+filepath.Join(dir, node)+"\x00") {
			var pid int
			fmt.Sscan(e.Name(), &pid)
			return pid
		}
	}
	t.Fatalf("no agent of %s in %s", node, dir)
	return 0
}

// An engine SIGKILLed outside the timeline fails the run naming the node, its role and the
// signal, with the end of its log — not a symptom such as "502 Bad Gateway" from a later action.
func TestFaultUnscheduledEngineDeathNamed(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	parallelFault(t)
	res := shortResults(t)
	// The kill comes at load start, the snapshot (the later action whose failure is a symptom) 4 s after.
	pb := fmt.Sprintf(faultPlaybook, "6s") + "timeline:\n  - {at: 4s, snapshot: {}}\n"
	cmd, stdout, stderr := startRun(t, "--results", res, "--first-address", "127.0.10.11", writePlaybook(t, pb))
	waitFor(t, "load start", stderr, 90*time.Second)
	dir := onlyRunDir(t, res)
	b, err := os.ReadFile(filepath.Join(dir, "node-1", "engine.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	fmt.Sscan(string(b), &pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatalf("the run ended ok although node-1's engine was killed:\n%s", stderr.String())
	}
	var m struct{ Status, Error string }
	readJSON(t, filepath.Join(runDirOf(t, stdout.String()), "manifest.json"), &m)
	for _, want := range []string{"engine exited outside the schedule", "node-1 (", "killed by SIGKILL", "engine.log ends:"} {
		if !strings.Contains(m.Error, want) || !strings.Contains(stderr.String(), want) {
			t.Errorf("run error lacks %q:\nmanifest: %s\nstderr: %s", want, m.Error, stderr.String())
		}
	}
	if m.Status != "failed" {
		t.Errorf("manifest status %q, want failed", m.Status)
	}
	var s struct{ Error string }
	readJSON(t, filepath.Join(dir, "summary.json"), &s)
	rep, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	if !strings.Contains(s.Error, "killed by SIGKILL") || !strings.Contains(string(rep), "killed by SIGKILL") {
		t.Errorf("summary.json error %q / report.md do not name the cause", s.Error)
	}
	noTmpFiles(t, res)
	assertNoProcessesUnder(t, res)
}

// noTmpFiles fails the test for every *.tmp file left anywhere under dir: every file of a run
// folder is written whole (internal/atomicfile) or not at all, whatever happened to the run.
func noTmpFiles(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".tmp") {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}

// runError is a failed run's error where a user meets it: the command's stderr, manifest.json,
// summary.json and report.md.
func runError(t *testing.T, dir, stderr string) map[string]string {
	t.Helper()
	var m, s struct{ Status, Error string }
	readJSON(t, filepath.Join(dir, "manifest.json"), &m)
	readJSON(t, filepath.Join(dir, "summary.json"), &s)
	if m.Status != "failed" {
		t.Errorf("manifest status %q, want failed", m.Status)
	}
	rep, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Error(err)
	}
	t.Logf("run error: %s", m.Error)
	return map[string]string{"stderr": stderr, "manifest": m.Error, "summary": s.Error, "report.md": string(rep)}
}

// wantEverywhere fails t for every text that lacks one of wants.
func wantEverywhere(t *testing.T, texts map[string]string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		for where, text := range texts {
			if !strings.Contains(text, want) {
				t.Errorf("%s lacks %q:\n%s", where, want, text)
			}
		}
	}
}

// bookPlaybook is faultPlaybook with a 20k-order book (snapshots of ~640 KB) and a snapshot at 3s.
func bookPlaybook(duration string) string {
	return strings.Replace(fmt.Sprintf(faultPlaybook, duration), "2k", "20k", 1) + "timeline:\n  - {at: 3s, snapshot: {}}\n"
}

// A run whose engine data would not fit on its filesystem (a 2 MiB tmpfs given with
// --local-data) is refused before any engine starts, with the node, the path and the numbers.
func TestFaultDataDiskTooSmallRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	parallelFault(t)
	fs := testfs.Tmpfs(t, 2<<20)
	res := shortResults(t)
	pb := bookPlaybook("6s")
	if _, errOut, code := rigRun(t, "run", "--results", res, "--local-data", fs+"/missing", writePlaybook(t, pb)); code != 2 || !strings.Contains(errOut, "--local-data "+fs+"/missing: want an existing folder") {
		t.Errorf("--local-data on a missing folder: exit %d, %q; want a usage error naming the flag", code, errOut)
	}
	start := time.Now()
	out, errOut, code := rigRun(t, "run", "--results", res, "--local-data", fs, "--first-address", "127.0.41.11", writePlaybook(t, pb))
	if code == 0 {
		t.Fatalf("a run that does not fit was not refused:\n%s\n%s", out, errOut)
	}
	t.Logf("refused after %s", time.Since(start).Round(time.Millisecond))
	dir := onlyRunDir(t, res)
	wantEverywhere(t, runError(t, dir, errOut), "not enough disk space", "node-0, node-1, node-2 (one filesystem): "+fs+"/node-0/rig/",
		"MiB free; this run writes about", "20,000 orders × 32.", "× 1 snapshot at once + ~")
	if m, _ := filepath.Glob(filepath.Join(dir, "node-*", "engine.log")); len(m) != 0 {
		t.Errorf("engines were started: %v", m)
	}
	if ents, _ := os.ReadDir(fs); len(ents) != 0 {
		t.Errorf("something was written on the refused filesystem: %v", ents)
	}
	noTmpFiles(t, res)
	assertNoProcessesUnder(t, res)
}

// The data filesystem passes the check, then fills up mid-run (a filler file written once the
// load started): the engines stop on ENOSPC and the run's error says so, naming the node.
func TestFaultDiskFullMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	parallelFault(t)
	fs := testfs.Tmpfs(t, 64<<20)
	res := shortResults(t)
	// The engines stop within a second of the fill (their next log append); the snapshot, 4 s
	// after load start, is a write that cannot fit should one not have.
	pb := fmt.Sprintf(faultPlaybook, "6s") + "timeline:\n  - {at: 4s, snapshot: {}}\n"
	cmd, stdout, stderr := startRun(t, "--results", res, "--local-data", fs, "--first-address", "127.0.42.11", writePlaybook(t, pb))
	waitFor(t, "load start", stderr, 90*time.Second)
	filled := testfs.Fill(t, filepath.Join(fs, "filler"), 0)
	t.Logf("filled %d bytes after load start", filled)
	if err := cmd.Wait(); err == nil {
		t.Fatalf("the run ended ok although its disk filled up:\n%s", stderr.String())
	}
	dir := runDirOf(t, stdout.String())
	wantEverywhere(t, runError(t, dir, stderr.String()), "engine exited outside the schedule: node-", "no space left on device")
	noTmpFiles(t, res)
	assertNoProcessesUnder(t, res)
}

// The disk has room for the log but not for a snapshot (512 KiB left after load start; each
// node's snapshot is ~640 KB): the snapshot action's own error names the cause. (The engines
// exit 200 ms after they answer; a failed run waits up to 1 s for such an exit, which then leads
// the error, as it did in 3 of 3 runs here. Only the action's error is asserted: under load the
// exit may come later.)
func TestFaultDiskFullAtSnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	parallelFault(t)
	fs := testfs.Tmpfs(t, 16<<20)
	res := shortResults(t)
	pb := bookPlaybook("5s")
	cmd, stdout, stderr := startRun(t, "--results", res, "--local-data", fs, "--first-address", "127.0.44.11", writePlaybook(t, pb))
	waitFor(t, "load start", stderr, 90*time.Second)
	testfs.Fill(t, filepath.Join(fs, "filler"), 512<<10)
	if err := cmd.Wait(); err == nil {
		t.Fatalf("the run ended ok although no snapshot fitted:\n%s", stderr.String())
	}
	dir := runDirOf(t, stdout.String())
	for where, text := range runError(t, dir, stderr.String()) {
		_, action, ok := strings.Cut(text, "snapshot on the leader at 3s: ")
		if !ok || !strings.Contains(action, "agent node-") || !strings.Contains(action, "write snapshot") || !strings.Contains(action, "no space left on device") {
			t.Errorf("%s: the snapshot action's error does not name the node and the cause:\n%s", where, text)
		}
	}
	noTmpFiles(t, res)
	assertNoProcessesUnder(t, res)
}

// The load generator SIGKILLed mid-run: the run fails, naming the signal.
func TestFaultLoadgenKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	parallelFault(t)
	res := shortResults(t)
	cmd, stdout, stderr := startRun(t, "--results", res, "--first-address", "127.0.43.11", writePlaybook(t, fmt.Sprintf(faultPlaybook, "10s")))
	waitFor(t, "load start", stderr, 90*time.Second)
	dir := onlyRunDir(t, res)
	pid := processOf(t, dir, "loadgen\x00probe")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatalf("the run ended ok although its load generator was killed:\n%s", stderr.String())
	}
	wantEverywhere(t, runError(t, runDirOf(t, stdout.String()), stderr.String()), "load generator: ", "killed by SIGKILL")
	noTmpFiles(t, res)
	assertNoProcessesUnder(t, res)
}

// processOf is the pid of the one live process whose command line holds dir and args (NUL
// separated, as in /proc/PID/cmdline).
func processOf(t *testing.T, dir, args string) int {
	t.Helper()
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(b), dir) || !strings.Contains(string(b), args) {
			continue
		}
		var pid int
		fmt.Sscan(e.Name(), &pid)
		pids = append(pids, pid)
	}
	if len(pids) != 1 {
		t.Fatalf("processes running %q in %s: %v; want one", args, dir, pids)
	}
	return pids[0]
}
