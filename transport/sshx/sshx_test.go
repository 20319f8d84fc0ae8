package sshx

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
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

	"github.com/rig-dev/rig/internal/sshdtest"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/transport"
	"golang.org/x/crypto/ssh"
)

func newTransport(t *testing.T, srv *sshdtest.Server, mod func(*Options)) *Transport {
	t.Helper()
	opts := Options{KeyFiles: []string{srv.ClientKeyFile}, ConnectTimeout: 5 * time.Second}
	if mod != nil {
		mod(&opts)
	}
	tr, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestExec(t *testing.T) {
	srv := sshdtest.Start(t)
	tr := newTransport(t, srv, nil)
	node := srv.Node("n0")
	ctx := ctxT(t)

	// Words with spaces, quotes and shell syntax arrive as they were sent.
	args := []string{"a b", "it's", "$HOME", "`x`", "; rm -rf /", ""}
	res, err := tr.Exec(ctx, node, transport.Cmd{Args: append([]string{"printf", "[%s]\\n"}, args...)})
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for _, a := range args {
		want += "[" + a + "]\n"
	}
	if string(res.Stdout) != want {
		t.Fatalf("stdout %q, want %q", res.Stdout, want)
	}

	dir := t.TempDir()
	res, err = tr.Exec(ctx, node, transport.Cmd{Args: []string{"sh", "-c", `pwd; echo "$RIG_X"; cat`}, Dir: dir,
		Env: []string{"RIG_X=x y"}, Stdin: strings.NewReader("from stdin")})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(res.Stdout), dir+"\nx y\nfrom stdin"; got != want {
		t.Fatalf("stdout %q, want %q", got, want)
	}

	// A command that fails is an ExitError, not a transport failure.
	_, err = tr.Exec(ctx, node, transport.Cmd{Args: []string{"sh", "-c", "echo oops >&2; exit 7"}})
	var ee *transport.ExitError
	if !errors.As(err, &ee) || ee.ExitCode != 7 || ee.Stderr != "oops" || ee.Node != "n0" {
		t.Fatalf("want ExitError 7 with stderr oops, got %#v", err)
	}
	if errors.Is(err, transport.ErrUnreachable) {
		t.Fatalf("a failing command must not look like an unreachable node: %v", err)
	}

	// Streaming: output arrives at the caller's writers; stderr still lands in the ExitError.
	var out, errw bytes.Buffer
	res, err = tr.Exec(ctx, node, transport.Cmd{Args: []string{"sh", "-c", "seq 1 3; echo bad >&2; exit 3"}, Stdout: &out, Stderr: &errw})
	if !errors.As(err, &ee) || ee.Stderr != "bad" {
		t.Fatalf("streamed: %v", err)
	}
	if out.String() != "1\n2\n3\n" || errw.String() != "bad\n" || res.Stdout != nil || res.ExitCode != 3 {
		t.Fatalf("streamed out %q err %q res %+v", out.String(), errw.String(), res)
	}

	// Sudo as root runs without sudo (Debian has no sudo by default); as anyone else, sudo -n.
	line := tr.CommandLine(inventory.Node{SSH: &inventory.SSH{User: "ec2-user"}}, transport.Cmd{Args: []string{"sysctl", "-w", "vm.x=1"}, Sudo: true, Dir: "/a b"})
	if line != "cd '/a b' && sudo -n -- sysctl -w vm.x=1" {
		t.Fatalf("command line %q", line)
	}
}

func TestExecCancel(t *testing.T) {
	srv := sshdtest.Start(t)
	tr := newTransport(t, srv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := tr.Exec(ctx, srv.Node("n0"), transport.Cmd{Args: []string{"sleep", "30"}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want deadline exceeded, got %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("cancel took %s", d)
	}
	// The connection is still good for the next command.
	if _, err := tr.Exec(ctxT(t), srv.Node("n0"), transport.Cmd{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
}

func TestUploadDownload(t *testing.T) {
	srv := sshdtest.Start(t)
	tr := newTransport(t, srv, nil)
	node := srv.Node("n0")
	ctx := ctxT(t)
	dir := t.TempDir()

	data := bytes.Repeat([]byte("0123456789abcdef"), 300_000) // 4.8 MB: several sftp packets in flight
	local := filepath.Join(dir, "src.bin")
	if err := os.WriteFile(local, data, 0o644); err != nil {
		t.Fatal(err)
	}
	remote := filepath.Join(dir, "remote", "deep", "dst.bin")
	if err := tr.Upload(ctx, node, local, remote, 0o750); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(remote)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o750 {
		t.Fatalf("mode %v, want 0750", st.Mode().Perm())
	}
	// Overwrite in place: the new content replaces the old one whole.
	if err := os.WriteFile(local, []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tr.Upload(ctx, node, local, remote, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(remote); string(b) != "short" {
		t.Fatalf("after overwrite: %q", b)
	}
	entries, _ := os.ReadDir(filepath.Dir(remote))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}

	os.WriteFile(remote, data, 0o644)
	back := filepath.Join(dir, "back", "copy.bin")
	if err := tr.Download(ctx, node, remote, back); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(back); !bytes.Equal(b, data) {
		t.Fatalf("downloaded %d bytes, want %d equal bytes", len(b), len(data))
	}

	// A missing remote file is the node's answer, not a broken transport.
	err = tr.Download(ctx, node, filepath.Join(dir, "nope"), filepath.Join(dir, "nope.local"))
	if !errors.Is(err, os.ErrNotExist) || errors.Is(err, transport.ErrUnreachable) {
		t.Fatalf("want not-exist, not unreachable: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nope.local")); !os.IsNotExist(err) {
		t.Fatalf("failed download left a local file")
	}
}

func TestDial(t *testing.T) {
	srv := sshdtest.Start(t)
	tr := newTransport(t, srv, nil)
	node := srv.Node("n0")
	ctx := ctxT(t)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	conn, err := tr.Dial(ctx, node, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("through the tunnel")
	conn.Write(msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(conn, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo %q %v", got, err)
	}
	conn.Close()

	// Nothing listening: the node answered, so this is not ErrUnreachable.
	addr := ln.Addr().String()
	ln.Close()
	_, err = tr.Dial(ctx, node, addr)
	if err == nil || errors.Is(err, transport.ErrUnreachable) {
		t.Fatalf("dial to a closed port: want a refusal that is not ErrUnreachable, got %v", err)
	}
}

func TestWrongHostKeyRefused(t *testing.T) {
	srv := sshdtest.Start(t)
	tr := newTransport(t, srv, nil)
	node := srv.Node("n0")
	node.SSH.HostKey = sshdtest.RandomHostKey(t)
	marker := filepath.Join(t.TempDir(), "ran")

	_, err := tr.Exec(ctxT(t), node, transport.Cmd{Args: []string{"touch", marker}})
	if !errors.Is(err, transport.ErrHostKey) || !errors.Is(err, transport.ErrUnreachable) {
		t.Fatalf("want ErrHostKey, got %v", err)
	}
	var hk *HostKeyError
	if !errors.As(err, &hk) || !strings.Contains(err.Error(), "host key mismatch") {
		t.Fatalf("error should say host key mismatch: %v", err)
	}
	want, _ := ParseHostKeys(srv.HostKey)
	if !strings.Contains(err.Error(), ssh.FingerprintSHA256(want[0])) {
		t.Fatalf("error should name the presented key %s: %v", ssh.FingerprintSHA256(want[0]), err)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatal("the command ran despite the wrong host key")
	}
	// Not retried: a wrong key is not a transient failure.
	if n := strings.Count(srv.Log(), "Connection from"); n != 1 {
		t.Fatalf("%d connections for one refused exec, want 1 (no retries)", n)
	}
	if strings.Contains(srv.Log(), "Accepted publickey") {
		t.Fatal("client authenticated to a server whose key was wrong")
	}

	// A node with no key on record at all is refused too.
	node.SSH.HostKey = ""
	_, err = tr.Exec(ctxT(t), node, transport.Cmd{Args: []string{"touch", marker}})
	if !errors.Is(err, transport.ErrHostKey) || !strings.Contains(err.Error(), "no host key on record") {
		t.Fatalf("want no-key-on-record, got %v", err)
	}
}

func TestKnownHosts(t *testing.T) {
	srv := sshdtest.Start(t)
	ctx := ctxT(t)
	node := srv.Node("n0")
	node.SSH.HostKey = "" // verified through known_hosts instead

	tr := newTransport(t, srv, func(o *Options) { o.KnownHosts = []string{srv.KnownHostsFile()} })
	res, err := tr.Exec(ctx, node, transport.Cmd{Args: []string{"echo", "ok"}})
	if err != nil || string(res.Stdout) != "ok\n" {
		t.Fatalf("known_hosts: %q %v", res.Stdout, err)
	}

	bad := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(bad, []byte("["+srv.Host+"]:"+itoa(srv.Port)+" "+sshdtest.RandomHostKey(t)+"\n"), 0o600)
	tr2 := newTransport(t, srv, func(o *Options) { o.KnownHosts = []string{bad} })
	_, err = tr2.Exec(ctx, node, transport.Cmd{Args: []string{"true"}})
	if !errors.Is(err, transport.ErrHostKey) || !strings.Contains(err.Error(), "not the one in known_hosts") {
		t.Fatalf("want mismatch against known_hosts, got %v", err)
	}

	other := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(other, []byte("[127.9.9.9]:22 "+srv.HostKey+"\n"), 0o600)
	tr3 := newTransport(t, srv, func(o *Options) { o.KnownHosts = []string{other} })
	_, err = tr3.Exec(ctx, node, transport.Cmd{Args: []string{"true"}})
	if !errors.Is(err, transport.ErrHostKey) || !strings.Contains(err.Error(), "no host key on record") {
		t.Fatalf("want unknown host, got %v", err)
	}
}

// The server holds ed25519 and ECDSA keys and x/crypto prefers ed25519. With only the ECDSA key
// on record, offering every algorithm would make the server show its ed25519 key and fail a
// correct record; offering only the recorded type connects.
func TestHostKeyAlgorithmsFollowRecord(t *testing.T) {
	srv := sshdtest.StartWith(t, sshdtest.Options{ECDSAHostKey: true})
	ctx := ctxT(t)

	node := srv.Node("n0")
	node.SSH.HostKey = srv.HostKeyECDSA
	tr := newTransport(t, srv, nil)
	if _, err := tr.Exec(ctx, node, transport.Cmd{Args: []string{"true"}}); err != nil {
		t.Fatalf("pinned ECDSA key: %v", err)
	}

	node.SSH.HostKey = ""
	kh := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(kh, []byte("["+srv.Host+"]:"+itoa(srv.Port)+" "+srv.HostKeyECDSA+"\n"), 0o600)
	tr2 := newTransport(t, srv, func(o *Options) { o.KnownHosts = []string{kh} })
	if _, err := tr2.Exec(ctx, node, transport.Cmd{Args: []string{"true"}}); err != nil {
		t.Fatalf("known_hosts with only the ECDSA key: %v", err)
	}

	// A record of a type the server does not have is a host-key failure, said plainly.
	rsaOnly := sshdtest.Start(t)
	n2 := rsaOnly.Node("n1")
	n2.SSH.HostKey = srv.HostKeyECDSA // rsaOnly has just an ed25519 key
	_, err := newTransport(t, rsaOnly, nil).Exec(ctx, n2, transport.Cmd{Args: []string{"true"}})
	if !errors.Is(err, transport.ErrHostKey) || !strings.Contains(err.Error(), "no host key of a type on record") {
		t.Fatalf("want no-common-type host key error, got %v", err)
	}
}

func TestAuthFailureAndUnreachable(t *testing.T) {
	srv := sshdtest.Start(t)
	ctx := ctxT(t)
	other := sshdtest.Start(t) // its client key is not authorised on srv
	tr := newTransport(t, other, nil)
	_, err := tr.Exec(ctx, srv.Node("n0"), transport.Cmd{Args: []string{"true"}})
	if !errors.Is(err, ErrAuth) || !errors.Is(err, transport.ErrUnreachable) || errors.Is(err, transport.ErrHostKey) {
		t.Fatalf("want ErrAuth, got %v", err)
	}

	// A port where nobody listens: unreachable, and retried before giving up.
	dead := srv.Node("n0")
	ln, _ := net.Listen("tcp", srv.Host+":0")
	dead.SSH.Port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	tr2 := newTransport(t, srv, func(o *Options) { o.Attempts = 2 })
	_, err = tr2.Exec(ctx, dead, transport.Cmd{Args: []string{"true"}})
	if !errors.Is(err, transport.ErrUnreachable) || errors.Is(err, transport.ErrHostKey) {
		t.Fatalf("want unreachable, got %v", err)
	}
}

// A connection that breaks between operations is re-dialled; a keepalive notices a dead one.
func TestReconnect(t *testing.T) {
	srv := sshdtest.Start(t)
	tr := newTransport(t, srv, func(o *Options) { o.KeepAlive = 200 * time.Millisecond })
	node := srv.Node("n0")
	ctx := ctxT(t)
	if _, err := tr.Exec(ctx, node, transport.Cmd{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	tr.mu.Lock()
	nc := tr.conns[connKey(node)]
	tr.mu.Unlock()
	nc.mu.Lock()
	first := nc.client
	nc.mu.Unlock()
	first.Close() // as if the network dropped it

	res, err := tr.Exec(ctx, node, transport.Cmd{Args: []string{"echo", "again"}})
	if err != nil || string(res.Stdout) != "again\n" {
		t.Fatalf("after a broken connection: %q %v", res.Stdout, err)
	}
	nc.mu.Lock()
	second := nc.client
	nc.mu.Unlock()
	if second == first {
		t.Fatal("expected a new connection")
	}
	// Keepalives flow on an idle connection without closing it.
	time.Sleep(700 * time.Millisecond)
	if !func() bool { nc.mu.Lock(); defer nc.mu.Unlock(); return nc.alive() && nc.client == second }() {
		t.Fatal("keepalive closed a healthy connection")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// Key and known_hosts files are files a user names: a device, a symlink to one or a FIFO is
// refused at once naming the path and what it is (/dev/zero used to be read until memory ran
// out, a FIFO to block for ever), before any connection.
func TestKeyFilesGuarded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "known_hosts")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "id_ed25519")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := LoadKey(zero); err == nil || !strings.Contains(err.Error(), "ssh key "+zero+" is a character device") {
			t.Errorf("LoadKey of a link to /dev/zero: %v", err)
		}
		if _, err := New(Options{KeyFiles: []string{fifo}}); err == nil || !strings.Contains(err.Error(), "ssh key "+fifo+" is a named pipe") {
			t.Errorf("a FIFO as a key file: %v", err)
		}
		_, err := New(Options{Signers: []ssh.Signer{testSigner(t)}, KnownHosts: []string{fifo}})
		if err == nil || !strings.Contains(err.Error(), "known_hosts file "+fifo+" is a named pipe") {
			t.Errorf("a FIFO as known_hosts: %v", err)
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // a guard against hanging the suite, not a measurement
		t.Fatal("blocked on a FIFO")
	}
}

func testSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
