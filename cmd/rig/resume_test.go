package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/internal/testfs"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/playbooks/estimate"
	"github.com/rig-dev/rig/runner"
	"github.com/rig-dev/rig/sweep"
)

// resumePlaybook is a sweep of 6 short runs (2 combinations x 3 rounds, interleaved), so a kill
// during run 4 leaves both combinations with rounds from before and after it.
const resumePlaybook = `
name: resume
cluster: {servers: 1, clients: 1}
preload: {orders: 1k}
load: {probe_rate: 100/s}
warmup: 0s
duration: 1s
matrix: {engine.sync_level: [0, 1]}
rounds: 3
`

// waitAfter waits until what appears in stderr after the first marker.
func waitAfter(t *testing.T, stderr *lockedBuffer, marker, what string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := stderr.String()
		if i := strings.Index(s, marker); i >= 0 && strings.Contains(s[i:], what) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q after %q within %s:\n%s", what, marker, timeout, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitGone waits until no process names a path under dir: a killed controller's agents stop
// their engines and exit by themselves (target/local: Pdeathsig).
func waitGone(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for processesOf(dir) {
		if time.Now().After(deadline) {
			t.Fatalf("processes under %s still run 30 s after the controller ended", dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A 6-run local sweep is SIGKILLed during run 4: rig report accepts the folder, a resume with
// an edited playbook is refused naming the change, and a resume runs runs 4 to 6; that attempt
// is SIGINTed during run 5 and resumed again. The sweep ends with 6 ok runs, sweep.json names
// the three attempts and each rerun's earlier try (moved to attempts/N/rNN), and the sweep
// report has the structure of an uninterrupted sweep's over the same runs, with both
// combinations marked as spanning attempts.
func TestResumeKilledAndInterruptedSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end sweep of 6 short runs, twice interrupted")
	}
	parallelFault(t)
	res := shortResults(t)
	pb := writePlaybook(t, resumePlaybook)
	const addr = "127.0.22.11"

	// Attempt 1: SIGKILL during run 4.
	cmd, _, stderr := startRun(t, "--results", res, "--first-address", addr, pb)
	waitAfter(t, stderr, "run 4/6", "load start", 2*time.Minute)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	m, _ := filepath.Glob(filepath.Join(res, "2*-resume"))
	if len(m) != 1 {
		t.Fatalf("sweep folders in %s: %v", res, m)
	}
	dir := m[0]
	waitGone(t, res)
	sw, err := sweep.Read(dir)
	if err != nil {
		t.Fatalf("sweep.json after SIGKILL: %v", err)
	}
	if sw.Status != "running" || sw.Runs[3].Status != "running" || sw.Runs[2].Status != "ok" || sw.Runs[4].Status != "" || sw.PlaybookHash == "" || sw.Target != "local" {
		t.Fatalf("sweep.json after SIGKILL during run 4: status %s, runs %+v", sw.Status, sw.Runs)
	}
	if out, errOut, code := rigRun(t, "report", dir); code != 0 {
		t.Fatalf("rig report of the killed sweep: exit %d\n%s\n%s", code, out, errOut)
	}

	// An edited playbook is refused, naming the change, before anything starts.
	edited := writePlaybook(t, strings.Replace(resumePlaybook, "duration: 1s", "duration: 2s", 1))
	_, errOut, code := rigRun(t, "run", "--resume", dir, "--first-address", addr, edited)
	if code == 0 || !strings.Contains(errOut, "resume refused") || !strings.Contains(errOut, "duration: 1s → 2s") {
		t.Fatalf("resume with an edited playbook: exit %d, stderr %q; want a refusal naming duration: 1s → 2s", code, errOut)
	}
	if sw2, _ := sweep.Read(dir); len(sw2.Attempts) != 1 {
		t.Fatalf("the refused resume recorded an attempt: %+v", sw2.Attempts)
	}
	if _, err := os.Stat(filepath.Join(dir, "attempts")); err == nil {
		t.Fatal("the refused resume moved run folders aside")
	}

	// Attempt 2 (the playbook from sweep.json): SIGINT during run 5.
	cmd, _, stderr = startRun(t, "--resume", dir, "--first-address", addr)
	waitAfter(t, stderr, "run 5/6", "load start", 2*time.Minute)
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err == nil {
		t.Error("the interrupted resume exited 0")
	}
	if !strings.Contains(stderr.String(), "interrupted: rig run --resume "+dir+" continues the sweep") {
		t.Errorf("the interrupted sweep does not say how to continue it:\n%s", stderr.String())
	}
	if strings.Contains(stderr.String(), "run 1/6") || !strings.Contains(stderr.String(), "run 4/6 (engine.sync_level=1, round 2, attempt 2)") {
		t.Errorf("attempt 2 did not start at run 4:\n%s", stderr.String())
	}
	waitGone(t, res)

	// Attempt 3 finishes the sweep.
	cmd = exec.Command(rigBin, "run", "--resume", dir, "--first-address", addr)
	var stdout3, stderr3 lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout3, &stderr3
	if err := cmd.Run(); err != nil {
		t.Fatalf("last resume: %v\n%s", err, stderr3.String())
	}
	if got := regexp.MustCompile(`(?m)^ok\t.*/r0[56]$`).FindAllString(stdout3.String(), -1); len(got) != 2 || strings.Count(stdout3.String(), "\n") != 3 {
		t.Errorf("last resume ran:\n%s; want r05 and r06 only", stdout3.String())
	}

	sw, err = sweep.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if sw.Status != "ok" || len(sw.Attempts) != 3 {
		t.Fatalf("sweep.json: status %s, attempts %+v%s", sw.Status, sw.Attempts, whyNotOK(dir, sw))
	}
	for i, want := range []string{"abandoned", "interrupted", "ok"} {
		if a := sw.Attempts[i]; a.N != i+1 || a.Status != want || a.Started.IsZero() {
			t.Errorf("attempt %d: %+v, want status %s", i+1, a, want)
		}
	}
	wantAttempt := []int{1, 1, 1, 2, 3, 3}
	for i, r := range sw.Runs {
		var s summary
		readJSON(t, filepath.Join(dir, r.Dir, "summary.json"), &s)
		if r.Status != "ok" || s.Status != "ok" || r.Attempt != wantAttempt[i] || r.Ended.IsZero() {
			t.Errorf("%s: status %s (summary %s), attempt %d (want %d), ended %s", r.Dir, r.Status, s.Status, r.Attempt, wantAttempt[i], r.Ended)
		}
	}
	for _, c := range []struct {
		run, dir, status string
		attempt          int
	}{{"r04", "attempts/1/r04", "abandoned", 1}, {"r05", "attempts/2/r05", "interrupted", 2}} {
		r := sw.Runs[c.run[2]-'1']
		if len(r.Earlier) != 1 || r.Earlier[0].Dir != c.dir || r.Earlier[0].Status != c.status || r.Earlier[0].Attempt != c.attempt {
			t.Errorf("%s earlier tries %+v, want one: attempt %d, %s, %s", c.run, r.Earlier, c.attempt, c.status, c.dir)
		}
		var mf struct{ Status string }
		readJSON(t, filepath.Join(dir, c.dir, "manifest.json"), &mf)
		if want := map[string]string{"abandoned": "running", "interrupted": "interrupted"}[c.status]; mf.Status != want {
			t.Errorf("%s/manifest.json status %q, want %q", c.dir, mf.Status, want)
		}
	}
	for i, r := range sw.Runs {
		if len(r.Earlier) > 0 && i != 3 && i != 4 {
			t.Errorf("%s has earlier tries %+v: only r04 and r05 were rerun", r.Dir, r.Earlier)
		}
	}

	// The report's structure is that of the same runs as one uninterrupted attempt.
	rep, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	if !strings.Contains(string(rep), "Resumed: 3 attempts") || strings.Count(string(rep), "‡ (attempts 1, 2, 3)")+strings.Count(string(rep), "‡ (attempts 1, 2)")+strings.Count(string(rep), "‡ (attempts 1, 3)") < 2 {
		t.Errorf("report.md does not mark the combinations spanning attempts:\n%s", rep)
	}
	flat := t.TempDir()
	one := *sw
	one.Attempts = one.Attempts[:1]
	one.Runs = nil
	for _, r := range sw.Runs {
		if err := os.CopyFS(filepath.Join(flat, r.Dir), os.DirFS(filepath.Join(dir, r.Dir))); err != nil {
			t.Fatal(err)
		}
		r.Attempt, r.Earlier = 1, nil
		one.Runs = append(one.Runs, r)
	}
	if err := one.Write(flat); err != nil {
		t.Fatal(err)
	}
	set, err := sweep.Load(flat)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sweep.WriteReport(set, sweep.Options{}); err != nil {
		t.Fatal(err)
	}
	flatRep, _ := os.ReadFile(filepath.Join(flat, "report.md"))
	if a, b := reportShape(string(rep)), reportShape(string(flatRep)); a != b {
		t.Errorf("report structure differs from an uninterrupted sweep's:\n%s\n--- uninterrupted:\n%s", a, b)
	}
	noTmpFiles(t, res)
	if left, _ := filepath.Glob(filepath.Join(res, ".sweep-*")); len(left) > 0 {
		t.Errorf("temporary sweep folders left: %v", left)
	}
	assertNoProcessesUnder(t, res)
}

// reportShape is a report's headings and, per table row, its first cell without the
// attempts mark and its number of cells.
func reportShape(md string) string {
	var b strings.Builder
	mark := regexp.MustCompile(` ‡ \(attempts [0-9, ]+\)`)
	for _, l := range strings.Split(md, "\n") {
		switch {
		case strings.HasPrefix(l, "#"):
			b.WriteString(l + "\n")
		case strings.HasPrefix(l, "|"):
			cells := strings.Split(l, "|")
			b.WriteString(mark.ReplaceAllString(cells[1], "") + " " + string(rune('0'+len(cells))) + "\n")
		}
	}
	return b.String()
}

// deadlinePlaybook is 3 short runs of one setting.
const deadlinePlaybook = `
name: deadline
cluster: {servers: 1, clients: 1}
preload: {orders: 1k}
load: {probe_rate: 100/s}
warmup: 0s
duration: 1s
rounds: 3
`

// A --deadline that the plan's estimate fits but its runs do not (the stage-time history is
// from a faster machine: every stage but the load ~0, the load half its duration) lets the sweep
// start, stops it before the run that would end after it — the runs before it ok, the rest never
// started, the attempt saying why — and --resume finishes it. A --budget below the expected cost
// is refused before anything starts.
func TestDeadlineStopsSweepAndBudgetRefuses(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end sweep of 3 short runs")
	}
	parallelFault(t)
	res := shortResults(t)
	var hist strings.Builder
	for k := 0; k < 3; k++ {
		fmt.Fprintf(&hist, `{"run":"fast-%d","at":"2026-01-01T00:00:00Z","target":"local","sync_level":0,"orders":1000,"probes":100,"duration_s":1,"stages_s":{"start":0.01,"preload":0.01,"load":0.5,"finish":0.01,"analysis":0.01}}`+"\n", k)
	}
	if err := os.WriteFile(filepath.Join(res, estimate.HistoryFile), []byte(hist.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	pbPath := writePlaybook(t, deadlinePlaybook)
	pb, err := playbooks.Open(pbPath, offeredDrivers())
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pb.Plan()
	if err != nil {
		t.Fatal(err)
	}
	h, _ := estimate.Load(res)
	plan.Model, plan.Target = estimate.NewModel(h), "local"
	plan.BookStored = func(run *playbooks.Playbook) bool { return runner.BookStored(res, run) }
	need := sweep.Need(plan, []int{0, 1, 2})
	// Every run takes at least its 1 s of load plus start-up, more than the history says, so
	// the third cannot begin before a deadline this close to the estimate.
	deadline := need + 400*time.Millisecond

	// A budget below the expected cost on a stack's nodes: refused, nothing created. (A local run
	// has no price: --budget is for nodes that cost, see TestRunBudgetRefused.)
	cfg, inv := priceableTarget(t)
	_, errOut, code := rigRun(t, "run", "--results", res, "--inventory", inv, "--budget", "0.001USD", "--stack-config", cfg, pbPath)
	if code != 2 || !strings.Contains(errOut, "--budget: over the limit") || !strings.Contains(errOut, "over the budget of $0.00") || !strings.Contains(errOut, "nothing was started") {
		t.Fatalf("run with a budget below its cost: exit %d, stderr %q", code, errOut)
	}
	if m, _ := filepath.Glob(filepath.Join(res, "2*")); len(m) != 0 {
		t.Fatalf("the refused run created %v", m)
	}

	cmd := exec.Command(rigBin, "run", "--results", res, "--first-address", "127.0.23.11", "--deadline", deadline.String(), pbPath)
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if err == nil || !strings.Contains(stderr.String(), "stopping before run ") || !strings.Contains(stderr.String(), "after the deadline") {
		t.Fatalf("sweep with --deadline %s (estimate %s): err %v, want a stop before a run:\n%s", deadline, need, err, stderr.String())
	}
	m, _ := filepath.Glob(filepath.Join(res, "2*-deadline"))
	if len(m) != 1 {
		t.Fatalf("sweep folders: %v", m)
	}
	dir := m[0]
	sw, err := sweep.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := sw.Attempts[0]
	if sw.Status != "interrupted" || !strings.Contains(a.Stopped, "after the deadline") || len(a.Ran) < 1 || len(a.Ran) > 2 {
		t.Fatalf("sweep.json after the stop: status %s, attempt %+v; want interrupted, stopped before run 2 or 3", sw.Status, a)
	}
	for i, r := range sw.Runs {
		want := ""
		if i < len(a.Ran) {
			want = "ok"
		}
		if r.Status != want {
			t.Errorf("%s: status %q, want %q", r.Dir, r.Status, want)
		}
	}
	waitGone(t, res)
	if out, errOut, code := rigRun(t, "run", "--resume", dir, "--first-address", "127.0.23.11"); code != 0 {
		t.Fatalf("resume after the deadline stop: exit %d\n%s\n%s", code, out, errOut)
	}
	if sw, _ = sweep.Read(dir); sw.Status != "ok" || len(sw.Attempts) != 2 {
		t.Fatalf("after the resume: status %s, attempts %+v%s", sw.Status, sw.Attempts, whyNotOK(dir, sw))
	}
	for _, r := range sw.Runs {
		if r.Status != "ok" {
			t.Errorf("%s: status %q after the resume", r.Dir, r.Status)
		}
	}
	if rep, _ := os.ReadFile(filepath.Join(dir, "report.md")); !strings.Contains(string(rep), "stopped before the end: over the limit") {
		t.Errorf("report.md does not say the first attempt stopped at the deadline:\n%.1500s", rep)
	}
	assertNoProcessesUnder(t, res)
}

// priceableTarget writes a stack config with a price and an inventory of one node of it (on a
// closed port: nothing is reached before the limits are checked).
func priceableTarget(t *testing.T) (cfg, inv string) {
	t.Helper()
	dir := t.TempDir()
	cfg, inv = filepath.Join(dir, "Pulumi.dev.yaml"), filepath.Join(dir, "inv.json")
	if err := os.WriteFile(cfg, []byte("config:\n  aws:region: us-east-1\n  rig:owner: alice\n  rig:operatorCidrs: [\"203.0.113.7/32\"]\n"+
		"  rig:publicKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@laptop\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(inv, []byte(`{"target":"aws","nodes":[
		{"name":"s0","role":"server","address":"127.0.0.1","ssh":{"user":"root","port":1,"host_key":"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"}},
		{"name":"c0","role":"client","address":"127.0.0.1","ssh":{"user":"root","port":1,"host_key":"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, inv
}

// --budget must be a finite amount above 0: Inf used to be accepted (no budget at all, said to
// be one), as were amounts a float parses that are not money. And a stack's price is not applied
// to a local run: --budget or --stack-config without --stack or --inventory used to price this
// machine at the stack's hourly rate and estimate it as the stack. Each is refused naming the
// flag and what is valid, exit 2, before anything is created.
func TestRunBudgetRefused(t *testing.T) {
	cfg, inv := priceableTarget(t)
	pb := writePlaybook(t, deadlinePlaybook)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--inventory", inv, "--stack-config", cfg, "--budget", "Inf"}, `--budget "Inf": want a finite amount of US dollars above 0`},
		{[]string{"--inventory", inv, "--stack-config", cfg, "--budget", "+infUSD"}, `--budget "+infUSD": want a finite amount`},
		{[]string{"--inventory", inv, "--stack-config", cfg, "--budget", "NaN"}, `--budget "NaN": want a finite amount`},
		{[]string{"--inventory", inv, "--stack-config", cfg, "--budget", "-5"}, `--budget "-5": want a finite amount`},
		{[]string{"--inventory", inv, "--stack-config", cfg, "--budget", "1e999"}, `--budget "1e999": want a finite amount`},
		{[]string{"--budget", "20USD", "--stack-config", cfg}, "--budget: a run on the local target (this machine) has no price per hour"},
		{[]string{"--stack-config", cfg}, "--stack-config: a run on the local target (this machine) has no price per hour"},
	} {
		res := filepath.Join(t.TempDir(), "results")
		args := append([]string{"run", "--results", res}, append(c.args, pb)...)
		out, errOut, code := rigRun(t, args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("rig %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(c.args, " "), code, out, errOut, c.want)
		}
		if _, err := os.Stat(res); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("rig %s: created %s (%v)", strings.Join(c.args, " "), res, err)
		}
	}
}

// rig validate PLAYBOOK --stack-config F prints the sweep's cost: its time estimate times the
// stack's price per hour, both as printed above it.
func TestValidatePrintsSweepCost(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "Pulumi.dev.yaml")
	if err := os.WriteFile(cfg, []byte("config:\n  aws:region: us-east-1\n  rig:owner: alice\n  rig:operatorCidrs: [\"203.0.113.7/32\"]\n"+
		"  rig:publicKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@laptop\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runRig(t, "validate", "snapshot-pause", "--stack-config", cfg, "--results", t.TempDir())
	if err != nil {
		t.Fatalf("validate: %v\n%s", err, errOut)
	}
	total := regexp.MustCompile(`(?m)^expected\s+(\S+) in total`).FindStringSubmatch(out)
	hourly := regexp.MustCompile(`(?m)^  total\s+\$([0-9.]+)/h`).FindStringSubmatch(out)
	cost := regexp.MustCompile(`(?m)^expected cost: ~\$([0-9.]+) \(24 run\(s\), ~(\S+) at \$([0-9.]+)/h`).FindStringSubmatch(out)
	if total == nil || hourly == nil || cost == nil {
		t.Fatalf("validate output lacks the estimate, the hourly price or the cost:\n%s", out)
	}
	d, err := time.ParseDuration(total[1])
	if err != nil {
		t.Fatal(err)
	}
	var perHour, usd float64
	fmt.Sscan(hourly[1], &perHour)
	fmt.Sscan(cost[1], &usd)
	if cost[3] != hourly[1] || d.Round(time.Second).String() != cost[2] {
		t.Errorf("cost line %q does not use the plan's %s and the stack's $%s/h", cost[0], total[1], hourly[1])
	}
	if want := d.Hours() * perHour; usd < want-0.01 || usd > want+0.01 || usd <= 0 {
		t.Errorf("cost $%.2f, want %s x $%.2f/h = $%.2f", usd, d, perHour, want)
	}
}

// rig validate PLAYBOOK --stack-config F of a multi-az stack prints what the plan's replicated
// log costs crossing AZs: every run's log as the free-space check estimates it, sent to the two
// followers outside node-0's AZ, at $0.01/GB leaving and again arriving. A single-az stack prints
// no such line.
func TestValidatePrintsCrossAZCost(t *testing.T) {
	dir := t.TempDir()
	base := "config:\n  aws:region: us-east-1\n  rig:owner: alice\n  rig:operatorCidrs: [\"203.0.113.7/32\"]\n" +
		"  rig:publicKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@laptop\n"
	single, multi := filepath.Join(dir, "Pulumi.one.yaml"), filepath.Join(dir, "Pulumi.three.yaml")
	if err := os.WriteFile(single, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(multi, []byte(base+"  rig:placement: multi-az\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runRig(t, "validate", "snapshot-pause", "--stack-config", single, "--results", t.TempDir())
	if err != nil || strings.Contains(out, "cross-AZ") {
		t.Fatalf("single-az: %v, output:\n%s\n%s", err, out, errOut)
	}
	out, errOut, err = runRig(t, "validate", "snapshot-pause", "--stack-config", multi, "--results", t.TempDir())
	if err != nil {
		t.Fatalf("validate: %v\n%s", err, errOut)
	}
	line := regexp.MustCompile(`(?m)^expected cross-AZ cost: ~\$([0-9.]+) \(the replicated log, ~[0-9.]+ GB over 24 run\(s\) .* to 2 follower\(s\) in other AZs: ([0-9.]+) GB at \$0\.01/GB each way`).FindStringSubmatch(out)
	if line == nil {
		t.Fatalf("no cross-AZ cost line:\n%s", out)
	}
	pb, err := playbooks.Open("snapshot-pause", offeredDrivers())
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pb.Plan()
	if err != nil {
		t.Fatal(err)
	}
	var logBytes int64
	for _, r := range plan.Runs {
		b, ok := runner.EstimateLogBytes(r.Playbook)
		if !ok {
			t.Fatal("the reference engine has no write estimate")
		}
		logBytes += b
	}
	var usd, gb float64
	fmt.Sscan(line[1], &usd)
	fmt.Sscan(line[2], &gb)
	if want := float64(logBytes) * 2 / 1e9; gb < want-0.001 || gb > want+0.001 || gb <= 0 {
		t.Errorf("%.3f GB crossing, want 2 followers x %d B = %.3f GB", gb, logBytes, want)
	}
	if want := gb * 0.02; usd < want-0.0001 || usd > want+0.0001 {
		t.Errorf("$%.4f, want %.3f GB x $0.02 = $%.4f", usd, gb, want)
	}
}

// A sweep folder tampered with between attempts is refused by rig run --resume and
// rig report, exit 2, naming what is wrong; nothing in it or outside it changes. sweep.json's
// source pointing at a file that is not a playbook used to be read and its first line echoed
// ("fakeshadow:1:1: root:$6$…"); an attempts symlink made the resume move a run outside the
// sweep; a run folder symlinked elsewhere had its summary.json and report.md rewritten there.
func TestFaultTamperedSweepRefused(t *testing.T) {
	pb := writePlaybook(t, resumePlaybook)
	p, err := playbooks.Open(pb, offeredDrivers())
	if err != nil {
		t.Fatal(err)
	}
	plan, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	secret := writeFile(t, outside, "fakeshadow", "root:$6$c2VjcmV0$notarealhash:19000:0:99999:7:::\n")
	// A run folder outside, as a run leaves it, for the symlinked r02 to point at.
	foreign := filepath.Join(outside, "r02")
	if err := os.MkdirAll(filepath.Join(foreign, "loadgen"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, foreign, "manifest.json", `{"run_id":"x-r02","status":"failed"}`)
	// newSweep leaves a sweep whose r01 ended ok and r02 failed.
	newSweep := func(t *testing.T) string {
		tr, err := sweep.Start(t.TempDir(), plan, "resume", sweep.StartOptions{Target: "local"})
		if err != nil {
			t.Fatal(err)
		}
		for i, st := range []string{"ok", "failed"} {
			if err := tr.Begin(i); err != nil {
				t.Fatal(err)
			}
			d, id := tr.RunDir(i)
			os.MkdirAll(d, 0o755)
			writeFile(t, d, "manifest.json", `{"run_id":"`+id+`","status":"`+st+`"}`)
			writeFile(t, d, "summary.json", `{"status":"`+st+`"}`)
			tr.End(i, id, st)
		}
		if _, err := tr.Finish("failed"); err != nil {
			t.Fatal(err)
		}
		return tr.Dir
	}
	for _, c := range []struct {
		name   string
		tamper func(t *testing.T, d string)
		verbs  [][]string // with the sweep folder appended
		want   string
	}{
		{"source names a file that is not a playbook", func(t *testing.T, d string) {
			sw, err := sweep.Read(d)
			if err != nil {
				t.Fatal(err)
			}
			sw.Source = secret
			if err := sw.Write(d); err != nil {
				t.Fatal(err)
			}
		}, [][]string{{"run", "--resume"}}, "sweep.json's source " + secret + " is not the sweep's playbook"},
		{"attempts symlinked out", func(t *testing.T, d string) {
			if err := os.Symlink(outside, filepath.Join(d, sweep.AttemptsDir)); err != nil {
				t.Fatal(err)
			}
		}, [][]string{{"run", "--resume"}, {"report"}}, "attempts is a symlink (to " + outside + ")"},
		{"run folder symlinked out", func(t *testing.T, d string) {
			if err := os.RemoveAll(filepath.Join(d, "r02")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(foreign, filepath.Join(d, "r02")); err != nil {
				t.Fatal(err)
			}
		}, [][]string{{"run", "--resume"}, {"report"}}, "r02 is a symlink (to " + foreign + ")"},
		{"a run folder named twice", func(t *testing.T, d string) {
			sw, err := sweep.Read(d)
			if err != nil {
				t.Fatal(err)
			}
			sw.Runs[1].Dir = "r01"
			if err := sw.Write(d); err != nil {
				t.Fatal(err)
			}
		}, [][]string{{"run", "--resume"}, {"report"}}, "runs 1 and 2 both name the folder r01"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newSweep(t)
			c.tamper(t, d)
			before, beforeOut := testfs.State(t, d), testfs.State(t, outside)
			for _, verb := range c.verbs {
				args := append(append([]string(nil), verb...), d)
				out, errOut, code := rigRun(t, args...)
				if code != 2 || !strings.Contains(errOut, c.want) {
					t.Errorf("rig %s: exit %d, stderr %q; want exit 2 and %q\n%s", strings.Join(verb, " "), code, errOut, c.want, out)
				}
				if strings.Contains(errOut+out, "root:") || strings.Contains(errOut+out, "notarealhash") {
					t.Errorf("rig %s echoed the file sweep.json's source names: %q", strings.Join(verb, " "), errOut)
				}
			}
			if after := testfs.State(t, d); after != before {
				t.Errorf("the sweep folder changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if after := testfs.State(t, outside); after != beforeOut {
				t.Errorf("the folder outside the sweep changed:\nbefore:\n%s\nafter:\n%s", beforeOut, after)
			}
		})
	}
}

// whyNotOK names, for each run of sw that did not end ok, the status and reason its summary
// gives, so a sweep failed by a run (a load that overran beside other tests) says which and why.
func whyNotOK(dir string, sw *sweep.Sweep) string {
	var b strings.Builder
	for _, r := range sw.Runs {
		if r.Status == "ok" || r.Dir == "" {
			continue
		}
		var s summary
		raw, err := os.ReadFile(filepath.Join(dir, r.Dir, "summary.json"))
		if err == nil {
			err = json.Unmarshal(raw, &s)
		}
		if err != nil {
			fmt.Fprintf(&b, "\n%s: %s (no summary: %v)", r.Dir, r.Status, err)
			continue
		}
		fmt.Fprintf(&b, "\n%s: %s, %s %s", r.Dir, s.Status, s.StatusReason, s.Error)
	}
	return b.String()
}
