package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/agent/hog"
	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/internal/ctlsock"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/recording"
	"github.com/rig-dev/rig/rundir"
)

// agentOptions are the daemon's flags (subcommands such as `rig agent ping` define their own).
type agentOptions struct {
	socket, dir, root, node string
	sysrqTrigger, powerProc string
	daemon, detached        bool
	daemonWait              time.Duration
	runqIndex               int
	runqMinWait             time.Duration
}

// newAgentCmd is `rig agent`: the node agent itself, and reaching agents (ping, stage).
func newAgentCmd(recordings *recording.Registry) *cobra.Command {
	var o agentOptions
	cmd := &cobra.Command{
		Use:   "agent --dir DIR [--socket DIR/ctl/agent.sock]",
		Short: "Run the node agent: an HTTP API on a Unix socket, reached through the transport",
		Long: `Run the node agent until SIGTERM or SIGINT. It supervises the engine, records its status
transitions, and serves the node's folder for collection. It listens on a Unix socket in a folder
only its owner can enter (0700; under sudo, the invoking user's): the controller reaches it
through OpenSSH's stream-local forwarding (or directly on the local target), and no other user
can (docs/security.md). Logs are JSON, on stderr and in DIR/agent.log.

With --daemon it starts itself detached (new session, output to DIR/agent.log, pid in
DIR/agent.pid) and returns once the agent answers.

Subcommands reach agents through the transport: ping shows each one's identity and clock,
stage puts rig on nodes and starts their agents. Kernel tuning by hand is ` + "`rig tune`" + `.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runAgent(cmd, o, recordings) },
	}
	f := cmd.Flags()
	f.StringVar(&o.socket, "socket", "", "the control socket to serve the agent API on (default DIR/ctl/agent.sock; its folder is made 0700)")
	f.StringVar(&o.dir, "dir", "", "the node's folder: engine runs, logs, transitions (required)")
	f.StringVar(&o.root, "root", "/", "filesystem root for /proc and /sys")
	f.StringVar(&o.node, "node", "", "this node's name (reported by ping, stamped on transitions)")
	f.StringVar(&o.sysrqTrigger, "sysrq-trigger", "", `the file a power cut writes "b" to (/proc/sysrq-trigger: reboot without sync, docs/disks.md); default none: power cuts are refused`)
	f.StringVar(&o.powerProc, "power-proc", "", "tests: the /proc a power cut reads the boot id and kernel.sysrq from (default ROOT/proc)")
	f.MarkHidden("power-proc")
	f.BoolVar(&o.daemon, "daemon", false, "start detached and return once the agent answers ping")
	f.DurationVar(&o.daemonWait, "daemon-wait", 15*time.Second, "with --daemon: how long to wait for the agent to answer")
	f.BoolVar(&o.detached, "detached", false, "internal: this process is the detached agent --daemon started")
	f.MarkHidden("detached")
	f.IntVar(&o.runqIndex, agent.FlagRunQueueIndex, -1, "internal: this agent's tracer of the run-queue program its starter shares, its maps at file descriptors 3-5")
	f.DurationVar(&o.runqMinWait, agent.FlagRunQueueMinWait, 0, "internal: that program's threshold")
	f.MarkHidden(agent.FlagRunQueueIndex)
	f.MarkHidden(agent.FlagRunQueueMinWait)
	cmd.AddCommand(newAgentPingCmd(), newAgentStageCmd(), newAgentHogCmd())
	return cmd
}

// newAgentHogCmd is `rig agent hog`: the process the agent starts for a cpu_hog action
// (agent/hog_handlers.go); hidden, its flags are hog.Main's.
func newAgentHogCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "hog --threads N --for DURATION [--nice N]",
		Short:              "internal: keep N threads busy for a while (the agent's cpu_hog)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch code := hog.Main(args, cmd.OutOrStdout(), cmd.ErrOrStderr()); code {
			case 0:
				return nil
			case 2:
				return fmt.Errorf("%w: agent hog: bad flags (said above)", errUsage)
			default:
				return fmt.Errorf("agent hog: exit %d (said above)", code)
			}
		},
	}
}

const (
	agentPIDFile = "agent.pid"
)

func runAgent(cmd *cobra.Command, o agentOptions, recordings *recording.Registry) error {
	if o.dir == "" {
		return fmt.Errorf("%w: --dir is required (the node's folder)", errUsage)
	}
	if o.daemonWait <= 0 {
		return fmt.Errorf("%w: --daemon-wait %s: want a positive duration", errUsage, o.daemonWait)
	}
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return fmt.Errorf("%w: --dir %q: %v", errUsage, o.dir, err)
	}
	if o.node != "" {
		if err := inventory.CheckName("--node", o.node); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	if o.socket == "" {
		o.socket = agent.SocketPath(dir)
	}
	if o.socket, err = filepath.Abs(o.socket); err != nil || len(o.socket) > ctlsock.MaxPath {
		return fmt.Errorf("%w: --socket %q: want a path of at most %d bytes", errUsage, o.socket, ctlsock.MaxPath)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("agent folder: %w", err)
	}
	if o.daemon {
		return startAgentDaemon(cmd.Context(), cmd.OutOrStdout(), dir, o)
	}

	var logw io.Writer = os.Stderr
	if !o.detached { // a detached agent's stderr already is agent.log
		f, err := os.OpenFile(filepath.Join(dir, rundir.AgentLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("agent log: %w", err)
		}
		defer f.Close()
		logw = io.MultiWriter(os.Stderr, f)
	} else {
		defer removePIDFile(dir, os.Getpid())
	}
	log := slog.New(slog.NewJSONHandler(logw, nil))
	if o.node != "" {
		log = log.With("node", o.node)
	}
	if agent.Version == "dev" {
		agent.Version = buildVersion()
	}
	log.Info("agent starting", "version", agent.Version, "pid", os.Getpid(), "socket", o.socket, "dir", dir)
	opts := agent.Options{Socket: o.socket, Dir: dir, Root: o.root, Node: o.node, SysrqTrigger: o.sysrqTrigger, PowerProc: o.powerProc, Logger: log, Recordings: recordings}
	if cmd.Flags().Changed(agent.FlagRunQueueIndex) || cmd.Flags().Changed(agent.FlagRunQueueMinWait) {
		if opts.RunQueue, err = agent.InheritedRunQueue(o.runqIndex, o.runqMinWait); err != nil {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
	}
	err = agent.Serve(cmd.Context(), opts)
	if err != nil {
		log.Error("agent stopped", "err", err)
		return err
	}
	log.Info("agent stopped")
	return nil
}

// startAgentDaemon re-executes this binary as a detached agent and waits until it answers ping
// (checking that the answer comes from the process it started, not another agent on the port).
func startAgentDaemon(ctx context.Context, out io.Writer, dir string, o agentOptions) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("agent --daemon: find own executable: %w", err)
	}
	logPath := filepath.Join(dir, rundir.AgentLogFile)
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("agent log: %w", err)
	}
	defer logf.Close()
	logStart, _ := logf.Seek(0, io.SeekEnd)

	args := []string{"agent", "--detached", "--socket", o.socket, "--dir", dir, "--root", o.root}
	if o.node != "" {
		args = append(args, "--node", o.node)
	}
	if o.sysrqTrigger != "" {
		args = append(args, "--sysrq-trigger", o.sysrqTrigger)
	}
	if o.powerProc != "" {
		args = append(args, "--power-proc", o.powerProc)
	}
	c := exec.Command(exe, args...)
	c.Dir = dir
	c.Stdout, c.Stderr = logf, logf // stdin is /dev/null
	// A session of its own: no controlling terminal, and outside the process group of whoever
	// started us (a transport that kills its command's group on cancel must not take it down).
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		return fmt.Errorf("agent --daemon: start: %w", err)
	}
	pid := c.Process.Pid
	if err := writePIDFile(dir, pid); err != nil {
		c.Process.Kill()
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	fail := func(err error) error {
		c.Process.Kill()
		removePIDFile(dir, pid)
		return err
	}

	client := agent.NewClient(o.node, func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", o.socket)
	})
	defer client.Close()
	deadline := time.Now().Add(o.daemonWait)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		pr, err := client.Ping(pctx)
		cancel()
		if err == nil && pr.PID == pid {
			fmt.Fprintf(out, "agent pid %d listening on %s (log %s)\n", pid, o.socket, logPath)
			return nil
		}
		// Not up yet, or another process answers on the socket (ours will then refuse to
		// listen and exit, which the next select reports).
		select {
		case werr := <-exited:
			removePIDFile(dir, pid)
			return fmt.Errorf("agent --daemon: the agent exited before answering (%v); %s says:\n%s", werr, logPath, tailFrom(logPath, logStart))
		case <-ctx.Done():
			return fail(fmt.Errorf("agent --daemon: %w", ctx.Err()))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("agent --daemon: no answer on %s within %s (last: %v); %s says:\n%s", o.socket, o.daemonWait, err, logPath, tailFrom(logPath, logStart)))
		}
	}
}

func writePIDFile(dir string, pid int) error {
	if err := atomicfile.WriteFile(filepath.Join(dir, agentPIDFile), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return fmt.Errorf("agent pid file: %w", err)
	}
	return nil
}

// removePIDFile removes DIR/agent.pid if it still names pid (a newer agent may have replaced it).
func removePIDFile(dir string, pid int) {
	p := filepath.Join(dir, agentPIDFile)
	if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(pid) {
		os.Remove(p)
	}
}

// tailFrom returns at most the last 2 KiB written to path after offset.
func tailFrom(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if end, err := f.Seek(0, io.SeekEnd); err == nil && end-offset > 2048 {
		offset = end - 2048
	}
	f.Seek(offset, io.SeekStart)
	b, _ := io.ReadAll(f)
	return strings.TrimSpace(string(b))
}

// buildVersion names this build: the module version, else the VCS revision, else "dev".
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	return "dev"
}
