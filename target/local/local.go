// Package local is the embedded default target: every node is a folder in the run folder with
// its own loopback address (127.0.0.11, .12, ...), its own agent process, and engines and the
// load generator as child processes. Playbooks run on it unchanged; only the scale differs from
// a cloud cluster.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/agent/runq"
	"github.com/rig-dev/rig/diskmodel/fusefs"
	"github.com/rig-dev/rig/internal/ctlsock"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/transport"
	localtr "github.com/rig-dev/rig/transport/local"
)

// Options configure the local target.
type Options struct {
	FirstAddress string // first loopback address (default 127.0.0.11); nodes count up from it
	// Tune allows a playbook's kernel tuning on this machine (reverted at the end of the run).
	Tune bool
	// DataDir, if set, holds every server's engine data (raft log, snapshots) in DataDir/<node>
	// instead of its node folder: a filesystem of its own, as a data volume is on a cloud node
	// (absolute).
	DataDir string
}

// Target lays out local nodes and runs their agents.
type Target struct {
	opts Options
}

// ErrBusy is a local address another run holds.
var ErrBusy = errors.New("local address held by another run")

var _ target.Target = (*Target)(nil)

// New returns a local target.
func New(opts Options) *Target {
	if opts.FirstAddress == "" {
		opts.FirstAddress = "127.0.0.11"
	}
	return &Target{opts: opts}
}

// Name is "local".
func (t *Target) Name() string { return inventory.TargetLocal }

// Inventory lays out the nodes in dir: servers node-0..node-(N-1), then clients client-0...
func (t *Target) Inventory(dir string, servers, clients int) (*inventory.Inventory, error) {
	first := net.ParseIP(t.opts.FirstAddress).To4()
	if first == nil || !first.IsLoopback() {
		return nil, fmt.Errorf("local target: first address %q is not an IPv4 loopback address", t.opts.FirstAddress)
	}
	if servers < 1 || clients < 1 {
		return nil, fmt.Errorf("local target: need at least 1 server and 1 client, have %d and %d", servers, clients)
	}
	inv := &inventory.Inventory{Target: inventory.TargetLocal}
	add := func(name, role string, i int) {
		ip := make(net.IP, 4)
		copy(ip, first)
		ip[3] += byte(i)
		inv.Nodes = append(inv.Nodes, inventory.Node{Name: name, Role: role, Address: ip.String(), PrivateAddress: ip.String(), Dir: filepath.Join(dir, name)})
	}
	for i := 0; i < servers; i++ {
		add(inventory.ServerName(i), inventory.RoleServer, i)
	}
	for i := 0; i < clients; i++ {
		add(inventory.ClientName(i), inventory.RoleClient, servers+i)
	}
	if int(first[3])+len(inv.Nodes) > 255 {
		return nil, fmt.Errorf("local target: %d nodes do not fit after %s", len(inv.Nodes), first)
	}
	return inv, inv.Validate()
}

