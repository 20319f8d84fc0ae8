// Package actions holds the timeline's action kinds. Each kind is one type in a file of its own
// that owns everything about it: its playbook keys with their defaults and ranges, its checks,
// its plan line, what it does to the cluster (through Env, not the runner) and the event it
// records. The playbook parser, the plan and the runner know kinds through New, Names and the
// Spec interface, and a kind's optional capabilities (the interfaces a Spec may implement,
// declared here and beside their kinds: Downer, Toucher, EngineCaller, ...) by type assertion, as
// hashicorp/raft checks for a BatchingFSM. A kind's tests use actionstest's fake Env.
package actions

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/internal/ctxtime"
	"github.com/rig-dev/rig/linkproxy"
	"github.com/rig-dev/rig/rundir"
)

// Spec is one timeline entry's settings, of one kind. Implementations are pointers to structs
// whose JSON is the entry's body in a resolved playbook.
type Spec interface {
	// Kind is the name a playbook gives it (timeline: [{at: 10s, <kind>: {...}}]).
	Kind() string
	// Fields are its playbook keys, in the order errors list them.
	Fields() []Field
	// Check applies the rules of this entry that need the rest of the playbook (c).
	Check(c Context) []Problem
	// Describe is the entry's line in the plan; v says which keys a matrix varies.
	Describe(v Varied) string
	// String is the entry in progress lines and errors.
	String() string
	// Run does it, at its offset from load start.
	Run(ctx context.Context, env Env) error
}

// Field is one key of an action kind.
type Field struct {
	Key string
	Set func(s Spec, raw string) error // parses and range-checks raw, and stores it
	Get func(s Spec) string            // the value in canonical form
}

// Completer is a Spec with rules on which keys must be given (seen: the keys the entry gives).
type Completer interface {
	Complete(seen map[string]bool) []Problem
}

// Disruptor is a kind that takes a server out of service (a kill, a step-down); the cluster
// must have servers to spare. What is the plan's wording, e.g. "kills a server".
type Disruptor interface{ Disrupts() string }

// Layer is how much of a server a Downer takes out, outermost last: each takes the ones before it
// with it. A Toucher needs a layer of each node it names up.
type Layer int

const (
	// LayerLinks is the server's place in the majority: its peer and client links (a partition
	// cuts them; its engine and agent still run and answer the controller).
	LayerLinks Layer = iota + 1
	// LayerEngine is the server's engine process (a kill stops it; its host and agent stay up).
	LayerEngine
	// LayerHost is the server's host (a power loss cuts it: nothing on it runs).
	LayerHost
)

func (l Layer) String() string {
	switch l {
	case LayerLinks:
		return "links"
	case LayerEngine:
		return "engine"
	case LayerHost:
		return "host"
	}
	return "nothing"
}

// Downer is a kind that takes nodes out of the majority from its offset until Down.For later
// (0: for the rest of the run). The playbook owns the timeline's state from these (which node is
// down when, playbooks/timeline.go): a node that is down cannot be taken down again, no majority
// may be down unless Down.Majority, and every server down at once needs allow_all_down.
type Downer interface {
	Down() Down
}

// Down is what a Downer entry takes down.
type Down struct {
	Nodes []string      // node references (leader, follower, other-follower, node-N)
	For   time.Duration // until they are back (relaunched or healed); 0: for the rest of the run
	// Majority: the entry may leave a majority down (a power loss models that failure); a kill
	// or a partition may not.
	Majority bool
	// Takes is the outermost layer it takes out of each node (a partition its links, a kill its
	// engine, a power loss its host).
	Takes Layer
}

// Toucher is a kind that acts on servers, or needs a leader, at its offset and, with For, for a
// while after it. The playbook's timeline state (playbooks/timeline.go) refuses it at a moment
// when a node-N it names has Needs (or more) taken out by an earlier entry, and, if it needs a
// leader (Leader, or a role among Nodes: roles resolve through the leader), at a moment when no
// majority is up; and it refuses a later Downer that takes Needs out of one of its node-N while
// it lasts. A Downer touches the nodes it takes down (needing their links up) without saying so.
type Toucher interface {
	Touches() Touch
}

// Touch is what a Toucher entry acts on and needs.
type Touch struct {
	Nodes  []string      // node references it acts on
	Leader bool          // it acts on the leader whatever Nodes says (snapshot, step_down)
	Needs  Layer         // the layer of each node it needs up; 0: none (it acts on any node)
	For    time.Duration // how long it keeps needing it after its offset; 0: at its offset only
}

