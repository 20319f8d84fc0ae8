// Package sshdtest starts a real OpenSSH sshd for tests: on a spare loopback address and port,
// with a freshly generated host key and client key, logging to the test on failure.
//
// Tests that need it skip when sshd is not installed, except under CI=true, where they fail
// naming openssh-server (internal/tools.Require).
package sshdtest

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/internal/tools"
	"github.com/rig-dev/rig/inventory"
	"golang.org/x/crypto/ssh"
)

// Server is a running sshd.
type Server struct {
	Addr    string // host:port
	Host    string // a 127.x.y.z address
	Port    int
	User    string // the user the client key logs in as (the user running the test)
	HostKey string // the server's host key, authorized_keys format ("ssh-ed25519 AAAA…")
	// HostKeyECDSA is the second host key when Options.ECDSAHostKey is set.
	HostKeyECDSA string
	// ClientKeyFile holds the client's private key (OpenSSH format, mode 0600); ClientSigner is
	// the same key parsed.
	ClientKeyFile string
	ClientSigner  ssh.Signer
	Dir           string // holds the config, keys and the known_hosts file

	sshd   string // the sshd binary
	cmd    *exec.Cmd
	exited chan error
	log    *logBuffer
	once   sync.Once
}

// Options vary the server.
type Options struct {
	// ECDSAHostKey gives the server a second host key, ecdsa-sha2-nistp256 (in HostKeyECDSA),
	// besides the ed25519 one that x/crypto prefers.
	ECDSAHostKey bool
	// Host is the loopback address to listen on ("": a random one in 127.0.0.0/8), for a test
	// kept to addresses of its own.
	Host string
}

// Start runs sshd until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith runs sshd with options until the test ends.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	sshd := tools.Require(t, "sshd") // by absolute path: sshd refuses to run otherwise
	u, err := user.Current()
	if err != nil {
		t.Fatalf("sshdtest: current user: %v", err)
	}
	if os.Geteuid() == 0 {
		// Debian's sshd insists on its privilege separation directory.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatalf("sshdtest: create /run/sshd: %v", err)
		}
	}
	dir := t.TempDir()
	s := &Server{User: u.Username, Dir: dir, log: &logBuffer{}, sshd: sshd}

	hostPub, hostPEM := newKey(t, "rig-sshdtest-host")
	hostKeyFile := filepath.Join(dir, "ssh_host_ed25519_key")
	writeFile(t, hostKeyFile, hostPEM, 0o600)
	s.HostKey = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(hostPub)))

	hostKeys := []string{hostKeyFile}
	if opts.ECDSAHostKey {
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatalf("sshdtest: generate ecdsa key: %v", err)
		}
		block, err := ssh.MarshalPrivateKey(priv, "rig-sshdtest-host-ecdsa")
		if err != nil {
			t.Fatalf("sshdtest: marshal ecdsa key: %v", err)
		}
		pub, err := ssh.NewPublicKey(&priv.PublicKey)
		if err != nil {
			t.Fatalf("sshdtest: ecdsa public key: %v", err)
		}
		f := filepath.Join(dir, "ssh_host_ecdsa_key")
		writeFile(t, f, pem.EncodeToMemory(block), 0o600)
		hostKeys = append(hostKeys, f)
		s.HostKeyECDSA = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	}

	clientPub, clientPEM := newKey(t, "rig-sshdtest-client")
	s.ClientKeyFile = filepath.Join(dir, "id_ed25519")
	writeFile(t, s.ClientKeyFile, clientPEM, 0o600)
	if s.ClientSigner, err = ssh.ParsePrivateKey(clientPEM); err != nil {
		t.Fatalf("sshdtest: parse client key: %v", err)
	}
	authorized := filepath.Join(dir, "authorized_keys")
	writeFile(t, authorized, ssh.MarshalAuthorizedKey(clientPub), 0o600)

	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		host, port, err := spareAddr(opts.Host)
		if err != nil {
			lastErr = err
			continue
		}
		s.Host, s.Port, s.Addr = host, port, net.JoinHostPort(host, strconv.Itoa(port))
		cfg := filepath.Join(dir, "sshd_config")
		writeFile(t, cfg, []byte(config(s.Addr, hostKeys, authorized, dir)), 0o600)
		if lastErr = s.run(cfg); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("sshdtest: start sshd: %v\n%s", lastErr, s.log.String())
	}
	writeFile(t, s.KnownHostsFile(), []byte(fmt.Sprintf("[%s]:%d %s\n", s.Host, s.Port, s.HostKey)), 0o600)
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("sshd log (%s):\n%s", s.Addr, s.log.String())
		}
	})
	return s
}

