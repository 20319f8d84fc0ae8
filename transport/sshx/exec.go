package sshx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/transport"
	"golang.org/x/crypto/ssh"
)

// stderrTail is how much of stderr an ExitError keeps when the caller streams stderr elsewhere.
const stderrTail = 4 << 10

// Exec runs cmd on the node through the login shell and waits for it. Opening the session is
// retried (nothing has run yet); the command itself runs at most once.
func (t *Transport) Exec(ctx context.Context, node inventory.Node, cmd transport.Cmd) (transport.Result, error) {
	if len(cmd.Args) == 0 {
		return transport.Result{}, errors.New("exec: empty command")
	}
	line := t.CommandLine(node, cmd)
	var sess *ssh.Session
	var nc *nodeConn
	var client *ssh.Client
	err := t.retry(ctx, node, "exec", func() error {
		var err error
		nc, client, err = t.conn(ctx, node)
		if err != nil {
			return err
		}
		sess, err = client.NewSession()
		if err != nil {
			nc.drop(client)
			return unreachable("open ssh session", node, err)
		}
		return nil
	})
	if err != nil {
		return transport.Result{}, err
	}
	defer sess.Close()

	var outBuf, errBuf bytes.Buffer
	tail := &tailWriter{max: stderrTail}
	sess.Stdin = cmd.Stdin
	sess.Stdout = &outBuf
	if cmd.Stdout != nil {
		sess.Stdout = cmd.Stdout
	}
	sess.Stderr = &errBuf
	if cmd.Stderr != nil {
		sess.Stderr = io.MultiWriter(cmd.Stderr, tail)
	}
	if err := sess.Start(line); err != nil {
		nc.drop(client)
		return transport.Result{}, unreachable("start "+quoteArgs(cmd.Args), node, err)
	}
	waited := make(chan error, 1)
	go func() { waited <- sess.Wait() }()
	select {
	case err = <-waited:
	case <-ctx.Done():
		// Best effort: OpenSSH delivers signals to sessions of non-root users only (a root
		// session has no privilege-separated child to do it), so the remote command may outlive
		// the cancelled call until it next writes to the closed channel or exits.
		sess.Signal(ssh.SIGKILL)
		sess.Close()
		select {
		case <-waited:
		case <-time.After(time.Second):
		}
		return transport.Result{}, fmt.Errorf("exec %s on %s: %w", quoteArgs(cmd.Args), node.Name, ctx.Err())
	}
	res := transport.Result{}
	if cmd.Stdout == nil {
		res.Stdout = outBuf.Bytes()
	}
	if cmd.Stderr == nil {
		res.Stderr = errBuf.Bytes()
	}
	var exitErr *ssh.ExitError
	var missing *ssh.ExitMissingError
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitStatus()
		stderr := errBuf.String()
		if cmd.Stderr != nil {
			stderr = tail.String()
		}
		return res, &transport.ExitError{Node: node.Name, Args: cmd.Args, ExitCode: res.ExitCode, Signal: exitErr.Signal(), Stderr: strings.TrimSpace(stderr)}
	case errors.As(err, &missing):
		nc.drop(client)
		return res, unreachable("exec "+quoteArgs(cmd.Args), node, errors.New("session ended without an exit status (connection lost?)"))
	default:
		nc.drop(client)
		return res, unreachable("exec "+quoteArgs(cmd.Args), node, err)
	}
}

// CommandLine is the shell line Exec sends for cmd: `cd DIR && sudo -n -- env K=V ARGS…`, every
// word quoted. sudo is left out when the login user is root already.
func (t *Transport) CommandLine(node inventory.Node, cmd transport.Cmd) string {
	var b strings.Builder
	if cmd.Dir != "" {
		b.WriteString("cd " + Quote(cmd.Dir) + " && ")
	}
	var words []string
	if cmd.Sudo && t.user(node) != "root" {
		words = append(words, "sudo", "-n", "--")
	}
	if len(cmd.Env) > 0 {
		// sshd drops most variables a client sets, so pass them on the command line.
		words = append(words, "env")
		words = append(words, cmd.Env...)
	}
	words = append(words, cmd.Args...)
	b.WriteString(quoteArgs(words))
	return b.String()
}

func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = Quote(a)
	}
	return strings.Join(q, " ")
}

// Quote makes s one word for a POSIX shell.
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	max int
	buf []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	if len(w.buf) > w.max {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-w.max:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string { return string(w.buf) }
