package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/agent/facts"
	"github.com/rig-dev/rig/engine/driver/reference"
)

// The bad-input half of the fault suite (docs/security.md "Bad input"): each input is
// given to the built rig as a user would, and must be refused with its place and the limit by a
// process that stays small. The memory bound is the child's own peak resident set
// (getrusage's ru_maxrss), read after the refusal: a limit that held after memory was spent
// fails here, without any timer.

// maxValidateRSS bounds a refusing rig validate's peak resident set: the "~100 MB".
const maxValidateRSS = 100 << 20

// rigRefuses runs rig with args and returns its stderr and its peak resident set in bytes,
// failing the test unless it exits 2 (a usage error: the input is refused).
//
// The rig is started by a fresh copy of this test binary (runMeasured), not by the test itself:
// os/exec starts a child with vfork, and Linux counts the parent's resident set at the child's
// exec in the child's ru_maxrss, so a child of a test process grown to 140 MiB by earlier tests
// would report 140 MiB whatever it used.
func rigRefuses(t *testing.T, args ...string) (string, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang fails, not a slow machine
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rssFile := filepath.Join(t.TempDir(), "maxrss")
	cmd := exec.CommandContext(ctx, self, append([]string{rigBin}, args...)...)
	cmd.Env = append(os.Environ(), rssWrapEnv+"="+rssFile)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("rig %s: %v, want exit 2 (refused)\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	b, err := os.ReadFile(rssFile)
	if err != nil {
		t.Fatalf("no peak RSS for rig %s: %v", strings.Join(args, " "), err)
	}
	kb, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return errOut.String(), kb << 10 // ru_maxrss is in kilobytes on Linux
}

// rssWrapEnv makes the test binary run its arguments as a command and write the command's
// peak resident set (kB) to the file it names.
const rssWrapEnv = "RIG_TEST_MAXRSS_FILE"

// runMeasured runs args[0] with args[1:], passes its output through, writes its ru_maxrss to
// out and returns its exit code.
func runMeasured(out string, args []string) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 1
	}
	if err := os.WriteFile(out, []byte(strconv.FormatInt(ru.Maxrss, 10)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return cmd.ProcessState.ExitCode()
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func wantRefusal(t *testing.T, what, stderr string, rss int64, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(stderr, w) {
			t.Errorf("%s: stderr lacks %q:\n%.2000s", what, w, stderr)
		}
	}
	t.Logf("%s: refused, peak RSS %.1f MiB", what, float64(rss)/(1<<20))
	if rss > maxValidateRSS {
		t.Errorf("%s: rig validate reached %.1f MiB resident refusing it; want at most %d MiB", what, float64(rss)/(1<<20), maxValidateRSS>>20)
	}
}

// The inputs that grew rig validate to 24 GB and 20 GB (a 400 KB playbook of brackets nested
// 200,000 deep, a 500 KB nested mapping) and a stack config nested the same way are refused at
// the 65th level, naming file:line:col and the limit.
func TestFaultNestedInputRefused(t *testing.T) {
	dir := t.TempDir()
	const head = "name: nested\nduration: 30s\nload: {probe_rate: 1k/s}\n"
	brackets := writeFile(t, dir, "brackets.yaml", head+"description: "+strings.Repeat("[", 400_000)+"\n")
	var m strings.Builder
	m.WriteString(head + "description:\n")
	for i := 1; m.Len() < 500_000; i++ {
		m.WriteString(strings.Repeat(" ", i) + "a:\n")
	}
	mapping := writeFile(t, dir, "mapping.yaml", m.String())
	stack := writeFile(t, dir, "Pulumi.deep.yaml", "config:\n  rig:owner: "+strings.Repeat("[", 400_000)+"\n")
	for _, c := range []struct {
		what string
		args []string
		want string
	}{
		// the top-level mapping is level 1, so the 64th bracket (column 14+63) is level 65
		{"400 KB of brackets", []string{"validate", brackets}, brackets + ":4:77: nested more than 64 levels deep"},
		{"500 KB nested mapping", []string{"validate", mapping}, mapping + ":68:65: nested more than 64 levels deep"},
		{"nested stack config", []string{"validate", "quickstart", "--stack-config", stack}, stack + ":2:76: nested more than 64 levels deep"},
	} {
		errOut, rss := rigRefuses(t, c.args...)
		wantRefusal(t, c.what, errOut, rss, c.want, "a file may nest at most 64")
	}
}

// A FIFO given as a playbook or as --stack-config is refused at once, naming what it is; before,
// rig validate waited for a writer for ever.
func TestFaultFIFOInputRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "Pulumi.fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		args []string
	}{
		{"FIFO playbook", []string{"validate", fifo}},
		{"FIFO stack config", []string{"validate", "quickstart", "--stack-config", fifo}},
	} {
		errOut, rss := rigRefuses(t, c.args...)
		wantRefusal(t, c.what, errOut, rss, fifo, "named pipe")
	}
}