func config(addr string, hostKeys []string, authorized, home string) string {
	var lines []string
	lines = append(lines, "ListenAddress "+addr)
	for _, k := range hostKeys {
		lines = append(lines, "HostKey "+k)
	}
	return strings.Join(append(lines,
		"AuthorizedKeysFile "+authorized,
		"PidFile none",
		"UsePAM no",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PubkeyAuthentication yes",
		"PermitRootLogin prohibit-password",
		// The key files live under /tmp, whose mode StrictModes rejects.
		"StrictModes no",
		"AllowTcpForwarding yes",
		"Subsystem sftp internal-sftp",
		"UseDNS no",
		"MaxSessions 64",
		"MaxStartups 64",
		"LogLevel VERBOSE",
		// Sessions get HOME=dir so that the login shell skips the machine's own ~/.bashrc (on
		// the dev machines root's takes seconds); the working directory stays the real home.
		"SetEnv HOME="+home,
		"",
	), "\n")
}

// run starts sshd and waits until it listens.
func (s *Server) run(cfg string) error {
	cmd := exec.Command(s.sshd, "-D", "-e", "-f", cfg)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.Stdout = s.log
	if err := cmd.Start(); err != nil {
		return err
	}
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		var once sync.Once
		for sc.Scan() {
			line := sc.Text()
			s.log.Write([]byte(line + "\n"))
			if strings.Contains(line, "Server listening on") {
				once.Do(func() { close(listening) })
			}
		}
		io.Copy(s.log, stderr)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-listening:
		s.cmd = cmd
		s.exited = exited
		return nil
	case err := <-exited:
		return fmt.Errorf("sshd exited before listening on %s: %v", s.Addr, err)
	case <-time.After(15 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		return fmt.Errorf("sshd did not listen on %s within 15s", s.Addr)
	}
}

// Stop ends sshd and every session it started (its process group). Processes that left the
// group (setsid daemons) are the test's to stop.
func (s *Server) Stop() {
	s.once.Do(func() {
		if s.cmd == nil {
			return
		}
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.exited
		}
	})
}

// Log returns what sshd logged so far.
func (s *Server) Log() string { return s.log.String() }

// KnownHostsFile is a known_hosts file listing the server's host key.
func (s *Server) KnownHostsFile() string { return filepath.Join(s.Dir, "known_hosts") }

// Node is an inventory node that reaches this server with its host key pinned.
func (s *Server) Node(name string) inventory.Node {
	return inventory.Node{Name: name, Role: inventory.RoleServer, Address: s.Host,
		SSH: &inventory.SSH{User: s.User, Port: s.Port, HostKey: s.HostKey}}
}

// RandomHostKey returns a new ed25519 public key in authorized_keys format that no server holds:
// the "wrong host key" of negative tests.
func RandomHostKey(t testing.TB) string {
	pub, _ := newKey(t, "not-this-server")
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
}

func newKey(t testing.TB, comment string) (ssh.PublicKey, []byte) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("sshdtest: generate key: %v", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		t.Fatalf("sshdtest: marshal key: %v", err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatalf("sshdtest: public key: %v", err)
	}
	return sshPub, pem.EncodeToMemory(block)
}

func writeFile(t testing.TB, path string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, b, mode); err != nil {
		t.Fatalf("sshdtest: %v", err)
	}
}

// spareAddr picks host, or else a random address in 127.0.0.0/8 (away from 127.0.0.1, where
// other services of this machine listen), and a port that is free on it right now.
func spareAddr(host string) (string, int, error) {
	if host == "" {
		n, err := rand.Int(rand.Reader, big.NewInt(1<<16))
		if err != nil {
			return "", 0, err
		}
		v := n.Int64()
		host = fmt.Sprintf("127.%d.%d.%d", 10+v%200, (v>>8)%250+1, v%250+2)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", 0, err
	}
	defer ln.Close()
	return host, ln.Addr().(*net.TCPAddr).Port, nil
}

type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
