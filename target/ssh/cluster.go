package ssh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/transport"
	"github.com/rig-dev/rig/transport/sshx"
)

// TargetOptions say how to reach a cluster over SSH.
type TargetOptions struct {
	Nodes inventory.Target // a Pulumi stack, or an inventory file
	Stack string           // recorded in the manifest (rig down archives a stack's runs)
	Login Login
	Sudo  bool   // run the agent as root through sudo -n (tuning needs root)
	Base  string // folder on the nodes that holds rig-NODE (default: the login home)
	// SysrqTrigger is given to every agent (--sysrq-trigger): a run's power_loss may then reboot
	// the nodes (PowerCutNodes on a stack; "" refuses). PowerProc is the agents' --power-proc
	// (tests: a fake /proc for the boot id). In either, {node} stands for the node's name.
	SysrqTrigger, PowerProc string
}

// Login says how the controller logs in to nodes; every verb that reaches nodes over SSH uses
// it, so they all offer the same keys.
type Login struct {
	// KeyFiles are private keys; none means ~/.ssh/id_ed25519, id_ecdsa and id_rsa, those that
	// load. The ssh-agent's keys are offered too.
	KeyFiles       []string
	User           string        // for nodes whose inventory entry has none (default: the local user)
	ConnectTimeout time.Duration // dial plus handshake (default: sshx's)
}

// Transport opens an SSH transport with l's keys. A key file that cannot be loaded is an error
// naming it; a default key that cannot (encrypted, say) is skipped: ssh-agent may hold it.
func (l Login) Transport(log *slog.Logger) (*sshx.Transport, error) {
	opts := sshx.Options{User: l.User, ConnectTimeout: l.ConnectTimeout, UseAgent: true, Logger: log}
	for _, f := range l.KeyFiles {
		s, err := sshx.LoadKey(f)
		if err != nil {
			return nil, fmt.Errorf("--ssh-key: %w", err) // err names the file and what is wrong with it
		}
		opts.Signers = append(opts.Signers, s)
	}
	if len(l.KeyFiles) == 0 {
		home, _ := os.UserHomeDir()
		for _, name := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			if s, err := sshx.LoadKey(filepath.Join(home, ".ssh", name)); err == nil {
				opts.Signers = append(opts.Signers, s)
			}
		}
	}
	return sshx.New(opts)
}

// Target is a cluster of hosts reached over SSH.
type Target struct{ opts TargetOptions }

var _ target.Target = (*Target)(nil)

// New returns an SSH target.
func New(o TargetOptions) *Target { return &Target{opts: o} }

// Name names the inventory's source.
func (t *Target) Name() string { return t.opts.Nodes.Name() }

// Servers are the inventory's servers, with their data volumes (target.Volumed).
func (t *Target) Servers(ctx context.Context) ([]inventory.Node, error) {
	inv, err := t.opts.Nodes.Inventory(ctx)
	if err != nil {
		return nil, fmt.Errorf("inventory of %s: %w", t.opts.Nodes.Name(), err)
	}
	return inv.Servers(), nil
}

