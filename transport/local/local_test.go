package local

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/transport"
)

func testNode(t *testing.T) inventory.Node {
	return inventory.Node{Name: "node-1", Role: inventory.RoleServer, Address: "127.0.0.1", Dir: t.TempDir()}
}

func TestExecRunsInNodeDirAndCaptures(t *testing.T) {
	tr, n := New(), testNode(t)
	res, err := tr.Exec(context.Background(), n, transport.Cmd{
		Args:  []string{"sh", "-c", `pwd; echo "$RIG_X"; cat; echo oops >&2`},
		Env:   []string{"RIG_X=hello"},
		Stdin: strings.NewReader("from stdin\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := n.Dir + "\nhello\nfrom stdin\n"
	if string(res.Stdout) != want || string(res.Stderr) != "oops\n" || res.ExitCode != 0 {
		t.Fatalf("stdout %q stderr %q exit %d; want stdout %q", res.Stdout, res.Stderr, res.ExitCode, want)
	}

	// cmd.Dir is relative to the node's folder.
	os.Mkdir(filepath.Join(n.Dir, "sub"), 0o755)
	res, err = tr.Exec(context.Background(), n, transport.Cmd{Args: []string{"pwd"}, Dir: "sub"})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != filepath.Join(n.Dir, "sub") {
		t.Fatalf("pwd in sub = %q, %v", res.Stdout, err)
	}
}

func TestExecStreams(t *testing.T) {
	tr, n := New(), testNode(t)
	var out, errw bytes.Buffer
	res, err := tr.Exec(context.Background(), n, transport.Cmd{
		Args: []string{"sh", "-c", "echo out; echo err >&2"}, Stdout: &out, Stderr: &errw,
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "out\n" || errw.String() != "err\n" || res.Stdout != nil || res.Stderr != nil {
		t.Fatalf("streamed out %q err %q; result %+v", out.String(), errw.String(), res)
	}
}

func TestExecNonZeroExit(t *testing.T) {
	tr, n := New(), testNode(t)
	res, err := tr.Exec(context.Background(), n, transport.Cmd{Args: []string{"sh", "-c", "echo bad input >&2; exit 3"}})
	var ee *transport.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("err = %v, want *transport.ExitError", err)
	}
	if ee.ExitCode != 3 || res.ExitCode != 3 || ee.Node != "node-1" || ee.Stderr != "bad input\n" || ee.Args[0] != "sh" {
		t.Fatalf("exit error %+v, result %+v", ee, res)
	}
	if errors.Is(err, transport.ErrUnreachable) {
		t.Fatal("a command that ran and failed is not unreachable")
	}

	// When stderr is streamed elsewhere, the error still carries its tail.
	var errw bytes.Buffer
	_, err = tr.Exec(context.Background(), n, transport.Cmd{
		Args: []string{"sh", "-c", "head -c 10000 /dev/zero | tr '\\0' a >&2; echo END >&2; exit 1"}, Stderr: &errw,
	})
	if !errors.As(err, &ee) || len(ee.Stderr) != stderrTail || !strings.HasSuffix(ee.Stderr, "aEND\n") || errw.Len() != 10004 {
		t.Fatalf("tail %d bytes %q..., streamed %d", len(ee.Stderr), ee.Stderr[len(ee.Stderr)-8:], errw.Len())
	}

	_, err = tr.Exec(context.Background(), n, transport.Cmd{Args: []string{"no-such-command-rig"}})
	if err == nil || errors.As(err, &ee) || !strings.Contains(err.Error(), "node-1") {
		t.Fatalf("missing command: %v", err)
	}
	_, err = tr.Exec(context.Background(), n, transport.Cmd{})
	if err == nil {
		t.Fatal("empty command accepted")
	}
}

func TestExecCancelKillsTheProcessGroup(t *testing.T) {
	tr, n := New(), testNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	// The shell starts a grandchild that would hold stdout open for 30 s.
	_, err := tr.Exec(ctx, n, transport.Cmd{Args: []string{"sh", "-c", "sleep 30 & echo $! > child.pid; wait"}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	b, err := os.ReadFile(filepath.Join(n.Dir, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil && !zombie(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("grandchild %d survived the cancel", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] == 'Z'
}

func TestUploadDownload(t *testing.T) {
	tr, n := New(), testNode(t)
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "rig")
	os.WriteFile(src, []byte("binary bytes"), 0o644)

	// Relative: under the node's folder, parents created, mode applied.
	if err := tr.Upload(ctx, n, src, "bin/rig", 0o755); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(n.Dir, "bin", "rig"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("uploaded file: %v %v", err, fi)
	}
	// Absolute paths are taken as they are; an upload replaces the file in place.
	abs := filepath.Join(t.TempDir(), "x", "conf")
	if err := tr.Upload(ctx, n, src, abs, 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(src, []byte("v2"), 0o644)
	if err := tr.Upload(ctx, n, src, abs, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(abs); string(b) != "v2" {
		t.Fatalf("replaced upload holds %q", b)
	}
	if ents, _ := os.ReadDir(filepath.Dir(abs)); len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}

	dst := filepath.Join(t.TempDir(), "out", "rig")
	if err := tr.Download(ctx, n, "bin/rig", dst); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "binary bytes" {
		t.Fatalf("downloaded %q", b)
	}
	err = tr.Download(ctx, n, "bin/missing", dst)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "node-1:bin/missing") {
		t.Fatalf("missing remote: %v", err)
	}
	if err := tr.Upload(ctx, n, filepath.Join(n.Dir, "bin"), "dir-copy", 0o644); err == nil {
		t.Fatal("uploading a folder should fail")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := tr.Upload(cctx, n, src, "late", 0o644); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled upload: %v", err)
	}
	if _, err := os.Stat(filepath.Join(n.Dir, "late")); !os.IsNotExist(err) {
		t.Fatal("cancelled upload left a file")
	}
	remote := inventory.Node{Name: "aws-0"}
	if err := tr.Upload(ctx, remote, src, "rel", 0o644); err == nil || !strings.Contains(err.Error(), "no dir") {
		t.Fatalf("relative path on a node without dir: %v", err)
	}
}

func TestDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.WriteString(c, "hi")
			c.Close()
		}
	}()
	tr, n := New(), testNode(t)
	conn, err := tr.Dial(context.Background(), n, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(conn)
	conn.Close()
	if string(b) != "hi" {
		t.Fatalf("read %q", b)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = tr.Dial(context.Background(), n, addr)
	if !errors.Is(err, transport.ErrUnreachable) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial closed port: %v", err)
	}
}
