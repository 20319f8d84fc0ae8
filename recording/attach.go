package recording

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// attachTimeout bounds how long a JVM may take to open its attach socket after it is asked to
// (its signal handler starts a listener thread): the JDK's own client waits up to 10 s.
const attachTimeout = 10 * time.Second

// jvmCommand runs a diagnostic command in JVM pid, as `jcmd PID CMD ARGS...` would, through
// HotSpot's attach socket itself: jcmd is a JVM of its own, about a second of CPU to start on a
// loaded 2-CPU machine, paid per node at every window's start and end while the engines serve
// (docs/engines.md). It returns the command's output; an error where the JVM could not be
// reached or answered with a non-zero code.
//
// The protocol is HotSpot's (the JDK's sun.tools.attach.VirtualMachineImpl on Linux): the JVM
// listens on <its tmp>/.java_pid<pid> once asked by a file .attach_pid<pid> in its working
// folder and a SIGQUIT; a request is "1\0jcmd\0<command line>\0\0\0", the answer a decimal code
// on its first line, then the command's output. The JVM accepts only its own user or root.
func jvmCommand(ctx context.Context, pid int, args ...string) (string, error) {
	if len(args) == 0 {
		return "", errors.New("a JVM diagnostic command: none given")
	}
	nspid := nsPID(pid)
	root := fmt.Sprintf("/proc/%d/root", pid)
	sock := filepath.Join(root, "tmp", ".java_pid"+strconv.Itoa(nspid))
	if err := askToListen(ctx, pid, nspid, sock); err != nil {
		return "", err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return "", fmt.Errorf("JVM %d's attach socket: %w", pid, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	req := "1\x00jcmd\x00" + strings.Join(args, " ") + "\x00\x00\x00"
	if _, err := io.WriteString(c, req); err != nil {
		return "", fmt.Errorf("JVM %d %s: sending: %w", pid, args[0], err)
	}
	resp, err := io.ReadAll(c)
	if err != nil {
		return "", fmt.Errorf("JVM %d %s: reading the answer: %w", pid, args[0], err)
	}
	codeLine, out, _ := strings.Cut(string(resp), "\n")
	code, err := strconv.Atoi(strings.TrimSpace(codeLine))
	if err != nil || code != 0 {
		return out, fmt.Errorf("JVM %d %s: answered %q: %s", pid, args[0], codeLine, strings.TrimSpace(out))
	}
	return out, nil
}

// askToListen makes JVM pid open its attach socket, unless it has already: the attach file,
// then SIGQUIT (without the file a SIGQUIT only prints a thread dump), then a wait for the socket.
func askToListen(ctx context.Context, pid, nspid int, sock string) error {
	if isSocket(sock) {
		return nil
	}
	name := ".attach_pid" + strconv.Itoa(nspid)
	file := filepath.Join(fmt.Sprintf("/proc/%d/cwd", pid), name)
	f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		file = filepath.Join(fmt.Sprintf("/proc/%d/root/tmp", pid), name)
		if f, err = os.OpenFile(file, os.O_CREATE|os.O_WRONLY, 0o600); err != nil {
			return fmt.Errorf("JVM %d: the attach file: %w", pid, err)
		}
	}
	f.Close()
	defer os.Remove(file)
	if err := syscall.Kill(pid, syscall.SIGQUIT); err != nil {
		return fmt.Errorf("JVM %d: asking it to listen for attach: %w", pid, err)
	}
	deadline := time.Now().Add(attachTimeout)
	for wait := time.Millisecond; !isSocket(sock); wait = min(2*wait, 100*time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("JVM %d did not open its attach socket %s within %v", pid, sock, attachTimeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("JVM %d: waiting for its attach socket: %w", pid, ctx.Err())
		case <-time.After(wait):
		}
	}
	return nil
}

func isSocket(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode()&os.ModeSocket != 0
}

// nsPID is pid as the JVM's own PID namespace numbers it (the last of NSpid in its status): the
// name of its attach socket and file; pid itself where the kernel does not say.
func nsPID(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return pid
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "NSpid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				if n, err := strconv.Atoi(f[len(f)-1]); err == nil {
					return n
				}
			}
		}
	}
	return pid
}
