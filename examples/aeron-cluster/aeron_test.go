// Package aeroncluster_test builds the Aeron Cluster engine in this folder with Maven and runs
// it under rig: its self-test (book rules, snapshot records, refusal of partial images), then
// the conformance suite on a real three-node cluster on loopback, whose state hash after the
// preload must equal the one rig's own book (engine/book) gives for the same orders.
//
// Needs mvn and a JDK 17+ in PATH (skipped, saying so, without them). The first build downloads
// io.aeron:aeron-all and Maven's plugins into ~/.m2; later builds need no network
// (mvn -q -B -f examples/aeron-cluster/pom.xml dependency:go-offline fetches everything ahead).
package aeroncluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/conformance"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/command"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/engine/driver/reference"
	"github.com/rig-dev/rig/internal/bufferchain"
	"github.com/rig-dev/rig/internal/tools"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
)

// needTools skips the test (or fails it under CI=true) when Maven or Java is missing, naming
// the package: the Aeron Cluster example needs Maven and a JDK 17+.
func needTools(t *testing.T) {
	t.Helper()
	tools.Require(t, "mvn")
	tools.Require(t, "java")
}

var (
	buildOnce sync.Once
	buildErr  error
)

// build packages the modules (harness, matching, auction: <module>/target/<module>.jar and lib/) once per test binary.
func build(t *testing.T) {
	t.Helper()
	needTools(t)
	buildOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "mvn", "-q", "-B", "-f", "pom.xml", "package")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("mvn -q -B package: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
}

func javaCmd(ctx context.Context, class string) *exec.Cmd {
	return exec.CommandContext(ctx, "java", "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
		"-cp", "matching/target/matching.jar:matching/target/lib/*", class)
}

// TestSelfTest: the book's rules, the snapshot records' size bound, a whole image restoring the
// same book in the same time priority, and a partial or altered image refused.
func TestSelfTest(t *testing.T) {
	build(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := javaCmd(ctx, "dev.rig.aeron.matching.SelfTest").CombinedOutput()
	t.Logf("SelfTest:\n%s", out)
	if err != nil {
		t.Fatalf("dev.rig.aeron.matching.SelfTest: %v", err)
	}
	for _, want := range []string{"pass image without END is refused as partial", "pass whole image restores the same book"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("SelfTest output lacks %q", want)
		}
	}
}

