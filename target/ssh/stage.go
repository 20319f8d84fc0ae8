// Package ssh is the target of clusters reached over SSH (a Pulumi stack's nodes, or any
// inventory file). It stages the rig binary on each node and starts `rig agent` there as a
// daemon that outlives the session which started it; staging again is a no-op when the node
// already has this binary and its agent runs it.
//
// Every node has one folder, BASE/rig-NODE (BASE defaults to the login home), so nodes that
// share a host stay apart: the binary is in bin/rig, the agent's folder is agent/.
package ssh

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/transport"
)

// Options say what to stage where.
type Options struct {
	// Binaries maps a GOARCH to a linux binary of rig for nodes of that architecture. When a
	// node's architecture has none: this executable if the controller is linux of the same
	// architecture, else a cross build from SourceDir.
	Binaries map[string]string
	// SourceDir is the rig module's folder, for cross builds (see FindSource).
	SourceDir string
	// Base is the folder on the node that holds rig-NODE ("": the login home).
	Base string
	Root string // the agent's --root (default "/")
	// SysrqTrigger is the agent's --sysrq-trigger (agent/power.go: "" refuses power cuts; only
	// nodes a run may reboot get /proc/sysrq-trigger), PowerProc its --power-proc (tests: a
	// fake /proc for the cut's boot id). In either, {node} stands for the node's name.
	SysrqTrigger, PowerProc string
	// Sudo runs the agent as root through `sudo -n` (tuning needs root; on AWS the login user
	// is not root).
	Sudo         bool
	Parallel     int           // nodes staged at once by All (default 8)
	StartTimeout time.Duration // how long a new agent has to answer ping (default 20 s)
	Logger       *slog.Logger
}

// nodeOpts is Options resolved for one node.
type nodeOpts struct {
	Options
	inventory.Node
	Dir string // the node's rig folder
}