// Spinner is a kind that keeps CPUs of a node's host busy for a while (a CPU hog): the plan names
// the moments when those on one host ask for more threads than it has CPUs.
type Spinner interface {
	Spins(cpus int) Spin
}

// Spin is what a Spinner entry asks of its node's host.
type Spin struct {
	Threads int           // busy threads, with one per CPU resolved against the host's cpus
	Nice    int           // their nice value
	For     time.Duration // how long they spin
}

// Spanner is a kind whose effect lasts until an event of its own ends it (a partition's heal, a
// delay's delay_heal, a hog's cpu_hog_end), so the analysis holds it as a cause until then, not
// only just after it began.
type Spanner interface {
	EndEvent() rundir.ActionName
}

// EndEvent is the event that ends the named action's effect, when its kind is a Spanner.
func EndEvent(name rundir.ActionName) (rundir.ActionName, bool) {
	s, ok := New(string(name))
	if !ok {
		return "", false
	}
	sp, ok := s.(Spanner)
	if !ok {
		return "", false
	}
	return sp.EndEvent(), true
}

// lastingEndTimeout bounds ending a lasting action once the timeline has ended.
const lastingEndTimeout = 10 * time.Second

// lastFor is how every Spanner ends: beside the timeline, d after at, end takes its effect off
// and returns the event that says so, which lastFor records under sp's EndEvent. When the
// timeline ends first (an interrupt, a failed action, the end of the load), it ends the effect
// at once (early), on a context of its own, so the record never holds a lasting action without
// its end; failing then is a progress line, not the run's error (the run is over, and the
// target's stop undoes what is left).
func lastFor(ctx context.Context, env Env, sp Spanner, at time.Time, d time.Duration, end func(ctx context.Context, early bool) (rundir.Event, error)) {
	env.Go(ctx, func(ctx context.Context) error {
		early := ctxtime.Sleep(ctx, time.Until(at.Add(d))) != nil
		if early {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), lastingEndTimeout)
			defer cancel()
		}
		ev, err := end(ctx, early)
		if err == nil {
			if ev.Action == nil {
				ev.Action = &rundir.Action{}
			}
			ev.Action.Name = sp.EndEvent()
			err = env.Record(ev)
		}
		if err != nil && early {
			env.Progress("%s at the end of the timeline: %v", sp.EndEvent(), err)
			return nil
		}
		return err
	})
}

// earlyNote ends an end's progress line when lastFor ended it early.
func earlyNote(early bool) string {
	if early {
		return ", early: the timeline ended first"
	}
	return ""
}

// Awaiter is a kind that waits for node ("" every server) to reach a phase.
type Awaiter interface {
	Awaits() (node, phase string)
}

// Linker is a kind that acts on network links (cuts or shapes them): it runs only on a target
// that puts its engines' peer and client links through proxies it controls (target.Partitioner),
// which the runner checks before anything starts. Links says what it does to them, for the
// refusal, e.g. "partitions a server".
type Linker interface{ Links() string }

// Datagrammer is a kind that sends UDP datagrams to the servers (burst): it cannot run where the
// links are TCP proxies (a Linker's run, or a placement), which the runner checks before
// anything starts. Datagrams says what it sends, for the refusal, e.g. "burst".
type Datagrammer interface{ Datagrams() string }

// WriteAdder is a kind that makes servers write (driver.Workload, for the free-space check).
type WriteAdder interface {
	AddWrites(w *driver.Workload, clients int)
}

// PowerCutter is a kind that cuts servers' power (power_loss): it runs only on a target that can
// (target.PowerCutter), with what that target needs (the local target's disk: block), which the
// runner checks before anything starts. CutsPower says what it does, for the refusal; cuts is
// false when it only kills the engines (unsynced: keep), which any target can.
type PowerCutter interface {
	CutsPower() (what string, cuts bool)
}

// Context is what Check sees of the playbook.
type Context struct {
	Servers, Clients int
	At, End          time.Duration // the entry's offset and the run's duration
	// ZoneDelay is the most the playbook's placement adds to each way of a link (between zones:
	// delay plus jitter); 0 without a placement.
	ZoneDelay time.Duration
	// OwnClient: the engine takes bursts through a client of its own (engine.burst_client), not
	// at the contract's UDP ingress.
	OwnClient bool
}