// Operator CIDRs that are all of IPv4 in two halves are refused as 0.0.0.0/0 is, naming both.
func TestFaultSplitWorldOpenCIDRRefused(t *testing.T) {
	body, err := os.ReadFile("../../infra/spec/testdata/Pulumi.valid.yaml")
	if err != nil {
		t.Fatal(err)
	}
	split := strings.Replace(string(body), "    - 203.0.113.7/32\n", "    - 0.0.0.0/1\n    - 128.0.0.0/1\n", 1)
	if split == string(body) {
		t.Fatal("the test stack config no longer lists 203.0.113.7/32 as its operator CIDR")
	}
	p := writeFile(t, t.TempDir(), "Pulumi.split.yaml", split)
	errOut, rss := rigRefuses(t, "validate", "quickstart", "--stack-config", p)
	wantRefusal(t, "split world-open CIDR", errOut, rss, "--stack-config "+p, "rig:operatorCidrs = [0.0.0.0/1, 128.0.0.0/1]",
		"together they are all of IPv4: this would open SSH to the whole internet")
}

// A book that cannot fit in memory is refused by rig validate with bytes per order, servers,
// book, need and what the host has: on the local target against this machine's MemAvailable,
// for a stack against its server instance type's memory; and again before any engine starts.
func TestFaultOversizedBookRefused(t *testing.T) {
	dir := t.TempDir()
	book := func(orders string) string {
		return writeFile(t, dir, "book-"+orders+".yaml", "name: book\ncluster: {servers: 3, clients: 1}\nduration: 30s\nload: {probe_rate: 1k/s}\npreload: {orders: "+orders+"}\n")
	}
	huge := book("99999999999")
	errOut, rss := rigRefuses(t, "validate", huge)
	wantRefusal(t, "99,999,999,999 orders on local", errOut, rss, huge+":5:19: preload.orders: not enough memory for the run's book",
		"node-0, node-1, node-2 (one host): the book needs about 21.8 TiB resident (3 servers × 99,999,999,999 orders × 80 B/order, as measured for the reference engine)",
		"(MemAvailable in this machine's /proc/meminfo); at most")

	// The 300M orders: 3 × 300M × 80 B = 67.1 GiB, refused on any machine with less available.
	_, avail, err := facts.Memory("/")
	if err != nil {
		t.Fatal(err)
	}
	if need := uint64(3 * 300_000_000 * reference.BytesPerOrder); avail >= need {
		t.Logf("this machine has %d B available, enough for 300M orders on 3 servers: not refused here", avail)
	} else {
		p := book("300M")
		errOut, rss := rigRefuses(t, "validate", p)
		wantRefusal(t, "300M orders on local", errOut, rss, p+":5:19: preload.orders", "the book needs about 67.1 GiB resident (3 servers × 300,000,000 orders × 80 B/order")
	}

	// A stack of c7i.large servers (4 GiB each, one server per instance): 100M orders (7.5 GiB)
	// do not fit, 40M (3.0 GiB) do.
	body, err := os.ReadFile("../../infra/spec/testdata/Pulumi.valid.yaml")
	if err != nil {
		t.Fatal(err)
	}
	stack := writeFile(t, dir, "Pulumi.small.yaml", string(body)+"  rig:serverInstanceType: c7i.large\n")
	p := book("100M")
	errOut, rss = rigRefuses(t, "validate", p, "--stack", "small", "--stack-config", stack)
	wantRefusal(t, "100M orders on c7i.large", errOut, rss, p+":5:19: preload.orders",
		"node-0: the book needs about 7.5 GiB resident (100,000,000 orders × 80 B/order", "the host has 4.0 GiB (the memory of a c7i.large, "+stack)
	for _, n := range []string{"node-1", "node-2"} {
		if !strings.Contains(errOut, n+": the book needs") {
			t.Errorf("%s (its own c7i.large) not named:\n%s", n, errOut)
		}
	}
	if out, errOut, code := rigRun(t, "validate", book("40M"), "--stack", "small", "--stack-config", stack); code != 0 || !strings.Contains(out, "preload    40M") {
		t.Errorf("40M orders on c7i.large servers: exit %d\n%s\n%s", code, out, errOut)
	}
}

