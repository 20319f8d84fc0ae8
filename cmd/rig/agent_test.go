package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rig-dev/rig/agent"
)

// These run the real binary (rigBin, built by TestMain) as `rig agent`.

func agentClient(node, socket string) *agent.Client {
	return agent.NewClient(node, func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	})
}

// procAlive: the pid exists and is not a zombie.
func procAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

func TestAgentDaemon(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node-7")
	sock := agent.SocketPath(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, rigBin, "agent", "--daemon", "--dir", dir, "--node", "node-7").CombinedOutput()
	if err != nil {
		t.Fatalf("rig agent --daemon: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "agent.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	defer syscall.Kill(pid, syscall.SIGKILL)
	if !strings.Contains(string(out), "agent pid "+strconv.Itoa(pid)) {
		t.Fatalf("output %q does not name pid %d", out, pid)
	}
	// It outlived the command that started it, answers as itself, and leads its own session.
	c := agentClient("node-7", sock)
	defer c.Close()
	pr, err := c.Ping(ctx)
	if err != nil || pr.PID != pid || pr.Node != "node-7" || pr.Dir != dir {
		t.Fatalf("ping = %+v, %v (pid file %d)", pr, err, pid)
	}
	if sid, err := unix.Getsid(pid); err != nil || sid != pid {
		t.Fatalf("daemon session %d (%v), want its own (%d)", sid, err, pid)
	}
	// The socket's folder is the owner's alone.
	if fi, err := os.Stat(filepath.Dir(sock)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket folder: %v %v, want mode 0700", fi.Mode(), err)
	}
	// A client for another node refuses the answer.
	if _, err := agentClient("node-8", sock).Ping(ctx); !errors.Is(err, agent.ErrStranger) {
		t.Fatalf("ping as node-8: %v, want ErrStranger", err)
	}

	// A second daemon on the same socket fails, says why, and leaves the first alone.
	out, err = exec.CommandContext(ctx, rigBin, "agent", "--daemon", "--socket", sock, "--dir", filepath.Join(t.TempDir(), "other")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another process answers") {
		t.Fatalf("second daemon on a busy socket: %v\n%s", err, out)
	}
	if pr, err := c.Ping(ctx); err != nil || pr.PID != pid {
		t.Fatalf("first agent after the second failed: %+v, %v", pr, err)
	}

	// SIGTERM stops it cleanly: pid file removed, JSON log in DIR/agent.log.
	syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for procAlive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("agent %d ignored SIGTERM", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(dir, "agent.pid")); !os.IsNotExist(err) {
		t.Fatalf("agent.pid left behind: %v", err)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "agent.log"))
	for _, s := range []string{`"msg":"agent listening"`, `"msg":"agent stopped"`, `"node":"node-7"`} {
		if !bytes.Contains(log, []byte(s)) {
			t.Errorf("agent.log lacks %s:\n%s", s, log)
		}
	}
	if n := bytes.Count(log, []byte(`"msg":"agent starting"`)); n != 1 {
		t.Errorf("agent.log has %d start lines, want 1 (no duplicate logging when detached):\n%s", n, log)
	}
}

func TestAgentForeground(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(rigBin, "agent", "--dir", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	c := agentClient("", agent.SocketPath(dir))
	defer c.Close()
	for i := 0; ; i++ {
		if _, err := c.Ping(context.Background()); err == nil {
			break
		} else if i > 500 {
			t.Fatalf("agent never answered: %v\n%s", err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agent exit after SIGTERM: %v\n%s", err, stderr.String())
	}
	log, _ := os.ReadFile(filepath.Join(dir, "agent.log"))
	if !bytes.Contains(log, []byte(`"msg":"agent listening"`)) || !bytes.Contains(stderr.Bytes(), []byte(`"msg":"agent listening"`)) {
		t.Fatalf("log to stderr and agent.log:\nstderr %s\nfile %s", stderr.String(), log)
	}
}

func TestAgentBadFlags(t *testing.T) {
	tmp := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"agent"}, "--dir is required"},
		{[]string{"agent", "--dir", filepath.Join(tmp, "a"), "--node", "../../escaped"}, "--node"},
		{[]string{"agent", "--dir", filepath.Join(tmp, "b"), "--socket", "/" + strings.Repeat("x", 200)}, "at most 107 bytes"},
	} {
		out, err := exec.Command(rigBin, tc.args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("rig %v: %v, output %q; want exit 2 mentioning %q", tc.args, err, out, tc.want)
		}
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("bad flags created %v", ents)
	}
	// A socket folder others can enter is refused, not used.
	dir := filepath.Join(tmp, "open")
	os.MkdirAll(filepath.Join(dir, "ctl"), 0o755)
	out, err := exec.Command(rigBin, "agent", "--dir", dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "lets others in") {
		t.Errorf("agent with a 0755 socket folder: %v, output %q; want a refusal", err, out)
	}
}
