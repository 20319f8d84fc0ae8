// Package targettest is a fake target.Target and target.Cluster for the tests of what drives a
// cluster (the runner, the conformance suite): no processes, no sockets, no engine. Every node's
// agent is an HTTP handler with the real agent's request and answer types, reached by its real
// client (agent.Client) over net.Pipe; the load generator is a fake `rig loadgen` command with a
// control API of its own. The fake notes every call in order (Calls, Called) and answers from
// what a test scripts (the Cluster's exported fields, and Gone, CutLease, Lapse, Exit while a run
// goes on).
//
// What it is not, so that no test reads a real cluster's behaviour into it:
//   - Its engine is a few fields and a journal of transitions (long-polled like the agent's). The
//     first server launched leads; when the leader goes down or steps down the first running
//     server in name order leads at once, in the next term. There is no consensus, no log and no
//     client traffic: one index, shared by every server, grows by 100 on each snapshot, and the
//     state hash is always "feed". A launch goes to ready in one transition (no starting or
//     catching-up phase seen), and a status's pid, orders, started and now are zero. It serves
//     no client protocol, so the conformance suite cannot pass it.
//   - Its load generator writes placeholder figures (a stats.json of ten scheduled probes, a
//     bursts.json naming only its transport), no probes.bin and no latency.
//   - Its transport runs only `rig loadgen preload|probe|burst`, copies uploads on this machine,
//     refuses downloads and dials only the load generator's control API at a client's
//     ControlSocket; the engines' addresses answer nothing.
//   - Its agents accept tuning and samples and do nothing; any signal stops the engine; a
//     recording take writes no file. Its Traits say one clock and one kernel (the first node
//     tunes), as the local target's. Collect and Remove only note the call; Gather does nothing.
//
// Capabilities beyond target.Cluster (DiskModeler, Links, ...) are a test's own: it embeds
// *Cluster in a type with their methods, as actionstest's Env is extended.
package targettest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/transport"
)

// Target starts its Cluster (a new one when it has none). Its zero value is a target that can
// do nothing beyond target.Target: no partitions, no power cuts, no volumes.
type Target struct {
	Cluster  *Cluster
	StartErr error  // Start's answer when set
	OnStart  func() // called first in Start (e.g. to interrupt)

	mu    sync.Mutex
	asked []target.StartOptions
}

var _ target.Target = (*Target)(nil)

func (t *Target) Name() string { return "fake" }

// Start notes what it was asked, then builds the nodes the options ask for: servers node-0..,
// clients client-0.., at 10.0.0.1, .2, ... in that order, with their folders under RunDir/nodes.
// A Cluster started again after Stop (the next run of a plan) is a new cluster of the same
// shape: fresh nodes and engines, in term 1; its calls go on in the same record. A Start while
// it runs is an error.
func (t *Target) Start(ctx context.Context, so target.StartOptions) (target.Cluster, error) {
	t.mu.Lock()
	t.asked = append(t.asked, so)
	if t.Cluster == nil {
		t.Cluster = NewCluster()
	}
	c := t.Cluster
	t.mu.Unlock()
	if t.OnStart != nil {
		t.OnStart()
	}
	if t.StartErr != nil {
		return nil, t.StartErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started && !c.stopped {
		return nil, errors.New("targettest: the cluster runs already (started and not stopped)")
	}
	c.nodes, c.term, c.index, c.stopped = map[string]*node{}, 1, 0, false
	c.dir = so.RunDir
	c.inv = &inventory.Inventory{Target: "fake"}
	for i := 0; i < so.Servers; i++ {
		c.addNodeLocked(fmt.Sprintf("node-%d", i), inventory.RoleServer)
	}
	for i := 0; i < so.Clients; i++ {
		c.addNodeLocked(fmt.Sprintf("client-%d", i), inventory.RoleClient)
	}
	c.started = true
	return c, nil
}

// Asked are the options of every Start so far, in order.
func (t *Target) Asked() []target.StartOptions {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.asked)
}

// Cluster is the fake cluster. Set its exported fields before Start; read what was done through
// Calls, Called, Journal, Started and Stopped.
type Cluster struct {
	// OnCall is called with every agent request ("POST /engine/start", "POST /engine/proxy
	// /snapshot", ...) before it is answered, outside the cluster's lock: it may call the
	// Cluster's methods.
	OnCall func(node, call string)
	// ExitAtStart is a server whose engine exits (code 1) as soon as it is started.
	ExitAtStart string
	// FreeBytes is the free space every server's data filesystem reports, all on one
	// filesystem as on the local target (0: 1 TiB).
	FreeBytes int64
	// MemAvailable is the MemAvailable every node's facts report, all on one host "fake-host"
	// (0: the facts are empty).
	MemAvailable uint64
	// StepDown is every engine status's step_down (engine.StepDownRelaunch, ...).
	StepDown string
	// Loadgen scripts the load generator.
	Loadgen Loadgen

	mu      sync.Mutex
	dir     string
	inv     *inventory.Inventory
	changed chan struct{} // closed and replaced on every journal append
	nodes   map[string]*node
	term    uint64
	index   uint64
	calls   []string
	started bool
	stopped bool
	lg      loadgenState
}

