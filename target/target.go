// Package target is the seam between the runner and the machines a run uses. A Target starts a
// cluster and hands back one Cluster value that owns everything target-specific: how nodes are
// reached (transport), their agents, where files live on them, collection and stop. The runner
// only ever talks to a Cluster, so it never knows whether the nodes are folders on this machine
// (target/local) or hosts reached over SSH (target/ssh). The shape follows roachprod's
// vm.Provider: one small interface per provider, the caller oblivious of which one it has.
package target

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/linkproxy"
	"github.com/rig-dev/rig/transport"
)

// Target starts clusters.
type Target interface {
	// Name says which cluster this is, for messages ("local", "inventory:FILE", "stack:NAME").
	Name() string
	// Start brings up one agent per node and returns the cluster; on error nothing it started
	// is left running.
	Start(ctx context.Context, o StartOptions) (Cluster, error)
}

// StartOptions are what a run asks of a target.
type StartOptions struct {
	RunDir string // the run folder on this machine (absolute)
	// Run is the run's id: agents' clients send it and check it on every answer, and the local
	// target names it in the locks on its addresses.
	Run              string
	Servers, Clients int    // what the playbook needs (the local target builds exactly that)
	Binary           string // the rig binary to run on the nodes (default: this executable)
	Logger           *slog.Logger
	Progress         func(format string, args ...any) // human progress lines (nil: none)
	// Links asks for every engine link to go through a proxy the cluster can cut: only a
	// Partitioner target is asked, and its cluster is then a Links.
	Links bool
	// Placement puts the nodes in zones: every engine link between two zones goes through a
	// proxy with the placement's shape (with Links, every other link through an undelayed one).
	// Only a Partitioner target is asked, and its cluster is then a Links.
	Placement linkproxy.Placement
	// NoRunQueue: the run places no run-queue waits (its cause sources are off), so a target
	// that would load one run-queue program for its agents (the local target) loads none.
	NoRunQueue bool
}

// Partitioner is a Target that can put a proxy on every link between its nodes (raft peer
// traffic and client traffic), delay them and cut and heal them: the local target, through
// linkproxy, as this kernel has no netem qdisc. Started with StartOptions.Links or Placement,
// its Cluster is a Links.
// Partitions says how, for the plan and the manifest.
type Partitioner interface {
	Target
	Partitions() string
}

// Links is a Cluster whose engine links go through proxies it can delay, cut and heal.
type Links interface {
	// Route is the address node from dials to reach addr, a service of node to: a proxy on
	// from's own address that forwards to addr. One route per (from, addr), made once.
	Route(ctx context.Context, from, to, addr string) (string, error)
	// Isolate cuts every routed link to or from the nodes; Heal heals those links. Each returns
	// how many links it changed.
	Isolate(nodes ...string) int
	Heal(nodes ...string) int
	// AddShape adds shape to each way of every routed link between node and any of peers (no
	// peers: every link to or from node), on top of the placement's; it returns the pairs it
	// changed and an undo that takes it off again and says how many links it changed back.
	AddShape(shape linkproxy.Shape, node string, peers ...string) ([]linkproxy.PairLink, func() int, error)
	// ProbeLinks measures the round trip of every routed (from, to) pair through its proxy,
	// one pair after the other.
	ProbeLinks(ctx context.Context) []linkproxy.PairProbe
}

// Cluster is a started cluster. Its methods are safe for concurrent use.
type Cluster interface {
	Inventory() *inventory.Inventory
	// Transport reaches the nodes: run commands, move files, dial their loopback services.
	Transport() transport.Transport
	// Agent is the client of the node's agent.
	Agent(node string) *agent.Client
	// Binary is the rig binary on the node.
	Binary(n inventory.Node) string
	// NodePath is a path in the node's agent folder, as the node sees it.
	NodePath(n inventory.Node, rel string) string
	// OutputPath is where a program on the node writes a file that belongs at rel in the run
	// folder; Gather brings it there (a no-op when the node writes into the run folder itself).
	OutputPath(n inventory.Node, rel string) string
	Gather(ctx context.Context, n inventory.Node, rel string) error
	// Remove deletes a path on the node (relative paths are in its agent folder).
	Remove(ctx context.Context, n inventory.Node, path string) error
	// ControlSocket is a Unix socket path on the node, beside the node agent's own in its 0700
	// folder, for a service only the controller may reach (the load generator's control API).
	ControlSocket(n inventory.Node, name string) string
	// Traits are the facts about the cluster a run acts on.
	Traits() Traits
	// Collect brings every node's folder (logs, transitions, samples; large engine data left
	// out) into RunDir/<node>.
	Collect(ctx context.Context) error
	// Stop ends the agents (each stops its engine first) and closes the transport.
	Stop(ctx context.Context) error
}

