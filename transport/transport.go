// Package transport reaches a node: run a command, move files, open a connection to a port on the
// node's loopback (docs/architecture.md, "Transport"). The local implementation runs on this
// machine; the SSH one (transport/sshx) reaches remote hosts with verified host keys.
package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/rig-dev/rig/inventory"
)

// ErrUnreachable classifies failures of the transport itself (dial, handshake, host key,
// broken session) as opposed to a command that ran and failed. Callers test with errors.Is.
var ErrUnreachable = errors.New("node unreachable")

// ErrHostKey classifies a host key that does not match the one on record. It also matches
// ErrUnreachable.
var ErrHostKey = fmt.Errorf("%w: host key mismatch", ErrUnreachable)

// Cmd is a command to run on a node.
type Cmd struct {
	Args   []string  // argv; Args[0] is looked up on the node's PATH
	Dir    string    // working directory on the node; "" is the node's home (local: node dir)
	Env    []string  // extra KEY=VALUE pairs
	Stdin  io.Reader // optional
	Stdout io.Writer // optional: streamed output; also captured in Result when nil
	Stderr io.Writer
	Sudo   bool // run through `sudo -n` (remote); ignored locally when already root
}

// Result is what a finished command left.
type Result struct {
	Stdout, Stderr []byte // captured when the Cmd had no writer of its own
	ExitCode       int
}

// ExitError is a command that ran and exited non-zero.
type ExitError struct {
	Node     string
	Args     []string
	ExitCode int
	Signal   string // e.g. "KILL" when a signal ended it (ExitCode is then -1)
	Stderr   string
}

func (e *ExitError) Error() string {
	if e.Signal != "" {
		return fmt.Sprintf("%s: %q killed by SIG%s: %s", e.Node, e.Args, e.Signal, e.Stderr)
	}
	return fmt.Sprintf("%s: %q exited %d: %s", e.Node, e.Args, e.ExitCode, e.Stderr)
}

// Transport is the seam between the controller and nodes.
type Transport interface {
	// Exec runs a command and waits for it. A non-zero exit is an *ExitError.
	Exec(ctx context.Context, node inventory.Node, cmd Cmd) (Result, error)
	// Upload copies a local file to a path on the node, creating parent folders, with mode.
	Upload(ctx context.Context, node inventory.Node, local, remote string, mode uint32) error
	// Download copies a file on the node to a local path.
	Download(ctx context.Context, node inventory.Node, remote, local string) error
	// Dial opens a connection to addr as seen from the node: a Unix socket when addr is an
	// absolute path (see Network), else TCP to host:port (e.g. "127.0.0.1:7002").
	Dial(ctx context.Context, node inventory.Node, addr string) (net.Conn, error)
	// Close releases connections.
	Close() error
}

// Network is the network Dial uses for addr: "unix" for an absolute path (a control socket in a
// 0700 folder, docs/security.md), else "tcp".
func Network(addr string) string {
	if strings.HasPrefix(addr, "/") {
		return "unix"
	}
	return "tcp"
}