var _ target.Cluster = (*Cluster)(nil)

// NewCluster is a cluster with no nodes until a Target starts it.
func NewCluster() *Cluster {
	return &Cluster{nodes: map[string]*node{}, changed: make(chan struct{}), term: 1}
}

type node struct {
	inventory.Node
	eng     fakeEngine
	journal []rundir.Transition
	gone    bool // the agent does not answer
	client  *agent.Client
	// The lease, as the agent holds it. leaseCut: renewals do not get through (the connection
	// ends); lapsed: the lease lapsed, every request gets 410.
	renewed  time.Time
	ttl      time.Duration
	leaseCut bool
	lapsed   bool
}

func (c *Cluster) addNodeLocked(name, role string) {
	addr := "10.0.0." + strconv.Itoa(len(c.inv.Nodes)+1)
	n := &node{Node: inventory.Node{Name: name, Role: role, Address: addr, PrivateAddress: addr}}
	c.inv.Nodes = append(c.inv.Nodes, n.Node)
	c.nodes[name] = n
	h := c.agentHandler(n)
	n.client = agent.NewClient(name, func(ctx context.Context) (net.Conn, error) {
		c.mu.Lock()
		gone := n.gone
		c.mu.Unlock()
		if gone {
			return nil, fmt.Errorf("%w: dial agent on %s: connection refused", transport.ErrUnreachable, name)
		}
		return pipeServe(h), nil
	})
}

// pipeServe answers HTTP on one end of a pipe and returns the other.
func pipeServe(h http.Handler) net.Conn {
	a, b := net.Pipe()
	l := &oneConnListener{conn: b, done: make(chan struct{})}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	return a
}

type oneConnListener struct {
	once sync.Once
	conn net.Conn
	done chan struct{}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	var c net.Conn
	l.once.Do(func() { c = l.conn })
	if c != nil {
		return c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}
func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return &net.TCPAddr{} }

// --- what a test reads

// Calls are the calls noted so far, in order, one line each, "NODE CALL": every agent request
// but the lease's, the engine status and the transitions' polls (they come on timers), as
// "node-0 POST /engine/start" or "node-0 POST /engine/proxy /snapshot"; "node-0 take FORMAT
// WINDOW defer=BOOL" for a recording taken; "client-0 loadgen MODE" for each command,
// "client-0 loadgen burst-config JSON" for a burst command's config, "client-0 loadgen burst
// JSON" and "client-0 loadgen stop" for the control API; "node-0 remove PATH"; " collect" and
// " stop" for the cluster's own.
func (c *Cluster) Calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

// Called reports whether a call noted so far starts with prefix.
func (c *Cluster) Called(prefix string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.ContainsFunc(c.calls, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

// Started says whether a Target ever started the cluster; Stopped whether Stop was called since
// its last start.
func (c *Cluster) Started() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started
}

func (c *Cluster) Stopped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped
}

// Journal is node's engine journal so far, as its agent serves it.
func (c *Cluster) Journal(node string) []rundir.Transition {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.mustNode(node).journal)
}

func (c *Cluster) mustNode(name string) *node {
	n, ok := c.nodes[name]
	if !ok {
		panic(fmt.Sprintf("targettest: no node %q", name))
	}
	return n
}

func (c *Cluster) record(node, call string) {
	c.mu.Lock()
	c.calls = append(c.calls, node+" "+call)
	c.mu.Unlock()
}

// --- target.Cluster

func (c *Cluster) Inventory() *inventory.Inventory { return c.inv }
func (c *Cluster) Transport() transport.Transport  { return fakeTransport{c} }
func (c *Cluster) Agent(node string) *agent.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mustNode(node).client
}
func (c *Cluster) Binary(inventory.Node) string { return "rig" }
func (c *Cluster) NodePath(n inventory.Node, rel string) string {
	return filepath.Join(c.dir, "nodes", n.Name, rel)
}

// OutputPath is the run folder itself, as on the local target: nothing is gathered.
func (c *Cluster) OutputPath(n inventory.Node, rel string) string {
	return filepath.Join(c.dir, rel)
}
func (c *Cluster) Gather(context.Context, inventory.Node, string) error { return nil }

// Remove only notes the call: nothing is deleted.
func (c *Cluster) Remove(_ context.Context, n inventory.Node, p string) error {
	c.record(n.Name, "remove "+p)
	return nil
}
func (c *Cluster) ControlSocket(n inventory.Node, name string) string {
	return filepath.Join(c.dir, "nodes", n.Name, "ctl", name)
}
func (c *Cluster) Traits() target.Traits {
	return target.Traits{OneClock: true, TuneNodes: c.inv.Nodes[:1]}
}
func (c *Cluster) Collect(context.Context) error {
	c.record("", "collect")
	return nil
}
func (c *Cluster) Stop(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	c.calls = append(c.calls, " stop")
	return nil
}
