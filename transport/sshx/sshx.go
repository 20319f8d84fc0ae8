// Package sshx is the SSH Transport (docs/architecture.md, "Transport"): golang.org/x/crypto/ssh
// with host keys from the inventory or known_hosts (never ignored), one connection per node kept
// alive, pkg/sftp for files and direct-tcpip for Dial.
//
// Errors of the transport itself wrap transport.ErrUnreachable (a wrong host key also
// transport.ErrHostKey); a command that ran and failed is a *transport.ExitError. Only idempotent
// work is retried: connecting, Upload (written to a temporary name, then renamed), Download and
// Dial. Exec is never re-run once its session has started.
package sshx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"github.com/rig-dev/rig/internal/untrusted"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/transport"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// ErrAuth classifies a server that refused every key we offered. It matches
// transport.ErrUnreachable.
var ErrAuth = fmt.Errorf("%w: ssh authentication failed", transport.ErrUnreachable)

// Options configure a Transport.
type Options struct {
	// Signers and KeyFiles are the client keys offered to servers (unencrypted private keys in
	// OpenSSH or PEM format). UseAgent adds the keys of the ssh-agent at $SSH_AUTH_SOCK.
	Signers  []ssh.Signer
	KeyFiles []string
	UseAgent bool
	// KnownHosts files verify nodes whose inventory entry has no ssh.host_key.
	KnownHosts []string
	// User logs in when the node's ssh.user is empty (default: the local user).
	User string
	// ConnectTimeout bounds dial plus handshake (default 15 s).
	ConnectTimeout time.Duration
	// KeepAlive is the interval of keepalive@openssh.com requests; a connection that leaves one
	// unanswered for another interval is closed and re-dialled on next use (default 15 s).
	KeepAlive time.Duration
	// Attempts is how often idempotent operations are tried (default 3).
	Attempts int
	Logger   *slog.Logger
}

// Transport reaches nodes over SSH. It is safe for concurrent use.
type Transport struct {
	opts       Options
	log        *slog.Logger
	auth       []ssh.AuthMethod
	knownHosts ssh.HostKeyCallback
	agentConn  net.Conn

	mu     sync.Mutex
	conns  map[string]*nodeConn
	closed bool
}

var _ transport.Transport = (*Transport)(nil)

// New checks the options, loads keys and known_hosts files.
func New(opts Options) (*Transport, error) {
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 15 * time.Second
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = 15 * time.Second
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 3
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.User == "" {
		if u, err := user.Current(); err == nil {
			opts.User = u.Username
		}
	}
	t := &Transport{opts: opts, log: opts.Logger, conns: map[string]*nodeConn{}}
	signers := append([]ssh.Signer(nil), opts.Signers...)
	for _, f := range opts.KeyFiles {
		s, err := LoadKey(f)
		if err != nil {
			return nil, err
		}
		signers = append(signers, s)
	}
	if len(signers) > 0 {
		t.auth = append(t.auth, ssh.PublicKeys(signers...))
	}
	if opts.UseAgent {
		if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" {
			c, err := net.Dial("unix", sock)
			if err != nil {
				return nil, fmt.Errorf("ssh-agent at SSH_AUTH_SOCK=%s: %w", sock, err)
			}
			t.agentConn = c
			t.auth = append(t.auth, ssh.PublicKeysCallback(agent.NewClient(c).Signers))
		}
	}
	if len(t.auth) == 0 {
		return nil, errors.New("ssh: no client key: give a key file (e.g. ~/.ssh/id_ed25519) or run an ssh-agent")
	}
	if len(opts.KnownHosts) > 0 {
		// knownhosts opens the files by name: each is first checked to be a regular file of at
		// most 1 MiB (a FIFO would hang it, /dev/zero grow it without bound).
		for _, f := range opts.KnownHosts {
			if _, err := untrusted.ReadFile(f, "known_hosts file"); err != nil {
				return nil, err
			}
		}
		kh, err := knownhosts.New(opts.KnownHosts...)
		if err != nil {
			return nil, fmt.Errorf("read known_hosts: %w", err)
		}
		t.knownHosts = kh
	}
	return t, nil
}