// DataPlacer is a Cluster that chooses where a server keeps its engine data when it has no
// data volume (the local target's --local-data): DataRoot is that folder, "" for the default
// (the agent's folder).
type DataPlacer interface {
	DataRoot(n inventory.Node) string
}

// Volumed is a Target whose servers have data volumes to choose among (the SSH target: a stack's
// rig:dataVolumes, or an inventory's volumes): Servers reads them before anything starts, so a
// playbook's disk.volume is checked against their names first.
type Volumed interface {
	Target
	Servers(ctx context.Context) ([]inventory.Node, error)
}

// DiskModeler is a Cluster that can put a server's engine data on a disk model: the local
// target mounts one per server (diskmodel/fusefs). A stack's disk is its data volume, so the
// SSH target is not one.
type DiskModeler interface {
	// ModelDisk mounts a model of l where server n keeps its engine data, probes what it
	// delivers, and returns the folder to keep the data in (a data root, as DataPlacer's) and
	// the probe. The model stays mounted until Stop.
	ModelDisk(ctx context.Context, n inventory.Node, l diskmodel.Limits, o DiskModelOptions) (root string, got diskmodel.Achieved, err error)
}

// DiskModelOptions is how a disk model is mounted, beyond its limits.
type DiskModelOptions struct {
	// Passthrough lets the kernel make reads and writes on the backing files itself, so the
	// model costs what the bare folder does. The runner asks it only when the limits have no
	// cap that needs each write (Limits.PassthroughCaps) and no power loss of the run drops
	// unsynced writes, which needs the model to have seen them.
	Passthrough bool
}

// DiskWatcher is a DiskModeler that notices a model lost under the run (unmounted, detached or
// covered by someone else, so the engine's writes no longer go through it, or fail): the run
// fails naming it instead of measuring whatever disk is left.
type DiskWatcher interface {
	// DiskLost delivers the first model lost, as an error naming the node and how (wrapping
	// fusefs.ErrLost on the local target).
	DiskLost() <-chan error
}

// PowerLosser is a DiskModeler whose models can lose power: the local target's (diskmodel/fusefs
// keeps what each file had synced). A power loss of a stack's node is a reboot without sync, not
// this.
type PowerLosser interface {
	// DropUnsynced reverts server n's disk model to what was last synced, every write since each
	// file's last fsync discarded. n's engine must have exited.
	DropUnsynced(ctx context.Context, n inventory.Node) (diskmodel.Dropped, error)
}

// PowerCutter is a Target whose servers a run's power_loss can take down. PowerCuts says how,
// for the plan and for refusals; rig run and rig validate ask it before anything starts.
type PowerCutter interface {
	Target
	PowerCuts() PowerCuts
}

// PowerCuts is how a target's servers lose power.
type PowerCuts struct {
	// How, e.g. "reboots each node without sync"; "" when this target cannot, and Refused
	// says why and what would work.
	How, Refused string
	// DiskModel: the servers lose power as their disk models (PowerLosser), so the playbook
	// needs a disk: block; else the nodes reboot (Rebooter) and a disk: block is refused.
	DiskModel bool
}

// Rebooter is a Cluster whose nodes a run may reboot without sync: a power loss of a stack's node
// (the SSH target's; docs/disks.md, "Power loss on a stack"), where the PowerLosser's disk model
// does not exist. PowerCut has n's agent reboot it (agent.Client.PowerCut: only an agent given a
// SysRq trigger can) and returns the boot it left; AwaitBoot waits until n answers over SSH in
// another boot and starts its agent again, which holds no lease and knows no engine.
type Rebooter interface {
	PowerCut(ctx context.Context, n inventory.Node) (boot string, err error)
	AwaitBoot(ctx context.Context, n inventory.Node, old string, o RebootOptions) (Rebooted, error)
}