// Start reads the inventory, opens the SSH transport (host keys verified against it), stages the
// rig binary on every node (a no-op when its hash matches) and starts one agent per node as a
// daemon.
func (t *Target) Start(ctx context.Context, so target.StartOptions) (target.Cluster, error) {
	inv, err := t.opts.Nodes.Inventory(ctx)
	if err != nil {
		return nil, fmt.Errorf("inventory of %s: %w", t.opts.Nodes.Name(), err)
	}
	log := so.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tr, err := t.opts.Login.Transport(log)
	if err != nil {
		return nil, fmt.Errorf("ssh transport: %w", err)
	}
	c := &Cluster{t: t, inv: inv, tr: tr, dir: so.RunDir, log: log, run: so.Run, agents: map[string]*agent.Client{},
		stage: Options{Base: t.opts.Base, Sudo: t.opts.Sudo, PowerProc: t.opts.PowerProc, SysrqTrigger: t.opts.SysrqTrigger, Logger: log}}
	if so.Binary != "" {
		// It runs on nodes of this machine's architecture; others get a cross build.
		c.stage.Binaries = map[string]string{runtime.GOARCH: so.Binary}
	}
	if so.Progress != nil {
		so.Progress("staging rig on %d nodes over SSH", len(inv.Nodes))
	}
	staged, err := All(ctx, tr, inv.Nodes, c.stage)
	if err != nil {
		// Some agents may have started: stop them all.
		c.Stop(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("stage: %w", err)
	}
	c.sockets = map[string]string{}
	for i, n := range inv.Nodes {
		c.sockets[n.Name] = staged[i].Socket
		c.agents[n.Name] = target.AgentClient(tr, n, staged[i].Socket, so.Run)
	}
	return c, nil
}

// Cluster is a started SSH cluster.
type Cluster struct {
	t     *Target
	inv   *inventory.Inventory
	tr    transport.Transport
	dir   string
	log   *slog.Logger
	stage Options
	run   string // the run's id, which agents' clients send
	mu    sync.Mutex
	// agents and sockets (the agents' control sockets on the nodes, absolute paths) are written
	// before Start returns, and after that only by Reboot, which starts a node's agent anew.
	agents  map[string]*agent.Client
	sockets map[string]string
}

var _ target.Cluster = (*Cluster)(nil)

func (c *Cluster) Inventory() *inventory.Inventory { return c.inv }
func (c *Cluster) Transport() transport.Transport  { return c.tr }
func (c *Cluster) Agent(node string) *agent.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.agents[node]
}

// Binary is the staged binary.
func (c *Cluster) Binary(n inventory.Node) string { return c.stage.withDefaults(n).BinaryPath() }

// NodePath is in the node's agent folder.
func (c *Cluster) NodePath(n inventory.Node, rel string) string {
	return path.Join(c.stage.withDefaults(n).AgentDir(), rel)
}

// ControlSocket is beside the node agent's socket, in its 0700 folder (owned by the login user,
// whom the controller's SSH session and the load generator run as).
func (c *Cluster) ControlSocket(n inventory.Node, name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return path.Join(path.Dir(c.sockets[n.Name]), name)
}

// OutputPath is in the node's agent folder; Gather downloads it.
func (c *Cluster) OutputPath(n inventory.Node, rel string) string { return c.NodePath(n, rel) }

// Gather downloads OutputPath(n, rel) to RunDir/rel.
func (c *Cluster) Gather(ctx context.Context, n inventory.Node, rel string) error {
	local := filepath.Join(c.dir, rel)
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		return err
	}
	return c.tr.Download(ctx, n, c.OutputPath(n, rel), local)
}

// Remove runs rm -rf on the node (through sudo when the agent runs as root: it owns the files).
func (c *Cluster) Remove(ctx context.Context, n inventory.Node, p string) error {
	if !path.IsAbs(p) {
		p = c.NodePath(n, p)
	}
	_, err := c.tr.Exec(ctx, n, transport.Cmd{Args: []string{"rm", "-rf", "--", p}, Sudo: c.t.opts.Sudo})
	return err
}

// Traits: a clock and a kernel per node.
func (c *Cluster) Traits() target.Traits {
	return target.Traits{Stack: c.t.opts.Stack, TuneNodes: c.inv.Nodes}
}

// Collect pulls every node's folder through its agent into RunDir/<node>, all nodes at once: a
// node that stopped answering (a hung host, a cut link) costs its own folder, not the others'.
func (c *Cluster) Collect(ctx context.Context) error {
	errs := make([]error, len(c.inv.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.inv.Nodes {
		wg.Go(func() {
			if err := c.Agent(n.Name).CollectInto(ctx, filepath.Join(c.dir, n.Name), agent.CollectOptions{}); err != nil {
				errs[i] = fmt.Errorf("collect %s: %w", n.Name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Stop ends every agent, on a budget of its own whatever ctx has left, then closes the
// transport.
func (c *Cluster) Stop(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var errs []error
	for _, n := range c.inv.Nodes {
		if err := Stop(sctx, c.tr, n, c.stage); err != nil {
			errs = append(errs, err)
		}
	}
	c.mu.Lock()
	for _, a := range c.agents {
		a.Close()
	}
	c.mu.Unlock()
	c.tr.Close()
	return errors.Join(errs...)
}