// Problem is a rule an entry breaks. Key is the entry's key it points at ("" the entry's body);
// Deps are what else the rule read, so a rule on a value that failed to parse stays quiet:
// playbook paths ("duration"), or the entry's own keys as "@key" ("@at", "@every"). Rule names
// the rule for callers that suppress or count them.
type Problem struct {
	Key, Rule string
	Deps      []string
	Msg       string
}

func problem(key, rule string, deps []string, format string, args ...any) Problem {
	return Problem{Key: key, Rule: rule, Deps: deps, Msg: fmt.Sprintf(format, args...)}
}

// Varied says, for the plan line, how a key of the entry reads in a matrix.
type Varied interface {
	// Value is the key's value, or the list of values a matrix gives it.
	Value(key, base string) string
	// Varies reports whether a matrix varies the key.
	Varies(key string) bool
	// At is the entry's offset from load start.
	At() time.Duration
	// Context is the playbook as the entry's Check sees it (without a matrix's values).
	Context() Context
}

// Env is what an action may do to the cluster and the run, and nothing else: the core every run
// has. What only some kinds need is a capability below, asked for by type assertion (Need), as a
// target's are.
type Env interface {
	// Leader is the current leader, "" when none is known.
	Leader() string
	// ResolveNode turns leader | follower | other-follower | node-N into a node, now.
	ResolveNode(ref string) (string, error)
	// Admin calls the engine's admin path on node (engine.AdminSnapshot, ...).
	Admin(ctx context.Context, node, path string) ([]byte, error)
	// Signal signals node's engine; the run counts the node down until Relaunch.
	Signal(ctx context.Context, node, as, signal string) error
	// Relaunch starts node's engine again on its folder.
	Relaunch(ctx context.Context, node string) error
	// Record adds an event to the run's record.
	Record(e rundir.Event) error
	// Progress prints a progress line.
	Progress(format string, args ...any)
	// Go runs fn beside the timeline; its error fails the timeline.
	Go(ctx context.Context, fn func(ctx context.Context) error)
	// Wait waits until node ("" every server) is in phase, for at most timeout; with every
	// server, killed servers' pending relaunches first.
	Wait(ctx context.Context, node, phase string, timeout time.Duration) error
}

// DiskPowerLosser is a run whose servers' data sit on disk models (power_loss on the local
// target).
type DiskPowerLosser interface {
	// PowerLoss drops every write since each file's last fsync from node's disk model, once
	// node's engine (signalled KILL) has exited.
	PowerLoss(ctx context.Context, node string) (diskmodel.Dropped, error)
}

// NodeRebooter is a run whose nodes can lose power by rebooting (power_loss on a stack).
type NodeRebooter interface {
	// Reboots reports whether a power loss reboots the nodes (a stack, target.Rebooter) rather
	// than drops what their disk models hold unsynced.
	Reboots() bool
	// CutPower reboots node without sync and returns the boot it left; the run counts the node
	// down (and killed by the timeline) until Relaunch.
	CutPower(ctx context.Context, node string) (boot string, err error)
	// AwaitBoot waits until node is back in another boot and readies it for its engine (agent,
	// lease, data volume, tuning, samples, watcher) and returns the new boot id; Relaunch then
	// starts the engine afresh on what its disk kept.
	AwaitBoot(ctx context.Context, node, old string) (boot string, err error)
}

// Burster is a run whose load generators send bursts.
type Burster interface {
	// Burst has the load generators send the series asked (its messages, size, count, every and
	// senders, 0: one per client node), calling record with the series it is about to send (its
	// senders, numbering and common start fixed) before anything is sent.
	Burst(ctx context.Context, asked rundir.BurstSeries, record func(rundir.BurstSeries) error) error
}

// BurstSender is a kind that sends bursts the servers' receive buffers must absorb: Sends is
// the series each of its entries asks for (Senders 0: one per client node), from which the plan
// derives the buffer chain's minimums.
type BurstSender interface {
	Sends() rundir.BurstSeries
}

// LinkCutter is a run whose links are routed through proxies it can cut (a Linker's run).
type LinkCutter interface {
	// Isolate cuts every peer and client link to or from the nodes (what is sent on an open
	// connection is held, new connections are refused), and Heal heals them; each returns how
	// many links it changed. They fail on a run whose links are not routed (no Linker in it).
	Isolate(ctx context.Context, nodes ...string) (int, error)
	Heal(ctx context.Context, nodes ...string) (int, error)
}