// TestHarnessSelfTest: rig-aeron's start fails naming the Aeron version when a counter it reads
// is missing, Aeron's election states (through its own enum) give the contract's phases, a
// snapshot's Archive writes are the recorder counters' change over its window, the preload's
// receiver window defaults to 4 MiB unless a -D says otherwise, the archive and the ingress
// authenticate only the run's own credential, the leader's burst probe reads stamped ingress
// messages beside the consensus module's subscriber, an error on every change check is logged once
// with its count, the change watcher checks fast only while unsettled and is woken by the
// consensus module's counters, the graceful stop holds the driver until the log publication has
// sent all (bounded by the linger timeout), mark files a clean stop closed are kept, positions of
// requests no longer pending are forgotten, and a snapshot's uncounted figures are left out of
// its JSON.
func TestHarnessSelfTest(t *testing.T) {
	build(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := javaCmd(ctx, "dev.rig.aeron.HarnessSelfTest").CombinedOutput()
	t.Logf("HarnessSelfTest:\n%s", out)
	if err != nil {
		t.Fatalf("dev.rig.aeron.HarnessSelfTest: %v", err)
	}
	for _, c := range []string{"pass a missing counter fails the start naming the Aeron version",
		"pass a snapshot's archive writes are the counters' change", "pass receiver window and buffers default to 4 MiB",
		"pass the archive and the ingress accept only the run's credential for each", "pass the run's secret is in no toString",
		"pass an error on every change check is logged once, then its count", "pass the stop holds the driver until the log publication sent all",
		"pass mark files a clean stop closed are kept", "pass POST /stop needs the admin secret",
		"pass transport counters: system counters by name", "pass a burst's figures",
		"pass duty cycles: every agent with both counters is found", "pass duty cycles: a max that grew is one cycle of that length",
		"pass duty cycles: a count alone is a lower bound", "pass duty cycles: a max and a count together",
		"pass duty cycles: an interval without a unit is refused",
		"pass duty cycles hosted: an idle host cycling every 1 ms reads once every 20 ms",
		"pass duty cycles hosted: a busy host reads the clock every", "pass duty cycles hosted: a stall is read within an interval of its end",
		"pass duty cycles hosted: no read after close",
		"pass the change watcher checks fast only while unsettled or just after a change",
		"pass the consensus module's idle wakes the watcher once per counter move",
		"pass a service exception answers its request rejected naming the exception, once, and is counted",
		"pass replies that match no request are counted and named with the codec and the first id",
		"pass positions of requests no longer pending are forgotten", "pass a snapshot's uncounted orders and syncs are left out, not zero",
		"pass the applied record keeps what the restored snapshot covers and drops what the replay applies again",
		"pass so_rcvbuf_granted is the kernel's grant, twice the ask under rmem_max",
		"pass burst probe: per burst received, latency from first offer and from the burst's start, peak per 1 ms at the leader",
		"pass burst probe reads an ingress stream beside the consensus module's subscriber: every message, to both"} {
		if !bytes.Contains(out, []byte(c)) {
			t.Errorf("HarnessSelfTest did not run %q", c)
		}
	}
}

var (
	rigOnce sync.Once
	rigBin  string
	rigErr  error
)

// rigBinary builds the rig binary the agents run, once per test binary.
func rigBinary(t *testing.T) string {
	t.Helper()
	rigOnce.Do(func() {
		dir, err := sharedTempDir("rig-aeron-test-")
		if err != nil {
			rigErr = err
			return
		}
		rigBin = filepath.Join(dir, "rig")
		if out, err := exec.Command("go", "build", "-o", rigBin, "../../cmd/rig").CombinedOutput(); err != nil {
			rigErr = fmt.Errorf("go build ../../cmd/rig: %v\n%s", err, out)
		}
	})
	if rigErr != nil {
		t.Fatal(rigErr)
	}
	return rigBin
}

// TestEngineCheck starts a real three-node Aeron Cluster through rig's command driver and runs
// the conformance suite: every check passes, step-down by the leader's graceful stop and a
// relaunch; after the preload (through the gateway, as docs/wire.md frames) every node's state
// hash is the one engine/book computes for the same orders.
func TestEngineCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a three-node Aeron Cluster")
	}
	build(t)
	bin := rigBinary(t)
	const orders = 10_000
	pb, dir, seen := runCheck(t, bin, "engine.yaml", "127.0.19.11", orders, "the Aeron Cluster engine")
	if r := seen[conformance.CheckRelaunchPhases]; !strings.Contains(r.Seen, "restored its snapshot") {
		t.Errorf("the relaunched follower did not restore the snapshot: %s", r.Seen)
	}
	// The matching engine's introspection gives hash, resting orders and held ids: nothing is missing.
	if r := seen[conformance.CheckStatusFields]; strings.Contains(r.Seen, "not supported") {
		t.Errorf("status fields: want nothing named as not supported: %s", r.Seen)
	}

	// The same orders in rig's own book give the hash every Aeron node must report.
	st, err := reference.Driver{}.WriteBook(io.Discard, loadspec.BookShape{Orders: orders, Instruments: 4})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(seen[conformance.CheckLoadHashes].Seen, "hash "+st.StateHash); got != pb.Cluster.Servers {
		t.Errorf("%d of %d nodes report engine/book's state hash %s after the preload: %s", got, pb.Cluster.Servers, st.StateHash,
			seen[conformance.CheckLoadHashes].Seen)
	}
	if t.Failed() {
		dumpLogs(t, dir)
	}
}

