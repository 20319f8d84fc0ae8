// Package local is the Transport of the local target (docs/architecture.md, "Transport"): every
// node is a folder on this machine (inventory.Node.Dir) with its own loopback address and agent
// port, so commands run with os/exec in that folder, files are copies, and Dial is a plain TCP
// dial.
package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rig-dev/rig/internal/atomicfile"

	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/transport"
	"golang.org/x/sys/unix"
)

// stderrTail bounds the stderr kept for an ExitError when the caller streams stderr elsewhere.
const stderrTail = 4 << 10

// Transport runs everything on this machine.
type Transport struct {
	// WaitDelay bounds how long Exec waits for output after the command exits or is cancelled
	// (a grandchild holding the pipes open). Default 5 s.
	WaitDelay time.Duration
}

var _ transport.Transport = (*Transport)(nil)

// New returns a local transport.
func New() *Transport { return &Transport{WaitDelay: 5 * time.Second} }

// path resolves a path on the node: relative paths are relative to the node's folder.
func path(node inventory.Node, p string) (string, error) {
	if filepath.IsAbs(p) {
		return p, nil
	}
	if node.Dir == "" {
		return "", fmt.Errorf("node %s: relative path %q but the node has no dir (not a local-target node?)", node.Name, p)
	}
	return filepath.Join(node.Dir, p), nil
}

// Exec runs cmd in the node's folder (or cmd.Dir, relative to it). Output goes to cmd.Stdout and
// cmd.Stderr when set, else it is captured in the Result. A non-zero exit is an
// *transport.ExitError carrying (the tail of) stderr. Cancelling ctx kills the command's whole
// process group.
func (t *Transport) Exec(ctx context.Context, node inventory.Node, cmd transport.Cmd) (transport.Result, error) {
	var res transport.Result
	if len(cmd.Args) == 0 {
		return res, fmt.Errorf("exec on %s: empty command", node.Name)
	}
	dir := cmd.Dir
	if dir == "" {
		dir = node.Dir
	} else if d, err := path(node, dir); err == nil {
		dir = d
	} else {
		return res, fmt.Errorf("exec on %s: %w", node.Name, err)
	}
	args := cmd.Args
	if cmd.Sudo && os.Geteuid() != 0 {
		args = append([]string{"sudo", "-n", "--"}, args...)
	}
	c := exec.CommandContext(ctx, args[0], args[1:]...)
	c.Dir = dir
	c.Env = append(os.Environ(), cmd.Env...)
	c.Stdin = cmd.Stdin
	// Its own process group, so cancellation reaches whatever the command started too.
	c.SysProcAttr = procAttr()
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = t.WaitDelay
	if c.WaitDelay == 0 {
		c.WaitDelay = 5 * time.Second
	}
	var stdout, stderr bytes.Buffer
	tail := &tailBuffer{max: stderrTail}
	if cmd.Stdout != nil {
		c.Stdout = cmd.Stdout
	} else {
		c.Stdout = &stdout
	}
	if cmd.Stderr != nil {
		c.Stderr = io.MultiWriter(cmd.Stderr, tail)
	} else {
		c.Stderr = &stderr
	}
	err := c.Run()
	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	if cmd.Stdout != nil {
		res.Stdout = nil
	}
	if cmd.Stderr != nil {
		res.Stderr = nil
	}
	if err == nil {
		return res, nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return res, fmt.Errorf("exec %q on %s: %w", cmd.Args, node.Name, ctxErr)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.ExitCode = ee.ExitCode() // -1 when a signal ended it
		msg := stderr.String()
		if cmd.Stderr != nil {
			msg = tail.String()
		}
		xe := &transport.ExitError{Node: node.Name, Args: cmd.Args, ExitCode: res.ExitCode, Stderr: msg}
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			xe.Signal = strings.TrimPrefix(unix.SignalName(ws.Signal()), "SIG")
		}
		return res, xe
	}
	return res, fmt.Errorf("exec %q on %s: %w", cmd.Args, node.Name, err)
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string { return string(b.buf) }

// Upload copies local to remote (relative to the node's folder unless absolute), creating parent
// folders. The copy lands under a temporary name and is renamed into place, so a binary that is
// running keeps running and readers never see half a file.
func (t *Transport) Upload(ctx context.Context, node inventory.Node, local, remote string, mode uint32) error {
	dst, err := path(node, remote)
	if err != nil {
		return fmt.Errorf("upload to %s: %w", node.Name, err)
	}
	if err := copyFile(ctx, local, dst, os.FileMode(mode)); err != nil {
		return fmt.Errorf("upload %s to %s:%s: %w", local, node.Name, remote, err)
	}
	return nil
}

// Download copies remote (relative to the node's folder unless absolute) to local.
func (t *Transport) Download(ctx context.Context, node inventory.Node, remote, local string) error {
	src, err := path(node, remote)
	if err != nil {
		return fmt.Errorf("download from %s: %w", node.Name, err)
	}
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("download %s:%s: %w", node.Name, remote, err)
	}
	if err := copyFile(ctx, src, local, fi.Mode().Perm()); err != nil {
		return fmt.Errorf("download %s:%s to %s: %w", node.Name, remote, local, err)
	}
	return nil
}

func copyFile(ctx context.Context, src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil {
		return err
	} else if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(dst, ctxReader{ctx, in}, atomicfile.Options{Perm: mode.Perm(), Durable: true})
}

// ctxReader stops a copy when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// Dial connects to addr as is: a Unix socket path (the agent's and the load generator's control
// sockets) or a TCP host:port on the node's own loopback address.
func (t *Transport) Dial(ctx context.Context, node inventory.Node, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, transport.Network(addr), addr)
	if err != nil {
		return nil, fmt.Errorf("%w: dial %s on %s: %w", transport.ErrUnreachable, addr, node.Name, err)
	}
	return conn, nil
}

// Close has nothing to release.
func (t *Transport) Close() error { return nil }
