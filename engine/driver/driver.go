// Package driver is the seam between the rig and an engine: a Driver names an engine kind and
// its settings table, and everything else a driver can do is an optional capability the rig
// checks by type assertion, the way hashicorp/raft checks an FSM for BatchingFSM or Jepsen a db
// for Kill and Pause. The orchestrator holds a Driver resolved once, when the plan is built, and
// branches only on capabilities; it never names an engine.
//
// A binary hands the drivers it offers down as a Registry (cmd/rig builds it from the reference
// engine's, engine/driver/reference, and the command driver's, engine/command); nothing
// registers itself.
package driver

import (
	"io"
	"slices"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/bookgen"
)

// Default is the driver of a playbook that names none: the rig's own engine.
const Default = "reference"

// Well-known setting names, the engine contract's (docs/engines.md): an engine with these knobs
// names them so in /status config, and the estimate model and the report's snapshot tables read
// them.
const (
	SyncLevel        = "sync_level"        // integer: 0 no sync, 1 fdatasync, 2 fsync
	SnapshotBlock    = "snapshot_block"    // bytes per snapshot write (a sync after each at level > 0)
	EncodeThreads    = "encode_threads"    // integer: snapshot encoders
	HeartbeatTimeout = "heartbeat_timeout" // duration: a follower's wait before it stands
	ElectionTimeout  = "election_timeout"  // duration: a candidate's wait for votes
)

// Contract is the contract's settings as any engine may have them: no defaults (an engine keeps
// its own unless a playbook asks) and no ranges but the sync levels', which the contract defines.
// A driver whose engine is not the rig's offers them besides its own.
var Contract = Table{
	{Name: SyncLevel, Kind: Integer, Min: "0", Max: "2", Help: "0 (no sync), 1 (fdatasync) or 2 (fsync)"},
	{Name: SnapshotBlock, Kind: Bytes, Help: "bytes per snapshot write, e.g. 1MiB or 16MiB"},
	{Name: EncodeThreads, Kind: Integer, Min: "1", Help: "snapshot encode threads, 1 or more"},
	{Name: HeartbeatTimeout, Kind: Duration, Help: "a duration, e.g. 1s, 100ms"},
	{Name: ElectionTimeout, Kind: Duration, Help: "a duration, e.g. 1s, 100ms"},
}

// Driver is one kind of engine.
type Driver interface {
	// Name is what a playbook's engine.driver says.
	Name() string
	// Settings is the driver's settings table. declared are the playbook's own
	// (engine.settings or engine.settings_file); a driver whose settings are fixed refuses them.
	Settings(declared Table) (Table, error)
}

// Values are the settings a run asks for: name -> canonical value (Setting.Canon).
type Values map[string]string

// Problem is a rule over several settings that a combination of values breaks.
type Problem struct {
	Setting string   // where to point
	Deps    []string // the other settings the rule read
	Rule    string   // a short name for the rule
	Msg     string
}

// ValueChecker is a driver with rules over several of its settings (raft's election timeout
// may not be shorter than its heartbeat timeout), checked in every combination of a plan.
type ValueChecker interface {
	CheckValues(v Values) []Problem
}

// Configurer is a driver whose engine reads its settings from the node's config file
// (engine.Config, written by the agent): it fills them in.
type Configurer interface {
	Configure(cfg *engine.Config, v Values) error
}

// Templater is a driver whose engine is started from the playbook's engine.command templates
// (engine/command): settings reach the engine rendered into its command line, environment or
// config file, so the rig checks their carriage in /proc before their effect.
type Templater interface {
	// TemplateSettings are the values templates see as .Settings, each rendered
	// (Setting.RenderValue).
	TemplateSettings(t Table, v Values) map[string]string
}

// Workload is what a run makes an engine write, for a WriteEstimator.
type Workload struct {
	Orders        int64 // resting orders preloaded through the log
	BookInstalled bool  // a stored book is restored instead of a preload
	Probes        int64 // single orders (IOC: they rest nowhere)
	BurstOrders   int64 // orders sent in bursts
	Snapshots     int   // snapshots the timeline asks for
	PreloadBatch  int   // orders per preload log entry
}

// Writes is one server's estimated writes into its data folder.
type Writes struct {
	Orders        int64 // resting orders in each snapshot
	SnapshotBytes int64 // one snapshot of them
	Snapshots     int   // snapshot files on disk at once, at most
	LogBytes      int64 // the replicated log
}

// Total is every byte of w.
func (w Writes) Total() int64 { return w.SnapshotBytes*int64(w.Snapshots) + w.LogBytes }