// LinkShaper is a run whose routed links it can delay.
type LinkShaper interface {
	// Delay adds shape to each way of every peer and client link between node and any of peers
	// (no peers: every link of node) on top of the placement's, measures each changed pair's
	// round trip through its link, and returns those, how many links it changed, and an undo
	// that takes the shape off again (how many links it changed back). It fails on a run whose
	// links are not routed.
	Delay(ctx context.Context, shape linkproxy.Shape, node string, peers ...string) (rtts []linkproxy.PairProbe, links int, undo func() int, err error)
}

// StatusReader is a run that reads a server's engine status (GET /status), e.g. how its engine
// steps down (engine.Status.StepDown).
type StatusReader interface {
	EngineStatus(ctx context.Context, node string) (engine.Status, error)
}

// LeaderWatcher is a run that follows the leader over time.
type LeaderWatcher interface {
	// WaitStableLeader waits until every server is ready and the leader has not changed for
	// stable, until deadline.
	WaitStableLeader(ctx context.Context, stable time.Duration, deadline time.Time) error
}

// RecordAction records an action event of a kind that owns its payload (rundir.Action.Payload):
// name is the kind's, payload its own type, kept in events.jsonl as its JSON.
func RecordAction(env Env, node, name string, payload any) error {
	return record(env, time.Time{}, node, rundir.ActionName(name), "", payload)
}

// Need is env's capability C, or an error naming what the kind wanted it for.
func Need[C any](env Env, what string) (C, error) {
	c, ok := env.(C)
	if !ok {
		var zero C
		return zero, fmt.Errorf("%s: this run cannot (%T has no %T)", what, env, (*C)(nil))
	}
	return c, nil
}

// Kind makes a kind's Spec with its defaults.
type Kind func() Spec

// builtin are the kinds of the playbook language, in the order errors list them. They are the
// language itself, not an offer of the binary: a resolved playbook's JSON (a run folder's, a
// resumed sweep's) decodes its entries through Action.UnmarshalJSON, which no caller can hand a
// registry, and the analysis of an old run folder must know every kind's end event. So they are
// declared here, not registered by init(), and Register adds only a test's kind.
var builtin = []Kind{
	func() Spec { return &Snapshot{} },
	func() Spec { return &Kill{Signal: DefaultSignal} },
	func() Spec { return &StepDown{} },
	func() Spec { return &Burst{Count: DefaultBurstCount, Size: DefaultBurstSize} },
	func() Spec { return &WaitFor{Timeout: DefaultWaitForTimeout} },
	func() Spec { return &PowerLoss{Nodes: DefaultPowerLossNodes, Unsynced: UnsyncedDrop} },
	func() Spec { return &Partition{} },
	func() Spec { return &Delay{} },
	func() Spec { return &GC{Node: "leader"} },
	func() Spec { return &CPUHog{Node: "leader"} },
}

var (
	mu           sync.RWMutex
	kinds, order = index(builtin) // order: the order errors list the kinds in
)

// index is ks by name, and their names in order; two kinds of one name panic.
func index(ks []Kind) (map[string]Kind, []string) {
	byName := map[string]Kind{}
	var names []string
	for _, k := range ks {
		name := k().Kind()
		if _, dup := byName[name]; dup {
			panic("actions: two kinds named " + name)
		}
		byName[name] = k
		names = append(names, name)
	}
	return byName, names
}

// Register adds a kind to the language's (a test's own); a second kind of one name panics (a
// programming error).
func Register(k Kind) {
	name := k().Kind()
	mu.Lock()
	defer mu.Unlock()
	if _, dup := kinds[name]; dup {
		panic("actions: kind " + name + " registered twice")
	}
	kinds[name] = k
	order = append(order, name)
}

// New is a Spec of the named kind with its defaults.
func New(name string) (Spec, bool) {
	mu.RLock()
	defer mu.RUnlock()
	k, ok := kinds[name]
	if !ok {
		return nil, false
	}
	return k(), true
}

// Names are the registered kinds, in registration order.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	return slices.Clone(order)
}

// Clone copies a Spec (a pointer to a struct of values).
func Clone(s Spec) Spec {
	if s == nil {
		return nil
	}
	v := reflect.ValueOf(s)
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	return c.Interface().(Spec)
}

// FieldOf is s's field key.
func FieldOf(s Spec, key string) (Field, bool) {
	for _, f := range s.Fields() {
		if f.Key == key {
			return f, true
		}
	}
	return Field{}, false
}

// Keys are s's field keys.
func Keys(s Spec) []string {
	fs := s.Fields()
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Key
	}
	return out
}