// DefaultRebootTimeout bounds the wait for a node to come back after a power cut when none is
// given: an EC2 instance's reboot without sync takes tens of seconds (firmware, kernel,
// cloud-init, sshd).
const DefaultRebootTimeout = 5 * time.Minute

// RebootOptions bound a reboot.
type RebootOptions struct {
	// Timeout bounds the wait for the node to come back in another boot (the new boot id read
	// over SSH; 0: DefaultRebootTimeout); starting its agent has its own bound.
	Timeout  time.Duration
	Progress func(format string, args ...any) // progress lines while waiting (nil: none)
}

// Rebooted is what a reboot did, for the run's events.
type Rebooted struct {
	OldBoot, NewBoot string        // the node's boot ids before the cut and after it
	SeenDown         bool          // SSH failed at least once between them
	Back             time.Duration // the wait until the new boot id was read
	Agent            Staged        // the agent started in the new boot
}

// Traits describe a cluster in the terms a run needs.
type Traits struct {
	// Stack is the Pulumi stack the nodes belong to ("" if none), recorded in the manifest.
	Stack string
	// OneClock: every node reads the same clock, so offsets are not measured (a measured
	// "offset" would only be round-trip noise).
	OneClock bool
	// TuneNodes are the agents that apply kernel tuning: one per kernel. Several agents
	// recording "prior" values of one kernel's setting would revert to each other's changes.
	TuneNodes []inventory.Node
	// TuneSkipped, when not empty, says why the playbook's kernel tuning is not applied.
	TuneSkipped string
}

// LoopbackHost is where a node's own TCP services (engine admin) listen: its private address when
// that is a loopback address (the local target, or several nodes sharing one host in tests),
// else 127.0.0.1. Either way they are reached only through the transport.
func LoopbackHost(n inventory.Node) string {
	if ip := net.ParseIP(n.PrivateAddress); ip != nil && ip.IsLoopback() {
		return n.PrivateAddress
	}
	return "127.0.0.1"
}

// AgentClient is a client of the node's agent at its control socket, reached through tr.Dial
// (OpenSSH stream-local forwarding on remote targets), for run (may be "": no run).
func AgentClient(tr transport.Transport, n inventory.Node, socket, run string) *agent.Client {
	c := agent.NewClient(n.Name, func(ctx context.Context) (net.Conn, error) {
		return tr.Dial(ctx, n, socket)
	})
	c.Run = run
	return c
}

// Access reaches the nodes of an inventory by hand, outside a run (`rig ssh`, `rig agent
// ping|stage`): target/reach.Open picks the target's, and its caller never asks which it has.
type Access interface {
	Transport() transport.Transport
	// AgentSocket is where the node's agent listens, as Transport().Dial reaches it.
	AgentSocket(ctx context.Context, n inventory.Node) (string, error)
}

// Stager is an Access that can put rig on its nodes and start their agents (target/ssh). The
// local target has no such step: every run starts its agents itself.
type Stager interface {
	Stage(ctx context.Context, nodes []inventory.Node, o StageOptions) ([]Staged, error)
}

// StageOptions say how rig is staged.
type StageOptions struct {
	// Binaries maps a GOARCH to a linux binary of rig for nodes of that architecture (default:
	// this executable when it fits, else a cross build from SourceDir).
	Binaries  map[string]string
	SourceDir string // the rig module's folder, for cross builds
	Sudo      bool   // run the agent as root through sudo -n
	Parallel  int    // nodes staged at once (default 8)
}

// Staged is what staging did on one node.
type Staged struct {
	Node     string `json:"node"`
	Arch     string `json:"arch"`   // GOARCH of the node
	Binary   string `json:"binary"` // path on the node
	SHA256   string `json:"sha256"`
	Uploaded bool   `json:"uploaded"` // false: the node had this binary already
	Started  bool   `json:"started"`  // false: an agent running this binary answered already
	Socket   string `json:"socket"`   // the agent's control socket on the node
	PID      int    `json:"pid"`      // the agent's
	Version  string `json:"version"`
}