// WriteEstimator is a driver that knows what its engine writes, so a run is refused before it
// starts when the data would not fit (erring high where it is not exact).
type WriteEstimator interface {
	EstimateWrites(w Workload) Writes
}

// MemoryEstimator is a driver that knows how much memory its engine holds per resting order, so
// a run whose book cannot fit in its hosts' memory is refused by rig validate and before any
// engine starts (docs/architecture.md, "Memory before a run"), instead of the kernel killing a
// process mid-run. A command-driven engine declares the figure in its playbook instead
// (engine.bytes_per_order).
type MemoryEstimator interface {
	// BytesPerOrder is the resident memory one resting order costs a server at its peak (erring
	// high), as measured on the engine itself.
	BytesPerOrder() int64
}

// BookInstaller is a driver whose engine can restore a book written outside it: the rig builds
// the preload's book once, stores it, and later runs put it in every server's data folder
// instead of preloading through the log.
type BookInstaller interface {
	// BookFile is where in a node's data folder the stored book goes (slash-separated).
	BookFile() string
	// WriteBook writes the book a preload of shape builds (bookgen.Orders), in the engine's
	// snapshot format.
	WriteBook(w io.Writer, shape bookgen.Shape) (BookStats, error)
}

// BookStats is what writing a stored book built.
type BookStats struct {
	Orders    int64         // resting orders
	Filled    int64         // quantity traded while it was built: must be 0
	StateHash string        // the book's state hash, as the engine reports it once restored
	Elapsed   time.Duration // building and writing it
}

// Recorder is a driver whose engine keeps its own recording of where its time went (the
// reference engine's runtime/trace flight recorder) only when its settings ask for it.
// RecordingValues are those settings: a run that collects engines' recordings asks them of every
// server beside the playbook's own (WithRecording).
type Recorder interface {
	RecordingValues() Values
	// RecordingReach is how far back one take of the recording reaches with settings v, and the
	// setting that sizes it; 0 when the recorder is off in v (or keeps everything since the last
	// take). A run takes the recording after every timeline action and at the end, so a reach
	// shorter than the stretch between two takes loses the start of it (playbooks refuse that).
	RecordingReach(v Values) (time.Duration, string)
}

// WithRecording is asked plus d's RecordingValues where the playbook set none of them (its own
// value wins); asked itself when d is not a Recorder.
func WithRecording(d Driver, asked Values) Values {
	r, ok := d.(Recorder)
	if !ok {
		return asked
	}
	out := Values{}
	for k, v := range r.RecordingValues() {
		out[k] = v
	}
	for k, v := range asked {
		out[k] = v
	}
	return out
}

// AdminOfferer is a driver whose engine answers optional admin calls beyond the contract's
// (engine.AdminGC). A timeline action that calls one (actions.EngineCaller) is refused by rig
// validate for an engine that does not; a command-driven engine offers them through its
// playbook instead (engine.admin_gc).
type AdminOfferer interface {
	OffersAdmin(path string) bool
}

// Capabilities lists the optional capabilities d has, by interface name, for plans, manifests
// and docs/architecture.md's table.
func Capabilities(d Driver) []string {
	var out []string
	if _, ok := d.(ValueChecker); ok {
		out = append(out, "ValueChecker")
	}
	if _, ok := d.(Configurer); ok {
		out = append(out, "Configurer")
	}
	if _, ok := d.(Templater); ok {
		out = append(out, "Templater")
	}
	if _, ok := d.(WriteEstimator); ok {
		out = append(out, "WriteEstimator")
	}
	if _, ok := d.(MemoryEstimator); ok {
		out = append(out, "MemoryEstimator")
	}
	if _, ok := d.(BookInstaller); ok {
		out = append(out, "BookInstaller")
	}
	if _, ok := d.(Recorder); ok {
		out = append(out, "Recorder")
	}
	if _, ok := d.(AdminOfferer); ok {
		out = append(out, "AdminOfferer")
	}
	return slices.Clip(out)
}

// LongestInEffect is the longest value of duration setting name that any server reports in effect
// (GET /status config, per server, as the manifest keeps it: rundir.Manifest.Engines), read by the
// kind t gives it; 0 when none reports one that reads as a duration. The load generator's leader
// timeout and the analysis's leader-change window both come from the engines' raft timers so.
func (t Table) LongestInEffect(name string, eff map[string]engine.Reported) time.Duration {
	s, ok := t.Lookup(name)
	if !ok {
		s = Setting{Name: name, Kind: Duration}
	}
	var out time.Duration
	for _, rep := range eff {
		v, err := s.Reported(rep[name])
		if err != nil {
			continue
		}
		if d, err := time.ParseDuration(v); err == nil {
			out = max(out, d)
		}
	}
	return out
}
