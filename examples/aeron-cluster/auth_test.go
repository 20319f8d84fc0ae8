package aeroncluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/runner/launch"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/target/local"
)

// Ports on a node's raft host, as offsets from the raft port (dev.rig.aeron.Node).
const (
	archivePortOffset = 12
	ingressPortOffset = 13
)

// TestForeignClientRefused: during a live three-node Aeron run, a client that is not the run's
// (another local user when the test runs as root, with its own media driver and without the
// run's secret) asks every node's Archive to list, replay and truncate recordings and opens a
// cluster session to send: every request is refused by authentication (not a timeout: the
// endpoints heard it). The run's own credentials are not: the nodes elect a leader over their
// archives, the leader's gateway holds a cluster session, and the same client given the run's
// secret has every request answered. The run's secret is in no file of the run folder and in
// no /status.
func TestForeignClientRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a three-node Aeron Cluster")
	}
	build(t)
	bin := rigBinary(t)
	pb, err := playbooks.Open("engine.yaml", testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var logBuf bytes.Buffer
	cl, err := local.New(local.Options{FirstAddress: "127.0.19.91"}).Start(ctx, target.StartOptions{
		RunDir: dir, Servers: pb.Cluster.Servers, Clients: 1, Binary: bin, Logger: slog.New(slog.NewTextHandler(&logBuf, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cl.Stop(context.WithoutCancel(ctx))
		}
	}
	defer stop()
	servers := cl.Inventory().Servers()
	runSecret, err := engine.NewClusterSecret()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range servers {
		req, err := launch.StartRequest(pb, launch.EngineConfig(servers, n, filepath.Join("data", "auth")), runSecret)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Agent(n.Name).StartEngine(ctx, req); err != nil {
			t.Fatalf("start engine on %s: %v", n.Name, err)
		}
	}
	defer func() {
		if t.Failed() {
			dumpLogs(t, dir)
		}
	}()
	leader := waitGatewaySession(ctx, t, cl, servers)

	var archives, ingress []string
	for i, n := range servers {
		archives = append(archives, net.JoinHostPort(n.PrivateAddress, strconv.Itoa(launch.RaftPort+archivePortOffset)))
		ingress = append(ingress, fmt.Sprintf("%d=%s", i, net.JoinHostPort(n.PrivateAddress, strconv.Itoa(launch.RaftPort+ingressPortOffset))))
	}
	secret := engineSecret(ctx, t, cl, leader)
	if secret != runSecret {
		t.Errorf("the engine's %s is not the one its start request carried", engine.ClusterSecretEnv)
	}
	results := func(secret string) []string {
		out, who := runForeignClient(ctx, t, strings.Join(archives, ","), strings.Join(ingress, ","), leader.PrivateAddress, secret)
		t.Logf("client (%s):\n%s", who, out)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if want := 3*len(servers) + 1; len(lines) != want {
			t.Fatalf("client printed %d lines, want %d (3 archive requests per node and the ingress)", len(lines), want)
		}
		return lines
	}
	// With the run's credentials, over the UDP endpoints a peer's archive replicates through,
	// every request is heard and answered: a refusal below is about the credentials alone.
	if secret != "" {
		for _, l := range results(secret) {
			if _, res, _ := strings.Cut(l, ": "); !strings.HasPrefix(res, "ANSWERED: ") {
				t.Errorf("with the run's credentials, not answered: %s", l)
			}
		}
	}
	for _, l := range results("") {
		if _, res, _ := strings.Cut(l, ": "); !strings.HasPrefix(res, "REFUSED: ") {
			t.Errorf("not refused by authentication: %s", l)
		}
	}

	// The secret every engine holds is nowhere in what the run keeps or reports.
	if secret == "" {
		return
	}
	for _, n := range servers {
		raw, err := cl.Agent(n.Name).EngineStatusRaw(ctx, true)
		if err != nil {
			t.Fatalf("status of %s: %v", n.Name, err)
		}
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("%s's /status holds the run's secret", n.Name)
		}
	}
	stop()
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the run's secret", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitGatewaySession waits for a leader whose gateway holds a cluster session: the run's own
// credentials open the ingress (and the archive, which the consensus module records its log
// through).
func waitGatewaySession(ctx context.Context, t *testing.T, cl target.Cluster, servers []inventory.Node) inventory.Node {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range servers {
			st, err := cl.Agent(n.Name).EngineStatusHash(ctx)
			if err != nil || st.Role != "leader" {
				continue
			}
			b, err := cl.Agent(n.Name).EngineMetrics(ctx)
			var m struct {
				Connected bool `json:"gateway_connected"`
			}
			if err == nil && json.Unmarshal(b, &m) == nil && m.Connected {
				return n
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatal("no leader whose gateway holds a cluster session within 90 s")
	return inventory.Node{}
}

// runForeignClient runs testdata/ForeignClient.java (Java's source-file mode) from a folder of
// its own, with an environment of its own. Without a secret: as nobody when the test can switch
// users, else as this user. With one (the run's own credentials): as this user.
func runForeignClient(ctx context.Context, t *testing.T, archives, ingress, host, secret string) (string, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "rig-foreign-client-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"testdata/ForeignClient.java", "matching/target/lib/aeron-all-1.51.0.jar"} {
		copyFile(t, f, filepath.Join(dir, filepath.Base(f)))
	}
	java, err := exec.LookPath("java")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{java, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
		"--add-opens=java.base/sun.nio.ch=ALL-UNNAMED", "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
		"-cp", filepath.Join(dir, "aeron-all-1.51.0.jar"), filepath.Join(dir, "ForeignClient.java"), archives, ingress, host}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "LANG=C.UTF-8"}
	who := "this user (not root: cannot switch users)"
	switch {
	case secret != "":
		env = append(env, engine.ClusterSecretEnv+"="+secret)
		who = "this user, with the run's secret"
	case os.Geteuid() == 0:
		if _, err := user.Lookup("nobody"); err == nil {
			if ru, err := exec.LookPath("runuser"); err == nil {
				args = append([]string{ru, "-u", "nobody", "--"}, args...)
				who = "user nobody"
			}
		}
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t0 := time.Now()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("foreign client (%s): %v\n%s\n%s", who, err, out, stderr.String())
	}
	return string(out), fmt.Sprintf("%s, %.1f s", who, time.Since(t0).Seconds())
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// engineSecret reads the run's secret from the environment of n's engine (this user's process);
// "" (and an error) when it has none.
func engineSecret(ctx context.Context, t *testing.T, cl target.Cluster, n inventory.Node) string {
	t.Helper()
	st, err := cl.Agent(n.Name).EngineStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", st.PID))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range bytes.Split(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(engine.ClusterSecretEnv+"=")); ok && len(v) > 0 {
			return string(v)
		}
	}
	t.Errorf("the engine (pid %d) has no %s", st.PID, engine.ClusterSecretEnv)
	return ""
}