// TestAuctionCheck runs Aeron's own tutorial service (BasicAuctionClusteredService, unchanged)
// under rig-aeron with a codec and a main (auction/): every check passes; the
// service exposes no state, so the suite has the leader snapshot and compares the hashes of the
// bytes each node wrote into it; what the service lacks is named as not supported.
func TestAuctionCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a three-node Aeron Cluster")
	}
	build(t)
	bin := rigBinary(t)
	pb, dir, seen := runCheck(t, bin, "auction.yaml", "127.0.19.31", 2_000, "Aeron's tutorial auction service")
	if r := seen[conformance.CheckStatusFields]; !strings.Contains(r.Seen, "not supported by the engine: cancel, orders, state_hash") {
		t.Errorf("status fields does not name what the auction lacks: %s", r.Seen)
	}
	for _, c := range []string{conformance.CheckLoadHashes, conformance.CheckFinalHashes} {
		if r := seen[c]; strings.Count(r.Seen, "snapshot bytes at ") != pb.Cluster.Servers {
			t.Errorf("%s: want every node's hash from its snapshot: %s", c, r.Seen)
		}
	}
	if t.Failed() {
		dumpLogs(t, dir)
	}
}

// runCheck runs the conformance suite on a playbook of this folder and checks what every Aeron
// engine must pass: every check, step-down by a graceful stop and a relaunch; and every node's
// engine.log holds no stack trace, and no mark file removed as unclosed after a graceful stop.
func runCheck(t *testing.T, bin, playbook, firstAddress string, orders int64, what string) (*playbooks.Playbook, string, map[string]conformance.Result) {
	t.Helper()
	pb, err := playbooks.Open(playbook, testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var logBuf bytes.Buffer
	rs, err := conformance.Run(ctx, conformance.Options{
		Playbook: pb, Dir: dir, FirstAddress: firstAddress, Binary: bin, Orders: orders, Timeout: 45 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logBuf, nil)),
	})
	if err != nil {
		t.Fatalf("conformance: %v", err)
	}
	var table strings.Builder
	conformance.WriteTable(&table, rs)
	t.Logf("rig check on %s:\n%s", what, table.String())
	seen := map[string]conformance.Result{}
	for _, r := range rs {
		seen[r.Check] = r
	}
	for _, c := range []string{conformance.CheckStatusFields, conformance.CheckLaunchPhases, conformance.CheckOneLeader,
		conformance.CheckSettings, conformance.CheckLoadHashes, conformance.CheckBurst, conformance.CheckSnapshotIndex,
		conformance.CheckRelaunchPhases, conformance.CheckFinalHashes, conformance.CheckStepDown} {
		if r, ok := seen[c]; !ok || !r.Pass {
			t.Errorf("%s did not pass: %s", c, r.Seen)
		}
	}
	if sd := seen[conformance.CheckStepDown]; !strings.Contains(sd.Seen, "graceful stop in") {
		t.Errorf("%s: want the leader stepped down by its graceful stop and a relaunch: %s", conformance.CheckStepDown, sd.Seen)
	}
	checkLogs(t, dir)
	return pb, dir, seen
}

// checkLogs fails on a stack trace in any node's engine.log (a clean start and stop print
// none), and on a mark file removed as left unclosed by a launch after a graceful stop.
func checkLogs(t *testing.T, dir string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "node-*", "engine.log"))
	if len(logs) == 0 {
		t.Errorf("no engine.log under %s", dir)
	}
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Error(err)
			continue
		}
		traces, cleanStop := 0, false
		for _, line := range strings.Split(string(b), "\n") {
			switch {
			case strings.HasPrefix(line, "\tat "):
				traces++
			case strings.Contains(line, " INFO stop: closed in "):
				cleanStop = true
			case strings.Contains(line, " launched; admin on "):
				cleanStop = false
			case cleanStop && strings.Contains(line, "ended without closing it"):
				t.Errorf("%s: a launch after a graceful stop removed a mark file as unclosed: %s", l, line)
			}
		}
		if traces > 0 {
			t.Errorf("%s holds a stack trace (%d frames)", l, traces)
		}
	}
}