func (o Options) withDefaults(n inventory.Node) nodeOpts {
	if o.Root == "" {
		o.Root = "/"
	}
	o.PowerProc = strings.ReplaceAll(o.PowerProc, "{node}", n.Name)
	o.SysrqTrigger = strings.ReplaceAll(o.SysrqTrigger, "{node}", n.Name)
	if o.Parallel <= 0 {
		o.Parallel = 8
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 20 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nodeOpts{Options: o, Node: n, Dir: NodeDir(o.Base, n)}
}

// NodeDir is the node's rig folder under base.
func NodeDir(base string, n inventory.Node) string { return path.Join(base, "rig-"+n.Name) }

// BinaryPath is where the binary is on the node.
func (o nodeOpts) BinaryPath() string { return path.Join(o.Dir, "bin", "rig") }

// AgentDir is the agent's --dir on the node.
func (o nodeOpts) AgentDir() string { return path.Join(o.Dir, "agent") }

// Result says what staging did on one node.
type Result = target.Staged

// Stage makes sure node runs an agent of this rig build: it uploads the binary unless the node
// has one with the same SHA-256, and (re)starts the agent unless one running that binary
// answers ping through the transport's Dial.
func Stage(ctx context.Context, tr transport.Transport, node inventory.Node, opts Options) (Result, error) {
	o := opts.withDefaults(node)
	res := Result{Node: node.Name, Binary: o.BinaryPath()}
	fail := func(step string, err error) (Result, error) {
		return res, fmt.Errorf("stage agent on %s: %s: %w", node.Name, step, err)
	}
	if err := inventory.CheckName("node name", node.Name); err != nil {
		return fail("check", err) // it becomes a folder and an argument on the node
	}
	arch, err := nodeArch(ctx, tr, node)
	if err != nil {
		return fail("find architecture", err)
	}
	res.Arch = arch
	local, err := o.binaryFor(ctx, arch)
	if err != nil {
		return fail("pick binary", err)
	}
	if res.SHA256, err = fileHash(local); err != nil {
		return fail("hash binary", err)
	}

	remoteHash, err := hashOnNode(ctx, tr, node, o.BinaryPath(), false)
	if err != nil {
		return fail("hash staged binary", err)
	}
	if remoteHash != res.SHA256 {
		o.Logger.Info("uploading rig", "node", node.Name, "arch", arch, "to", o.BinaryPath())
		if err := tr.Upload(ctx, node, local, o.BinaryPath(), 0o755); err != nil {
			return fail("upload", err)
		}
		res.Uploaded = true
	}

	sock, err := socketOnNode(ctx, tr, o)
	if err != nil {
		return fail("find the agent's folder", err)
	}
	res.Socket = sock
	c := target.AgentClient(tr, node, sock, "")
	defer c.Close()
	if pr, ok := ping(ctx, c, 3*time.Second); ok {
		running, err := hashOnNode(ctx, tr, node, fmt.Sprintf("/proc/%d/exe", pr.PID), o.Sudo)
		if err == nil && running == res.SHA256 {
			res.PID, res.Version = pr.PID, pr.Version
			o.Logger.Info("agent already running this build", "node", node.Name, "pid", pr.PID)
			return res, nil
		}
		o.Logger.Info("replacing agent", "node", node.Name, "pid", pr.PID, "reason", "different binary")
		if err := stopPID(ctx, tr, node, pr.PID, o); err != nil {
			return fail("stop old agent", err)
		}
	}

	pid, err := start(ctx, tr, node, o, sock)
	if err != nil {
		return fail("start agent", err)
	}
	pr, err := waitReady(ctx, tr, node, c, pid, res.SHA256, o, sock)
	if err != nil {
		return fail("wait for agent", err)
	}
	res.Started, res.PID, res.Version = true, pr.PID, pr.Version
	o.Logger.Info("agent started", "node", node.Name, "pid", pr.PID, "socket", sock)
	return res, nil
}

// All stages every node, at most Options.Parallel at once. Results are in node order; the error
// joins every node's failure.
func All(ctx context.Context, tr transport.Transport, nodes []inventory.Node, opts Options) ([]Result, error) {
	out := make([]Result, len(nodes))
	limit := opts.Parallel
	if limit <= 0 {
		limit = 8
	}
	err := Parallel(ctx, nodes, limit, func(ctx context.Context, i int, n inventory.Node) error {
		var err error
		out[i], err = Stage(ctx, tr, n, opts)
		return err
	})
	return out, err
}

// Stop ends the node's agent (TERM, then KILL after 10 s) and waits until it is gone. No agent
// answering is not an error.
func Stop(ctx context.Context, tr transport.Transport, node inventory.Node, opts Options) error {
	o := opts.withDefaults(node)
	sock, err := socketOnNode(ctx, tr, o)
	if err != nil {
		return fmt.Errorf("stop agent on %s: %w", node.Name, err)
	}
	c := target.AgentClient(tr, node, sock, "")
	defer c.Close()
	pr, ok := ping(ctx, c, 3*time.Second)
	if !ok {
		return nil
	}
	if err := stopPID(ctx, tr, node, pr.PID, o); err != nil {
		return fmt.Errorf("stop agent on %s: %w", node.Name, err)
	}
	return nil
}

// Socket returns the agent's control socket on the node (making the agent's folder if need be),
// for callers that reach an agent staged earlier.
func Socket(ctx context.Context, tr transport.Transport, node inventory.Node, opts Options) (string, error) {
	return socketOnNode(ctx, tr, opts.withDefaults(node))
}

// socketOnNode makes the agent's folder as the login user (sshd connects to the socket as that
// user, so the folder must be theirs) and returns the socket's absolute path: sshd resolves a
// stream-local path from its own working folder, not the login home.
func socketOnNode(ctx context.Context, tr transport.Transport, o nodeOpts) (string, error) {
	dir := o.AgentDir()
	res, err := tr.Exec(ctx, o.Node, transport.Cmd{Args: []string{"sh", "-c", "mkdir -p -- " + shellQuote(dir) + " && cd -- " + shellQuote(dir) + " && pwd -P"}})
	if err != nil {
		return "", err
	}
	abs := strings.TrimSpace(string(res.Stdout))
	if !path.IsAbs(abs) {
		return "", fmt.Errorf("pwd in %s printed %q, want an absolute path", dir, abs)
	}
	return agent.SocketPath(abs), nil
}

// Parallel runs fn for every node, at most limit at once, and joins the errors.
func Parallel(ctx context.Context, nodes []inventory.Node, limit int, fn func(ctx context.Context, i int, node inventory.Node) error) error {
	if limit <= 0 {
		limit = 1
	}
	sem := make(chan struct{}, limit)
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = fmt.Errorf("%s: %w", n.Name, ctx.Err())
				return
			}
			defer func() { <-sem }()
			errs[i] = fn(ctx, i, n)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func ping(ctx context.Context, c *agent.Client, timeout time.Duration) (agent.PingResponse, bool) {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pr, err := c.Ping(pctx)
	return pr, err == nil
}

// nodeArch maps `uname -m` to a GOARCH.
func nodeArch(ctx context.Context, tr transport.Transport, node inventory.Node) (string, error) {
	res, err := tr.Exec(ctx, node, transport.Cmd{Args: []string{"uname", "-sm"}})
	if err != nil {
		return "", err
	}
	f := strings.Fields(string(res.Stdout))
	if len(f) != 2 || f[0] != "Linux" {
		return "", fmt.Errorf("uname -sm says %q: only Linux nodes are supported", strings.TrimSpace(string(res.Stdout)))
	}
	switch f[1] {
	case "x86_64", "amd64":
		return "amd64", nil
	case "aarch64", "arm64":
		return "arm64", nil
	}
	return "", fmt.Errorf("machine %q is not supported (want x86_64 or aarch64)", f[1])
}

func (o Options) binaryFor(ctx context.Context, arch string) (string, error) {
	if b := o.Binaries[arch]; b != "" {
		return b, nil
	}
	if runtime.GOOS == "linux" && runtime.GOARCH == arch {
		return os.Executable()
	}
	if o.SourceDir == "" {
		return "", fmt.Errorf("the node is linux/%s and this rig is %s/%s: give a linux/%s binary, or run from the rig source tree so it can be cross-built",
			arch, runtime.GOOS, runtime.GOARCH, arch)
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	out := path.Join(dir, "rig", "stage", "rig-linux-"+arch)
	if err := CrossBuild(ctx, BuildOptions{Dir: o.SourceDir, Package: "./cmd/rig", GOARCH: arch, Out: out}); err != nil {
		return "", err
	}
	return out, nil
}

var hashCache sync.Map // path+size+mtime -> sha256

func fileHash(p string) (string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	key := fmt.Sprintf("%s\x00%d\x00%d", p, st.Size(), st.ModTime().UnixNano())
	if h, ok := hashCache.Load(key); ok {
		return h.(string), nil
	}
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	hashCache.Store(key, sum)
	return sum, nil
}

// hashOnNode returns the SHA-256 of a file on the node, "" if it does not exist (or cannot be
// read: then it is not the file we want either). Transport failures are errors.
func hashOnNode(ctx context.Context, tr transport.Transport, node inventory.Node, file string, sudo bool) (string, error) {
	res, err := tr.Exec(ctx, node, transport.Cmd{Args: []string{"sha256sum", "--", file}, Sudo: sudo})
	var ee *transport.ExitError
	if errors.As(err, &ee) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	f := strings.Fields(string(res.Stdout))
	if len(f) == 0 || len(f[0]) != 64 {
		return "", fmt.Errorf("sha256sum %s printed %q", file, res.Stdout)
	}
	return f[0], nil
}

// start launches the agent detached: its own session (setsid), immune to the hangup at the end
// of the SSH session (nohup), no descriptor of the session left open (redirections), so the
// session ends at once and the agent lives on. It returns the pid the shell saw.
func start(ctx context.Context, tr transport.Transport, node inventory.Node, o nodeOpts, sock string) (int, error) {
	q := shellQuote
	dir := o.AgentDir()
	flags := fmt.Sprintf("--socket %s --dir %s --root %s --node %s", q(sock), q(dir), q(o.Root), q(node.Name))
	if o.SysrqTrigger != "" {
		flags += " --sysrq-trigger " + q(o.SysrqTrigger)
	}
	if o.PowerProc != "" {
		flags += " --power-proc " + q(o.PowerProc)
	}
	script := fmt.Sprintf("mkdir -p %s && setsid nohup %s agent %s >>%s 2>&1 </dev/null & echo $!",
		q(dir), q(o.BinaryPath()), flags, q(path.Join(dir, "agent.out")))
	res, err := tr.Exec(ctx, node, transport.Cmd{Args: []string{"sh", "-c", script}, Sudo: o.Sudo})
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		return 0, fmt.Errorf("start printed %q, want a pid", res.Stdout)
	}
	return pid, nil
}

// waitReady pings until the agent answers, then checks that the process answering runs the
// binary just staged. A process that died early fails fast with the tail of its output.
func waitReady(ctx context.Context, tr transport.Transport, node inventory.Node, c *agent.Client, pid int, hash string, o nodeOpts, sock string) (agent.PingResponse, error) {
	deadline := time.Now().Add(o.StartTimeout)
	nextAlive := time.Now().Add(time.Second)
	var last error
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		pr, err := c.Ping(pctx)
		cancel()
		if err == nil {
			running, herr := hashOnNode(ctx, tr, node, fmt.Sprintf("/proc/%d/exe", pr.PID), o.Sudo)
			if herr != nil {
				return pr, herr
			}
			if running != hash {
				return pr, fmt.Errorf("the agent answering on %s (pid %d) does not run the staged binary (another agent holds the socket?)", sock, pr.PID)
			}
			return pr, nil
		}
		last = err
		if errors.Is(err, transport.ErrUnreachable) {
			return pr, err // the transport retried already
		}
		if time.Now().After(nextAlive) {
			nextAlive = time.Now().Add(time.Second)
			if !alive(ctx, tr, node, pid) {
				return pr, fmt.Errorf("the agent (pid %d) exited before answering; %s ends with:\n%s", pid, path.Join(o.AgentDir(), "agent.out"), tail(ctx, tr, node, o))
			}
		}
		if time.Now().After(deadline) {
			return pr, fmt.Errorf("no answer on %s within %s (last: %v); %s ends with:\n%s", sock, o.StartTimeout, last, path.Join(o.AgentDir(), "agent.out"), tail(ctx, tr, node, o))
		}
		select {
		case <-ctx.Done():
			return pr, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func tail(ctx context.Context, tr transport.Transport, node inventory.Node, o nodeOpts) string {
	res, err := tr.Exec(ctx, node, transport.Cmd{Args: []string{"tail", "-c", "2000", path.Join(o.AgentDir(), "agent.out")}, Sudo: o.Sudo})
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return strings.TrimSpace(string(res.Stdout))
}

// stopPID sends TERM, waits for the agent to stop answering and its process to go, then KILL
// if 10 s were not enough.
func stopPID(ctx context.Context, tr transport.Transport, node inventory.Node, pid int, o nodeOpts) error {
	sig := func(s string) error {
		_, err := tr.Exec(ctx, node, transport.Cmd{Args: []string{"kill", "-" + s, strconv.Itoa(pid)}, Sudo: o.Sudo})
		var ee *transport.ExitError
		if errors.As(err, &ee) {
			return nil // gone already
		}
		return err
	}
	gone := func() bool { return !alive(ctx, tr, node, pid) }
	if err := sig("TERM"); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if gone() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	o.Logger.Warn("agent ignored TERM; killing", "node", node.Name, "pid", pid)
	if err := sig("KILL"); err != nil {
		return err
	}
	for i := 0; i < 50 && !gone(); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if !gone() {
		return fmt.Errorf("agent pid %d survived KILL", pid)
	}
	return nil
}

// alive reports whether pid is a running process on the node. A zombie counts as gone: an
// agent orphaned under a PID 1 that does not reap stays a zombie, and it no longer runs.
func alive(ctx context.Context, tr transport.Transport, node inventory.Node, pid int) bool {
	res, err := tr.Exec(ctx, node, transport.Cmd{Args: []string{"cat", fmt.Sprintf("/proc/%d/stat", pid)}})
	if err != nil {
		var ee *transport.ExitError
		return !errors.As(err, &ee) // unknown when the transport failed: assume alive
	}
	s := string(res.Stdout)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return true
	}
	state := s[i+2]
	return state != 'Z' && state != 'X'
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
