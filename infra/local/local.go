// Package local is the embedded default target: every node is a folder on this machine with its
// own loopback address (127.0.0.11, .12, ...), its own agent process, and engines and the load
// generator as child processes. Playbooks run on it unchanged; only the scale differs from AWS.
package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/inventory"
)

// Options configure the local target.
type Options struct {
	Servers, Clients int
	Dir              string // the run folder: each node gets Dir/<node>
	Binary           string // the rig binary agents run (default: this executable)
	FirstAddress     string // first loopback address (default 127.0.0.11); nodes count up from it
	AgentPort        int    // default agent.DefaultPort
	Logger           *slog.Logger
}

// Target builds an inventory of local nodes and runs their agents.
type Target struct {
	opts Options
}

// New returns a local target.
func New(opts Options) *Target {
	if opts.FirstAddress == "" {
		opts.FirstAddress = "127.0.0.11"
	}
	if opts.AgentPort == 0 {
		opts.AgentPort = agent.DefaultPort
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Target{opts: opts}
}

// Name is "local".
func (t *Target) Name() string { return "local" }

// Inventory lays out the nodes: servers node-0..node-(N-1), then clients client-0...
func (t *Target) Inventory(ctx context.Context) (*inventory.Inventory, error) {
	first := net.ParseIP(t.opts.FirstAddress).To4()
	if first == nil || !first.IsLoopback() {
		return nil, fmt.Errorf("local target: first address %q is not an IPv4 loopback address", t.opts.FirstAddress)
	}
	if t.opts.Servers < 1 || t.opts.Clients < 1 {
		return nil, fmt.Errorf("local target: need at least 1 server and 1 client, have %d and %d", t.opts.Servers, t.opts.Clients)
	}
	inv := &inventory.Inventory{Target: "local"}
	add := func(name, role string, i int) {
		ip := make(net.IP, 4)
		copy(ip, first)
		ip[3] += byte(i)
		inv.Nodes = append(inv.Nodes, inventory.Node{Name: name, Role: role, Address: ip.String(), PrivateAddress: ip.String(), Dir: filepath.Join(t.opts.Dir, name)})
	}
	for i := 0; i < t.opts.Servers; i++ {
		add("node-"+strconv.Itoa(i), inventory.RoleServer, i)
	}
	for i := 0; i < t.opts.Clients; i++ {
		add("client-"+strconv.Itoa(i), inventory.RoleClient, t.opts.Servers+i)
	}
	if int(first[3])+len(inv.Nodes) > 255 {
		return nil, fmt.Errorf("local target: %d nodes do not fit after %s", len(inv.Nodes), first)
	}
	return inv, inv.Validate()
}

// AgentAddr is where a node's agent listens.
func (t *Target) AgentAddr(n inventory.Node) string {
	return net.JoinHostPort(n.Address, strconv.Itoa(t.opts.AgentPort))
}

// Agents are the agent processes of a local cluster.
type Agents struct {
	mu    sync.Mutex
	procs map[string]*exec.Cmd
	done  map[string]chan struct{}
}

// StartAgents starts one `rig agent` per node and waits until each answers ping. Agents run in
// their own process group (a Ctrl-C reaches only the controller, which stops them in order) and
// die with the controller (Pdeathsig), so no agent or engine outlives an interrupted run.
func (t *Target) StartAgents(ctx context.Context, inv *inventory.Inventory, dial func(inventory.Node) agent.DialFunc) (*Agents, map[string]*agent.Client, error) {
	bin := t.opts.Binary
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return nil, nil, fmt.Errorf("find rig binary: %w", err)
		}
	}
	a := &Agents{procs: map[string]*exec.Cmd{}, done: map[string]chan struct{}{}}
	clients := map[string]*agent.Client{}
	for _, n := range inv.Nodes {
		if err := os.MkdirAll(n.Dir, 0o755); err != nil {
			a.Stop()
			return nil, nil, fmt.Errorf("create node folder %s: %w", n.Dir, err)
		}
		logf, err := os.OpenFile(filepath.Join(n.Dir, "agent.stderr"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			a.Stop()
			return nil, nil, err
		}
		cmd := exec.Command(bin, "agent", "--listen", t.AgentAddr(n), "--dir", n.Dir, "--node", n.Name)
		cmd.Dir = n.Dir
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			logf.Close()
			a.Stop()
			return nil, nil, fmt.Errorf("start agent on %s: %w", n.Name, err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); logf.Close(); close(done) }()
		a.mu.Lock()
		a.procs[n.Name], a.done[n.Name] = cmd, done
		a.mu.Unlock()
		clients[n.Name] = agent.NewClient(n.Name, dial(n))
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, n := range inv.Nodes {
		for {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err := clients[n.Name].Ping(pctx)
			cancel()
			if err == nil {
				break
			}
			select {
			case <-a.done[n.Name]:
				a.Stop()
				return nil, nil, fmt.Errorf("agent on %s exited at start (see %s)", n.Name, filepath.Join(n.Dir, "agent.stderr"))
			default:
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				a.Stop()
				return nil, nil, fmt.Errorf("agent on %s did not answer ping: %w", n.Name, errors.Join(err, ctx.Err()))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return a, clients, nil
}

// Stop terminates every agent (each stops its engine first) and waits for them.
func (a *Agents) Stop() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, cmd := range a.procs {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-a.done[name]:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-a.done[name]
		}
	}
	a.procs = map[string]*exec.Cmd{}
}