// rig run refuses the same book before any engine starts, after the agents report the host's
// memory (their facts), with the same numbers.
func TestFaultOversizedBookRefusedAtRunStart(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	parallelFault(t)
	res := shortResults(t)
	pb := strings.Replace(fmt.Sprintf(faultPlaybook, "6s"), "2k", "99999999999", 1)
	out, errOut, code := rigRun(t, "run", "--results", res, "--first-address", "127.0.67.11", writePlaybook(t, pb))
	if code == 0 {
		t.Fatalf("a book that does not fit was not refused:\n%s\n%s", out, errOut)
	}
	dir := onlyRunDir(t, res)
	wantEverywhere(t, runError(t, dir, errOut), "not enough memory for the run's book",
		"node-0, node-1, node-2 (one host): the book needs about 21.8 TiB resident (3 servers × 99,999,999,999 orders × 80 B/order", "(MemAvailable of ")
	if m, _ := filepath.Glob(filepath.Join(dir, "node-*", "engine.log")); len(m) != 0 {
		t.Errorf("engines were started: %v", m)
	}
	noTmpFiles(t, res)
	assertNoProcessesUnder(t, res)
}

// rig validate honours SIGTERM during its one long step, the stack preflight (the stack driver
// asking AWS, over a network that may hang): it exits within seconds, the driver killed, nothing
// created. The driver here ignores SIGINT and sleeps, as a hung call would; before, rig waited
// the two minutes an update gets to stop (and ignored SIGTERM all the while).
func TestFaultValidateHonoursSIGTERM(t *testing.T) {
	root := t.TempDir()
	project, bin, state := filepath.Join(root, "repo"), filepath.Join(root, "bin"), filepath.Join(root, "state")
	pidFile := filepath.Join(root, "driver.pid")
	os.MkdirAll(project, 0o755)
	os.MkdirAll(bin, 0o755)
	cfg, err := os.ReadFile("../../infra/spec/testdata/Pulumi.valid.yaml")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, project, "Pulumi.yaml", "name: rig\nruntime: go\n")
	writeFile(t, project, "Pulumi.slow.yaml", string(cfg))
	os.WriteFile(filepath.Join(bin, "pulumi"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
	os.WriteFile(filepath.Join(bin, "rig-stack"), []byte("#!/bin/sh\necho $$ > "+pidFile+"\ntrap '' INT\nexec sleep 300\n"), 0o755)

	cmd := exec.Command(rigBin, "validate", "--stack", "slow", "--results", filepath.Join(root, "results"), "quickstart")
	cmd.Dir = project
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "XDG_STATE_HOME="+state, "AWS_ACCESS_KEY_ID=AKIAEXAMPLE",
		"AWS_SECRET_ACCESS_KEY=x", "RIG_STACK_DRIVER="+filepath.Join(bin, "rig-stack"), "PULUMI_BACKEND_URL=")
	var errOut strings.Builder
	cmd.Stdout, cmd.Stderr = io.Discard, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer cmd.Process.Kill()
	// Wait until validate is in the preflight: the driver has started.
	var pid int
	for deadline := time.Now().Add(time.Minute); ; {
		if b, err := os.ReadFile(pidFile); err == nil && len(b) > 1 {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			break
		}
		select {
		case err := <-done:
			t.Fatalf("validate ended before its preflight: %v\n%s", err, errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the preflight did not start within a minute:\n%s", errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer syscall.Kill(pid, syscall.SIGKILL)
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The bound is generous for a loaded machine; the old wait was two minutes.
	const bound = 15 * time.Second
	select {
	case err := <-done:
		t.Logf("rig validate exited %v after SIGTERM (%v; load %s)", time.Since(sent).Round(time.Millisecond), err, loadavg())
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(errOut.String(), "interrupted during the preflight of slow") {
			t.Errorf("rig validate after SIGTERM during its preflight: %v, stderr %q; want exit 1 saying it was interrupted", err, errOut.String())
		}
	case <-time.After(bound):
		t.Fatalf("rig validate still running %s after SIGTERM during its preflight", bound)
	}
	// The driver is gone too (killed, then reaped by init once rig exited).
	for deadline := time.Now().Add(bound); syscall.Kill(pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the stack driver (pid %d) outlived rig validate", pid)
		}
	}
	for _, p := range []string{state, filepath.Join(root, "results")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was created", p)
		}
	}
	if ents, _ := os.ReadDir(project); len(ents) != 2 {
		t.Errorf("the project folder changed: %v", ents)
	}
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}

// Every other file a user names goes through the same reader: an
// engine.command.config_template of /dev/zero grew rig validate to 24 GB until it was
// OOM-killed, deaf to SIGTERM; a symlink to it did the same; an --ssh-key of /dev/zero failed
// the run only after its folder existed; a FIFO in place of the results folder's stage-time
// history hung rig validate. Each is refused at once, naming the path and what it is, by a
// process that stays small, and nothing is created.
func TestFaultNamedFilesGuarded(t *testing.T) {
	dir := t.TempDir()
	zeroLink := filepath.Join(dir, "zero.tmpl")
	if err := os.Symlink("/dev/zero", zeroLink); err != nil {
		t.Fatal(err)
	}
	book := func(name, tmpl string) string {
		return writeFile(t, dir, name+".yaml", "name: "+name+"\ncluster: {servers: 1, clients: 1}\npreload: {orders: 1k}\nload: {probe_rate: 100/s}\nduration: 5s\n"+
			"engine:\n  driver: command\n  command: {binary: x, args: [\"{{.Settings.sync_level}}\"], config_template: "+tmpl+"}\n")
	}
	for _, c := range []struct {
		what, book, want string
	}{
		{"config_template /dev/zero", book("zero", "/dev/zero"), "config template /dev/zero is a character device; want a regular file"},
		{"config_template a symlink to /dev/zero", book("zerolink", "zero.tmpl"), "config template " + zeroLink + " is a character device"},
	} {
		errOut, rss := rigRefuses(t, "validate", c.book)
		wantRefusal(t, c.what, errOut, rss, c.book+":8:77: engine.command.config_template: cannot read the template", c.want)
	}

	// --ssh-key: refused before the run makes anything.
	fifo := filepath.Join(dir, "key.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	_, inv := priceableTarget(t)
	for key, kind := range map[string]string{"/dev/zero": "a character device", zeroLink: "a character device", fifo: "a named pipe (FIFO)"} {
		res := filepath.Join(t.TempDir(), "results")
		_, errOut, code := rigRun(t, "run", "--results", res, "--inventory", inv, "--ssh-key", key, "quickstart")
		if code != 2 || !strings.Contains(errOut, "--ssh-key: not a regular file: ssh key "+key+" is "+kind) {
			t.Errorf("rig run --ssh-key %s: exit %d, stderr %q; want exit 2 naming the key and what it is", key, code, errOut)
		}
		if _, err := os.Stat(res); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("rig run --ssh-key %s created %s", key, res)
		}
	}

	// A FIFO as the stage-time history: validate says so and estimates from the defaults.
	res := filepath.Join(dir, "results")
	os.MkdirAll(res, 0o755)
	if err := syscall.Mkfifo(filepath.Join(res, "stage-times.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := rigRun(t, "validate", "--results", res, "quickstart")
	if code != 0 || !strings.Contains(errOut, "stage-time history "+filepath.Join(res, "stage-times.jsonl")+" is a named pipe (FIFO)") ||
		!strings.Contains(out, "expected") {
		t.Errorf("rig validate with a FIFO as the history: exit %d, stderr %q; want the plan and a warning naming the FIFO\n%s", code, errOut, out)
	}
}

// rig validate honours SIGTERM in its steps that do not watch ctx too. Here its plan (990 runs of
// a timeline of 1,100 kills, some 200 KB) goes to a pipe nobody reads, as `rig validate big.yaml
// | less` left unscrolled: the write blocks, and SIGTERM used to be swallowed (NotifyContext) with
// rig blocked for ever. It now exits 1 within interruptGrace, saying so, having created nothing.
func TestFaultSlowValidateHonoursSIGTERM(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("name: slow\ncluster: {servers: 7, clients: 3}\npreload: {orders: 1k}\nload: {probe_rate: 100/s}\nduration: 3000s\n" +
		"matrix: {engine.sync_level: [0, 1, 2], preload.orders: [1k, 2k, 3k, 4k, 5k, 6k, 7k, 8k, 9k, 10k]}\nrounds: 33\ntimeline:\n")
	for i := range 1100 {
		fmt.Fprintf(&b, "  - {at: %dms, kill: {node: node-%d, relaunch_after: 100ms}}\n", 1000+i*1000, i%7)
	}
	pb := writeFile(t, dir, "slow.yaml", b.String())
	res := filepath.Join(dir, "results")
	unread, stdout, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer unread.Close()
	cmd := exec.Command(rigBin, "validate", "--results", res, pb)
	var errOut strings.Builder
	cmd.Stdout, cmd.Stderr = stdout, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdout.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer cmd.Process.Kill()
	// Signal once rig is planning: its resident set has grown past 60 MiB (it starts under 30
	// and peaks near 170), long after main installed its handlers.
	for deadline := time.Now().Add(time.Minute); residentBytes(cmd.Process.Pid) < 60<<20; time.Sleep(time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("rig validate ended before it grew: %v\n%s", err, errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("rig validate did not start planning within a minute")
		}
	}
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	const bound = 15 * time.Second // generous for a loaded machine; before, it never exited
	select {
	case err := <-done:
		t.Logf("rig validate exited %v after SIGTERM (%v; load %s)", time.Since(sent).Round(time.Millisecond), err, loadavg())
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(errOut.String(), "rig: validate interrupted (terminated)") {
			t.Errorf("rig validate after SIGTERM: %v, stderr %q; want exit 1 saying it was interrupted", err, errOut.String())
		}
	case <-time.After(bound):
		t.Fatalf("rig validate still running %s after SIGTERM", bound)
	}
	if _, err := os.Stat(res); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s was created", res)
	}
}

// residentBytes is process pid's resident set (/proc/PID/status VmRSS), 0 when unknown.
func residentBytes(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