// runOne runs playbook pb once with rig (bin) on the local target from firstAddr, within
// timeout, and returns its run folder and summary; a failed run or other than one run folder
// fails the test.
func runOne(t *testing.T, bin, pb, firstAddr string, timeout time.Duration, args ...string) (string, analysis.Summary) {
	t.Helper()
	res := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(append([]string{"run", "-q"}, args...), "--results", res, "--first-address", firstAddr, pb)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("rig run: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	sums, _ := filepath.Glob(filepath.Join(res, "*", rundir.SummaryFile))
	if len(sums) != 1 {
		t.Fatalf("want one run folder in %s, got %v", res, sums)
	}
	b, err := os.ReadFile(sums[0])
	if err != nil {
		t.Fatal(err)
	}
	var s analysis.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(sums[0]), s
}

// dumpLogs prints the end of every node's engine.log, so a CI failure shows the JVMs' side.
func dumpLogs(t *testing.T, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "node-*", "engine.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		t.Logf("%s (end):\n%s", l, b)
	}
}

// TestIgnoredPropertyFailsRun: a setting that reaches the JVM under a name Aeron does not read
// (here the leader heartbeat timeout as "...timeout.ns") is carried, so its carriage cannot
// catch it; the node lists it as read by no Aeron configuration, and the run fails before load
// naming the property and the playbook argument that passed it.
func TestIgnoredPropertyFailsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a three-node Aeron Cluster")
	}
	build(t)
	bin := rigBinary(t)
	pb := rewritePlaybook(t, "engine.yaml", map[string]string{
		"-Daeron.cluster.leader.heartbeat.timeout={{": "-Daeron.cluster.leader.heartbeat.timeout.ns={{",
	})
	res := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "-q", "--results", res, "--first-address", "127.0.19.61", pb)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("rig run passed with the heartbeat timeout under a name Aeron ignores:\n%s", stdout.String())
	}
	// The node reports the name it reads nowhere at its first status, before its effect can be
	// compared: the run stops there, naming the property and the argument that passed it.
	for _, want := range []string{"aeron.cluster.leader.heartbeat.timeout.ns is read by no configuration of the engine (GET /status ignored_properties)",
		`engine.command.args[`, `"-Daeron.cluster.leader.heartbeat.timeout.ns={{nanos .Settings.heartbeat_timeout}}"`, "engine.yaml:"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr does not name the unread property and where the playbook passed it (%q):\n%s", want, stderr.String())
		}
	}
	logs, _ := filepath.Glob(filepath.Join(res, "*", "node-0", "engine.log"))
	if len(logs) == 1 {
		if b, err := os.ReadFile(logs[0]); err == nil && !bytes.Contains(b, []byte("aeron.cluster.leader.heartbeat.timeout.ns=2000000000 is read by no Aeron")) {
			t.Errorf("node-0's engine.log does not warn about the unread property")
		}
	}
}

// TestWrongUnitFailsBeforeLoad: the heartbeat timeout rendered in milliseconds where Aeron reads
// nanoseconds reaches Aeron as 2 µs, and no leader can hold the cluster; the run stops while the
// nodes are still electing, as soon as a node's /status reports the setting, naming the node, the
// setting, the value in effect and the value asked — not as a readiness timeout a minute later.
func TestWrongUnitFailsBeforeLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a three-node Aeron Cluster")
	}
	build(t)
	bin := rigBinary(t)
	pb := rewritePlaybook(t, "engine.yaml", map[string]string{
		"{{nanos .Settings.heartbeat_timeout}}": "{{millis .Settings.heartbeat_timeout}}",
	})
	res := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "-q", "--results", res, "--first-address", "127.0.19.71", pb)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("rig run passed with the heartbeat timeout in milliseconds:\n%s", stdout.String())
	}
	want := "engine.heartbeat_timeout is 2µs in effect (GET /status config.heartbeat_timeout), the playbook asked for 2s"
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr does not name the setting, in effect and asked (%q):\n%s", want, stderr.String())
	}
	if !strings.Contains(stderr.String(), "before the cluster was ready") || strings.Contains(stderr.String(), "did not become ready") {
		t.Errorf("want the run stopped before readiness by the setting, not by a readiness timeout:\n%s", stderr.String())
	}
}