// Start lays out the nodes in the run folder, takes a lock on every node address (a second run
// on the same addresses stops here, naming the run that holds them) and starts one `rig agent`
// per node, waiting until each answers ping. Agents run in their own process group (a Ctrl-C
// reaches only the controller, which stops them in order) and get TERM when the controller dies
// (Pdeathsig): then each stops its engine and reverts the run's tuning before it exits, so
// nothing outlives an interrupted or killed run (agent/lease.go).
func (t *Target) Start(ctx context.Context, so target.StartOptions) (target.Cluster, error) {
	inv, err := t.Inventory(so.RunDir, so.Servers, so.Clients)
	if err != nil {
		return nil, fmt.Errorf("build inventory: %w", err)
	}
	bin := so.Binary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("find rig binary: %w", err)
		}
	}
	log := so.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Cluster{t: t, inv: inv, dir: so.RunDir, bin: bin, run: so.Run, log: log, tr: localtr.New(),
		agents: map[string]*agent.Client{}, procs: map[string]*exec.Cmd{}, done: map[string]chan struct{}{}, progress: so.Progress}
	c.reclaimDisks()
	for _, n := range inv.Nodes {
		f, err := lockAddress(n.Address, so.Run)
		if err != nil {
			c.Stop(context.WithoutCancel(ctx))
			return nil, err
		}
		c.locks = append(c.locks, f)
	}
	if so.Links || !so.Placement.IsZero() {
		if err := c.startLinks(so); err != nil {
			c.Stop(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	if err := c.startAgents(ctx, !so.NoRunQueue); err != nil {
		c.Stop(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("start agents: %w", err)
	}
	return c, nil
}

// Cluster is a started local cluster.
type Cluster struct {
	t   *Target
	inv *inventory.Inventory
	dir string
	bin string
	run string
	log *slog.Logger
	// progress prints a human progress line (StartOptions.Progress); nil: none
	progress func(format string, args ...any)
	tr       *localtr.Transport
	// shortDir is a 0700 folder for control sockets whose node folder is too deep for a socket
	// path (ctlsock.MaxPath); "" until needed.
	shortDir string
	locks    []*os.File // flocks on the node addresses, held until Stop

	agents map[string]*agent.Client // written before Start returns, read-only after

	mu       sync.Mutex
	procs    map[string]*exec.Cmd
	done     map[string]chan struct{}
	disks    []*fusefs.Disk // disk models, unmounted at Stop once the engines are down
	diskOf   map[string]*fusefs.Disk
	syncLogs []*rundir.DiskSyncWriter // each disk model's fsyncs (rundir.DiskSyncsFile), closed with it
	links    *links                   // the link mesh (StartOptions.Links, Placement), closed at Stop; nil: none
	// runq is the run-queue program the agents share (agent.RunQueueFD), closed at Stop once
	// they are down; nil: each agent loads its own where it can.
	runq *runq.Shared

	chOnce   sync.Once
	lost     chan error    // the first disk model lost mid-run (DiskLost)
	stopped  chan struct{} // closed by Stop
	stopOnce sync.Once
}

var (
	_ target.Cluster     = (*Cluster)(nil)
	_ target.Links       = (*Cluster)(nil)
	_ target.Partitioner = (*Target)(nil)
)

// startAgents starts an agent per node; with runQueue, one run-queue program for all of them.
func (c *Cluster) startAgents(ctx context.Context, runQueue bool) error {
	// One run-queue program for every agent: all are on this kernel, so each would otherwise
	// run its own on every switch of every process here. Even with nothing tracked it costs
	// every switch a run, so a run without cause sources gets none.
	if runQueue {
		if sh, err := runq.OpenShared(runq.Options{}, len(c.inv.Nodes)); err == nil {
			c.runq = sh
		} else {
			c.log.Info("run-queue program not shared: each agent loads its own where it can", "err", err)
		}
	}
	for i, n := range c.inv.Nodes {
		if err := os.MkdirAll(n.Dir, 0o755); err != nil {
			return fmt.Errorf("create node folder %s: %w", n.Dir, err)
		}
		logf, err := os.OpenFile(filepath.Join(n.Dir, "agent.stderr"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		sock, err := c.agentSocket(n)
		if err != nil {
			logf.Close()
			return err
		}
		cmd := exec.Command(c.bin, "agent", "--socket", sock, "--dir", n.Dir, "--node", n.Name)
		cmd.Dir = n.Dir
		cmd.Stdout, cmd.Stderr = logf, logf
		// TERM, not KILL, when the controller dies: the agent then undoes the run itself.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
		if c.runq != nil {
			files, err := c.runq.Files(i)
			if err != nil {
				logf.Close()
				return fmt.Errorf("run-queue maps for the agent on %s: %w", n.Name, err)
			}
			cmd.ExtraFiles = files // from agent.RunQueueFD on, in Files' order
			cmd.Args = append(cmd.Args, "--"+agent.FlagRunQueueIndex, strconv.Itoa(i), "--"+agent.FlagRunQueueMinWait, c.runq.MinWait().String())
		}
		err = cmd.Start()
		for _, f := range cmd.ExtraFiles { // the agent has its own once started
			f.Close()
		}
		if err != nil {
			logf.Close()
			return fmt.Errorf("start agent on %s: %w", n.Name, err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); logf.Close(); close(done) }()
		c.mu.Lock()
		c.procs[n.Name], c.done[n.Name] = cmd, done
		c.mu.Unlock()
		c.agents[n.Name] = target.AgentClient(c.tr, n, sock, c.run)
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, n := range c.inv.Nodes {
		for {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err := c.agents[n.Name].Ping(pctx)
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("agent on %s did not answer ping: %w", n.Name, errors.Join(err, ctx.Err()))
			}
			// Ping again shortly, unless the agent exited: then it never will.
			select {
			case <-c.done[n.Name]:
				return fmt.Errorf("agent on %s exited at start (see %s)", n.Name, filepath.Join(n.Dir, "agent.stderr"))
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// agentSocket is the node agent's control socket: in the node folder, or in a short private
// folder of the run when the node folder is too deep for a socket path.
func (c *Cluster) agentSocket(n inventory.Node) (string, error) {
	if p := agent.SocketPath(n.Dir); len(p) <= ctlsock.MaxPath {
		return p, nil
	}
	if c.shortDir == "" {
		d, err := os.MkdirTemp("", "rig-ctl-") // 0700, a fresh name: nobody else's
		if err != nil {
			return "", fmt.Errorf("folder for control sockets: %w", err)
		}
		c.shortDir = d
	}
	return filepath.Join(c.shortDir, n.Name, "agent.sock"), nil
}

// ControlSocket is beside the node agent's socket.
func (c *Cluster) ControlSocket(n inventory.Node, name string) string {
	sock, _ := c.agentSocket(n) // made at start: no error now
	return filepath.Join(filepath.Dir(sock), name)
}

func (c *Cluster) Inventory() *inventory.Inventory              { return c.inv }
func (c *Cluster) Transport() transport.Transport               { return c.tr }
func (c *Cluster) Agent(node string) *agent.Client              { return c.agents[node] }
func (c *Cluster) Binary(inventory.Node) string                 { return c.bin }
func (c *Cluster) NodePath(n inventory.Node, rel string) string { return filepath.Join(n.Dir, rel) }

// OutputPath is in the run folder itself: the nodes share this machine's filesystem.
func (c *Cluster) OutputPath(_ inventory.Node, rel string) string { return filepath.Join(c.dir, rel) }

// Gather has nothing to do: OutputPath is the run folder.
func (c *Cluster) Gather(context.Context, inventory.Node, string) error { return nil }

// Remove deletes path (relative: in the node's folder).
func (c *Cluster) Remove(_ context.Context, n inventory.Node, path string) error {
	if !filepath.IsAbs(path) {
		path = filepath.Join(n.Dir, path)
	}
	return os.RemoveAll(path)
}

// DataRoot is where server n keeps its engine data: DataDir/<node>, or "" (its node folder)
// when no DataDir was given.
func (c *Cluster) DataRoot(n inventory.Node) string {
	if c.t.opts.DataDir == "" {
		return ""
	}
	return filepath.Join(c.t.opts.DataDir, n.Name)
}

// Traits: one machine, one clock and one kernel.
func (c *Cluster) Traits() target.Traits {
	tr := target.Traits{OneClock: true, TuneNodes: c.inv.Nodes[:1]}
	if !c.t.opts.Tune {
		tr.TuneSkipped = "on the local target it would change this machine's own kernel settings (rig run --tune-local allows it; they are reverted at the end)"
	}
	return tr
}

// Collect has nothing to do: every node's folder is in the run folder already.
func (c *Cluster) Collect(context.Context) error { return nil }

// Stop terminates every agent (each stops its engine first) and waits for them.
func (c *Cluster) Stop(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, cmd := range c.procs {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done[name]:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-c.done[name]
		}
	}
	c.procs = map[string]*exec.Cmd{}
	if c.runq != nil {
		// Counted only where the kernel's BPF statistics are on (runq.EnableStats).
		if st, err := c.runq.Stats(); err == nil && st.RunCount > 0 {
			c.log.Info("run-queue program", "runs", st.RunCount, "run_ns", st.RunTime.Nanoseconds())
		}
		if err := c.runq.Close(); err != nil {
			c.log.Warn("close the run-queue program", "err", err)
		}
		c.runq = nil
	}
	_, stopped := c.diskChans()
	c.stopOnce.Do(func() { close(stopped) })
	c.unmountDisks()
	if c.links != nil {
		if err := c.links.mesh.Close(); err != nil {
			c.log.Warn("close link mesh", "err", err)
		}
	}
	for _, a := range c.agents {
		a.Close()
	}
	if c.shortDir != "" {
		os.RemoveAll(c.shortDir)
	}
	for _, f := range c.locks {
		f.Close() // releases the flock
	}
	c.locks = nil
	return c.tr.Close()
}

// lockAddress takes an exclusive lock on a file named for the address and writes the run into
// it; the kernel drops the lock when this process ends, however it ends.
func lockAddress(addr, run string) (*os.File, error) {
	p := filepath.Join(os.TempDir(), "rig-local-"+addr+".lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock local address %s: %w", addr, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := io.ReadAll(io.LimitReader(f, 256))
		f.Close()
		return nil, fmt.Errorf("%w: %s is in use by %s (%s); wait for it, or give this run other addresses with --first-address",
			ErrBusy, addr, strings.TrimSpace(string(holder)), p)
	}
	f.Truncate(0)
	fmt.Fprintf(f, "run %s (pid %d)\n", run, os.Getpid())
	return f, nil
}

// Access reaches a local inventory's nodes outside a run: commands run on this machine and each
// agent listens in its node folder. It is no target.Stager: every run starts its agents.
type Access struct{ tr transport.Transport }

// NewAccess is the access to a local inventory's nodes.
func NewAccess() *Access { return &Access{tr: localtr.New()} }

func (a *Access) Transport() transport.Transport { return a.tr }

// AgentSocket is the socket in the node folder (a node folder too deep for a socket path has
// its agent's socket in a private folder of the run, which only that run knows).
func (a *Access) AgentSocket(_ context.Context, n inventory.Node) (string, error) {
	return agent.SocketPath(n.Dir), nil
}