// LoadKey reads an unencrypted private key file: a regular file of at most 1 MiB
// (internal/untrusted), so a key path that is a device or a FIFO is refused, not read for ever.
func LoadKey(path string) (ssh.Signer, error) {
	b, err := untrusted.ReadFile(path, "ssh key")
	if err != nil {
		return nil, err
	}
	s, err := ssh.ParsePrivateKey(b)
	var pp *ssh.PassphraseMissingError
	if errors.As(err, &pp) {
		return nil, fmt.Errorf("ssh key %s is passphrase-protected: load it into ssh-agent instead", path)
	}
	if err != nil {
		return nil, fmt.Errorf("parse ssh key %s: %w", path, err)
	}
	return s, nil
}

// Close closes every connection.
func (t *Transport) Close() error {
	t.mu.Lock()
	conns := t.conns
	t.conns = map[string]*nodeConn{}
	t.closed = true
	t.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	if t.agentConn != nil {
		t.agentConn.Close()
	}
	return nil
}

// nodeConn is the one connection to a node; mu serialises (re)connecting.
type nodeConn struct {
	mu     sync.Mutex
	client *ssh.Client
	done   chan struct{} // closed when client is gone
	sftp   *sftp.Client
}

func (c *nodeConn) alive() bool {
	if c.client == nil {
		return false
	}
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

func (c *nodeConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked()
}

func (c *nodeConn) dropLocked() {
	if c.sftp != nil {
		c.sftp.Close()
		c.sftp = nil
	}
	if c.client != nil {
		c.client.Close()
		c.client = nil
	}
}

// drop forgets client if it is still the current one (it broke under us).
func (c *nodeConn) drop(client *ssh.Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == client {
		c.dropLocked()
	}
}

func address(node inventory.Node) string {
	port := 22
	if node.SSH != nil && node.SSH.Port != 0 {
		port = node.SSH.Port
	}
	return net.JoinHostPort(node.Address, strconv.Itoa(port))
}

func (t *Transport) user(node inventory.Node) string {
	if node.SSH != nil && node.SSH.User != "" {
		return node.SSH.User
	}
	return t.opts.User
}

func connKey(node inventory.Node) string {
	hk := ""
	if node.SSH != nil {
		hk = node.SSH.HostKey
	}
	return node.Name + "\x00" + address(node) + "\x00" + hk
}

// unreachable wraps a transport failure with what was being done.
func unreachable(what string, node inventory.Node, err error) error {
	if errors.Is(err, transport.ErrUnreachable) {
		return fmt.Errorf("%s on %s: %w", what, node.Name, err)
	}
	return fmt.Errorf("%s on %s (%s): %w: %w", what, node.Name, address(node), transport.ErrUnreachable, err)
}

// permanent reports errors that retrying cannot fix.
func permanent(err error) bool {
	return errors.Is(err, transport.ErrHostKey) || errors.Is(err, ErrAuth) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// retry runs an idempotent operation up to Attempts times while it fails with a transport
// error that a new connection may cure.
func (t *Transport) retry(ctx context.Context, node inventory.Node, what string, op func() error) error {
	var err error
	for attempt := 1; ; attempt++ {
		err = op()
		if err == nil || !errors.Is(err, transport.ErrUnreachable) || permanent(err) || attempt >= t.opts.Attempts {
			return err
		}
		wait := time.Duration(attempt) * 500 * time.Millisecond
		t.log.Debug("ssh retry", "node", node.Name, "op", what, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// conn returns the node's live connection, dialling (with retries) when there is none.
func (t *Transport) conn(ctx context.Context, node inventory.Node) (*nodeConn, *ssh.Client, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, nil, unreachable("ssh", node, errors.New("transport closed"))
	}
	key := connKey(node)
	nc := t.conns[key]
	if nc == nil {
		nc = &nodeConn{}
		t.conns[key] = nc
	}
	t.mu.Unlock()

	nc.mu.Lock()
	defer nc.mu.Unlock()
	if nc.alive() {
		return nc, nc.client, nil
	}
	nc.dropLocked()
	var client *ssh.Client
	err := t.retry(ctx, node, "connect", func() error {
		var err error
		client, err = t.dial(ctx, node)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	nc.client = client
	nc.done = make(chan struct{})
	go func(done chan struct{}) { client.Wait(); close(done) }(nc.done)
	go t.keepAlive(node, client, nc.done)
	return nc, client, nil
}

// dial opens and authenticates one connection within ConnectTimeout.
func (t *Transport) dial(ctx context.Context, node inventory.Node) (*ssh.Client, error) {
	addr := address(node)
	check, err := t.checkFor(node, addr)
	if err != nil {
		if errors.Is(err, transport.ErrHostKey) {
			return nil, unreachable("ssh connect", node, err)
		}
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, t.opts.ConnectTimeout)
	defer cancel()
	d := net.Dialer{KeepAlive: t.opts.KeepAlive}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, unreachable("ssh connect", node, err)
	}
	deadline, _ := ctx.Deadline()
	raw.SetDeadline(deadline)
	// Close the socket if ctx ends mid-handshake; the handshake has no context of its own.
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	cfg := &ssh.ClientConfig{
		User:              t.user(node),
		Auth:              t.auth,
		HostKeyCallback:   check.callback,
		HostKeyAlgorithms: check.algorithms,
		Timeout:           t.opts.ConnectTimeout,
	}
	c, chans, reqs, err := ssh.NewClientConn(raw, addr, cfg)
	if err != nil {
		raw.Close()
		var hk *HostKeyError
		switch {
		case errors.As(err, &hk):
			return nil, unreachable("ssh connect", node, hk)
		case hostKeyFromHandshake(err, node.Name, addr, check.algorithms) != nil:
			return nil, unreachable("ssh connect", node, hostKeyFromHandshake(err, node.Name, addr, check.algorithms))
		case strings.Contains(err.Error(), "unable to authenticate"):
			return nil, fmt.Errorf("ssh connect on %s (%s) as %s: %w: %v", node.Name, addr, cfg.User, ErrAuth, err)
		case ctx.Err() != nil:
			return nil, unreachable("ssh connect", node, fmt.Errorf("%w (after %s)", ctx.Err(), t.opts.ConnectTimeout))
		}
		return nil, unreachable("ssh connect", node, err)
	}
	if !stop() {
		c.Close()
		return nil, unreachable("ssh connect", node, ctx.Err())
	}
	raw.SetDeadline(time.Time{})
	t.log.Debug("ssh connected", "node", node.Name, "addr", addr, "user", cfg.User)
	return ssh.NewClient(c, chans, reqs), nil
}

// keepAlive closes the connection when the server stops answering, so the next operation
// re-dials instead of hanging on a dead TCP stream.
func (t *Transport) keepAlive(node inventory.Node, c *ssh.Client, done <-chan struct{}) {
	tick := time.NewTicker(t.opts.KeepAlive)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		reply := make(chan error, 1)
		go func() {
			_, _, err := c.SendRequest("keepalive@openssh.com", true, nil)
			reply <- err
		}()
		select {
		case <-done:
			return
		case err := <-reply:
			if err != nil {
				t.log.Warn("ssh keepalive failed; closing connection", "node", node.Name, "err", err)
				c.Close()
				return
			}
		case <-time.After(t.opts.KeepAlive):
			t.log.Warn("ssh keepalive unanswered; closing connection", "node", node.Name, "after", t.opts.KeepAlive)
			c.Close()
			return
		}
	}
}

// Dial opens a connection to addr as seen from the node: direct-tcpip for host:port, OpenSSH's
// direct-streamlocal for a Unix socket path (sshd connects to it as the login user). The connection
// lives on the node's shared SSH connection. A port with no listener is not a transport
// failure: the error then does not match transport.ErrUnreachable.
func (t *Transport) Dial(ctx context.Context, node inventory.Node, addr string) (net.Conn, error) {
	var conn net.Conn
	err := t.retry(ctx, node, "dial", func() error {
		nc, client, err := t.conn(ctx, node)
		if err != nil {
			return err
		}
		conn, err = client.DialContext(ctx, transport.Network(addr), addr)
		if err == nil {
			return nil
		}
		var oce *ssh.OpenChannelError
		if errors.As(err, &oce) || ctx.Err() != nil {
			return fmt.Errorf("dial %s on %s through ssh: %w", addr, node.Name, err)
		}
		nc.drop(client)
		return unreachable("dial "+addr, node, err)
	})
	return conn, err
}