// rewritePlaybook writes a copy of playbook name with each old text replaced (each must be there)
// and the start script and config template made absolute; it returns the copy's path.
func rewritePlaybook(t *testing.T, name string, repl map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	repl["binary: ./start-node.sh"] = "binary: " + filepath.Join(here, "start-node.sh")
	repl["config_template: node.properties.tmpl"] = "config_template: " + filepath.Join(here, "node.properties.tmpl")
	text := string(b)
	for old, r := range repl {
		if !strings.Contains(text, old) {
			t.Fatalf("%s no longer has %q", name, old)
		}
		text = strings.Replace(text, old, r, 1)
	}
	pb := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(pb, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return pb
}

// TestPlaybooksOpen: the playbooks in this folder that use the contract's settings parse and
// validate, with every setting carried by a template and the start script made absolute. Needs
// neither Maven nor Java.
func TestPlaybooksOpen(t *testing.T) {
	for _, name := range []string{"engine.yaml", "playbook.yaml", "snapshot-pause.yaml", "follower-restart.yaml", "auction.yaml", "auction-quickstart.yaml",
		"snapshot-forces.yaml", "recording-cost.yaml", "leader-failover.yaml", "handoff.yaml"} {
		pb, err := playbooks.Open(name, testDrivers)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		c := pb.Engine.Command
		if pb.Engine.Driver != command.Name || c == nil {
			t.Errorf("%s: engine driver %q, want command", name, pb.Engine.Driver)
			continue
		}
		if !filepath.IsAbs(c.Binary) || filepath.Base(c.Binary) != "start-node.sh" {
			t.Errorf("%s: binary %q, want the absolute path of start-node.sh", name, c.Binary)
		}
		if want := []string{"election_timeout", "heartbeat_timeout", "snapshot_block", "sync_level"}; strings.Join(c.Carries, ",") != strings.Join(want, ",") {
			t.Errorf("%s: carries %v, want %v", name, c.Carries, want)
		}
	}
}

// TestLeaderFailoverPlaybook: leader-failover.yaml plans one run at Aeron's default leader
// heartbeat timeout and one tuned, each JVM getting it as the Aeron property in nanoseconds, and
// kills the leader twice per run: relaunched at once (the old leader may win again), then after
// a stable leader, relaunched 15 s later. Needs neither Maven nor Java.
func TestLeaderFailoverPlaybook(t *testing.T) {
	plan := openPlan(t, "leader-failover.yaml")
	var got []string
	for _, r := range plan.Runs {
		drv, table, err := r.Playbook.Engine.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		st, err := driver.Prepare(drv, table, r.Playbook.Engine.Settings(), engine.Config{})
		if err != nil {
			t.Fatal(err)
		}
		rendered, err := r.Playbook.Engine.Command.Render(command.Sample(st.Settings))
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range rendered.Args {
			if strings.HasPrefix(a, "-Daeron.cluster.leader.heartbeat.timeout=") {
				got = append(got, r.Settings["engine.heartbeat_timeout"]+" "+a)
			}
		}
	}
	want := []string{"10s -Daeron.cluster.leader.heartbeat.timeout=10000000000", "1s -Daeron.cluster.leader.heartbeat.timeout=1000000000"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("heartbeat timeouts rendered %q, want %q", got, want)
	}
	var kills []string
	for _, e := range plan.Runs[0].Playbook.Timeline {
		if k, ok := e.Spec.(*actions.Kill); ok {
			kills = append(kills, fmt.Sprintf("%s %s %s", e.At, k.Node, k.RelaunchAfter))
		}
	}
	if want := []string{"12s leader 1ms", "32s leader 15s"}; strings.Join(kills, "|") != strings.Join(want, "|") {
		t.Errorf("kills %q, want %q", kills, want)
	}
}

// TestHandoffPlaybook: handoff.yaml plans the leader stopped with SIGTERM and with SIGKILL at
// Aeron's default heartbeat timeout, each relaunched 15 s later, then a step-down. Needs neither
// Maven nor Java.
func TestHandoffPlaybook(t *testing.T) {
	plan := openPlan(t, "handoff.yaml")
	var got []string
	for _, r := range plan.Runs {
		var steps []string
		for _, e := range r.Playbook.Timeline {
			switch s := e.Spec.(type) {
			case *actions.Kill:
				steps = append(steps, fmt.Sprintf("%s kill %s %s %s", e.At, s.Node, s.Signal, s.RelaunchAfter))
			case *actions.StepDown:
				steps = append(steps, fmt.Sprintf("%s step_down", e.At))
			}
		}
		got = append(got, r.Playbook.Engine.Settings()["heartbeat_timeout"]+": "+strings.Join(steps, ", "))
	}
	want := []string{"10s: 10s kill leader TERM 15s, 30s step_down", "10s: 10s kill leader KILL 15s, 30s step_down"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("runs %q, want %q", got, want)
	}
}

// TestMicroBurstPlaybook: micro-burst.yaml parses and validates, sends its bursts through the
// harness's burst client, carries the receiver window and socket buffer it varies, and has the
// guide's three axes.
func TestMicroBurstPlaybook(t *testing.T) {
	pb, err := playbooks.Open("micro-burst.yaml", testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	if bc := pb.Engine.BurstClient(); len(bc) == 0 || filepath.Base(bc[0]) != "start-node.sh" || bc[len(bc)-1] != "--burst" {
		t.Errorf("burst client %q, want start-node.sh ... --burst", bc)
	}
	if c := strings.Join(pb.Engine.Command.Carries, ","); !strings.Contains(c, "aeron.rcv.initial.window.length") || !strings.Contains(c, "aeron.socket.so_rcvbuf") {
		t.Errorf("carries %s", c)
	}
	var axes []string
	for _, a := range pb.Matrix {
		axes = append(axes, a.Key)
	}
	if got := strings.Join(axes, " "); got != "timeline[0].burst.messages tuning.net.core.rmem_max engine.aeron.rcv.initial.window.length" {
		t.Errorf("matrix axes %q", got)
	}
}

// TestMicroBurstReceivePlaybooks: every micro-burst playbook starts its nodes with the leader's
// burst probe (the receive path the guide's p99 is judged on); micro-burst-50k.yaml and
// micro-burst-50k-wide.yaml set the guide's 50K x 170 B burst at net.core.rmem_max 212,992 against
// 128 MiB in rounds, and the wide one's receiver window holds the whole burst framed, within half
// the burst client's ingress term.
func TestMicroBurstReceivePlaybooks(t *testing.T) {
	for _, f := range []string{"micro-burst.yaml", "micro-burst-threshold.yaml", "micro-burst-50k.yaml", "micro-burst-50k-wide.yaml"} {
		pb, err := playbooks.Open(f, testDrivers)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(pb.Engine.Command.Args, "-Drig.burst.probe=true") {
			t.Errorf("%s: args %q lack -Drig.burst.probe=true", f, pb.Engine.Command.Args)
		}
		if !strings.HasPrefix(f, "micro-burst-50k") {
			continue
		}
		if len(pb.Matrix) != 1 || pb.Matrix[0].Key != "tuning.net.core.rmem_max" || pb.Rounds < 2 {
			t.Fatalf("%s: matrix %+v rounds %d, want tuning.net.core.rmem_max in rounds", f, pb.Matrix, pb.Rounds)
		}
		pl, err := pb.Plan()
		if err != nil {
			t.Fatal(err)
		}
		rmem := map[int64]bool{}
		for _, r := range pl.Runs {
			cs := r.Playbook.BurstChains()
			if len(cs) != 1 || cs[0].Burst.Messages != 50000 || cs[0].Burst.Size != 170 || cs[0].Burst.Senders != 1 || !cs[0].Burst.Aeron {
				t.Fatalf("%s run %d: bursts %+v, want one 50k x 170 B through Aeron", f, r.Index, cs)
			}
			c := cs[0]
			rmem[c.RmemMax] = true
			if f == "micro-burst-50k-wide.yaml" {
				framed := int64(c.Burst.Messages) * int64(c.Chain.Wire)
				if c.Window < framed || !strings.Contains(pb.Engine.BurstArgs, "-Daeron.term.buffer.length=64m") || c.Window > 32<<20 {
					t.Errorf("%s: window %d against the burst's %d B framed, burst client %q: want the window to hold the burst within half a 64 MiB term", f, c.Window, framed, pb.Engine.BurstArgs)
				}
			}
		}
		if len(rmem) != 2 || !rmem[212992] || !rmem[128<<20] {
			t.Errorf("%s: net.core.rmem_max %v, want 212992 and 128 MiB", f, rmem)
		}
	}
}

// TestMicroBurstThresholdPlaybook: micro-burst-threshold.yaml parses and plans one burst shape
// through the burst client, the receiver window above the guide's minimum, and net.core.rmem_max
// alone deciding SO_RCVBUF (asked above every step) in doubling steps that bracket the predicted
// minimum from pred/8 to pred x 4; the printed plan marks the short ones and only those.
func TestMicroBurstThresholdPlaybook(t *testing.T) {
	pb, err := playbooks.Open("micro-burst-threshold.yaml", testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	if bc := pb.Engine.BurstClient(); len(bc) == 0 || bc[len(bc)-1] != "--burst" {
		t.Errorf("burst client %q, want ... --burst", bc)
	}
	if len(pb.Matrix) != 1 || pb.Matrix[0].Key != "tuning.net.core.rmem_max" || pb.Rounds != 1 {
		t.Fatalf("matrix %+v rounds %d, want one axis tuning.net.core.rmem_max and 1 round", pb.Matrix, pb.Rounds)
	}
	pl, err := pb.Plan()
	if err != nil {
		t.Fatal(err)
	}
	var pred, prev int64
	var effective []int64
	for _, r := range pl.Runs {
		cs := r.Playbook.BurstChains()
		if len(cs) != 1 {
			t.Fatalf("run %d: %d burst chains, want 1", r.Index, len(cs))
		}
		c := cs[0]
		if c.Burst.Messages != 50000 || c.Burst.Size != 170 || c.Burst.Senders != 1 || !c.Burst.Aeron {
			t.Errorf("run %d: burst %+v, want 50k x 170 B, one sender, through Aeron", r.Index, c.Burst)
		}
		if pred != 0 && c.Chain.SoRcvbuf != pred {
			t.Errorf("run %d: predicted %d, earlier runs %d: not one burst shape", r.Index, c.Chain.SoRcvbuf, pred)
		}
		pred = c.Chain.SoRcvbuf
		if c.Window < c.Chain.Window {
			t.Errorf("run %d: receiver window %d below the guide's %d", r.Index, c.Window, c.Chain.Window)
		}
		if c.Asked < c.RmemMax {
			t.Errorf("run %d: SO_RCVBUF asked %d below net.core.rmem_max %d: the clamp would not decide", r.Index, c.Asked, c.RmemMax)
		}
		eff := bufferchain.Effective(c.Asked, c.RmemMax)
		if prev != 0 && eff != 2*prev {
			t.Errorf("run %d: SO_RCVBUF in effect %d after %d, want doubling steps", r.Index, eff, prev)
		}
		prev = eff
		effective = append(effective, eff)
	}
	if len(effective) < 2 || effective[0] > pred/8 || effective[len(effective)-1] < 4*pred {
		t.Errorf("SO_RCVBUF in effect %v does not span pred/8 to pred x 4 around the prediction %d", effective, pred)
	}
	var out bytes.Buffer
	pl.Print(&out)
	short, lines := 0, 0
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "SO_RCVBUF >= ") && strings.Contains(l, " in effect ") {
			lines++
			if strings.Contains(strings.SplitN(l, "; window", 2)[0], "SHORT") {
				short++
			}
		}
	}
	want := 0
	for _, e := range effective {
		if e < pred {
			want++
		}
	}
	if lines != len(effective) || short != want || want == 0 || want == len(effective) {
		t.Errorf("plan's buffers lines: %d, %d SHORT, want %d with %d SHORT (some below the prediction, some not):\n%s", lines, short, len(effective), want, out.String())
	}
}

// openPlan opens the example playbook name and plans it.
func openPlan(t *testing.T, name string) *playbooks.Plan {
	t.Helper()
	pb, err := playbooks.Open(name, testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pb.Plan()
	if err != nil {
		t.Fatal(err)
	}
	return plan
}
