package playbooks

import (
	"time"

	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/playbooks/estimate"
)

// Playbook is one experiment, parsed and validated. Every quantity is already in base units
// (durations, bytes, counts, per-second rates), so the runner never parses text.
type Playbook struct {
	Name        string    `json:"name"`
	Description string    `json:"description,omitempty"`
	Source      string    `json:"source"` // the file it came from (or "embedded:NAME")
	Cluster     Cluster   `json:"cluster"`
	Engine      Engine    `json:"engine"`
	Tuning      []Setting `json:"tuning,omitempty"` // kernel settings, in file order
	Preload     Preload   `json:"preload"`
	Load        Load      `json:"load"`
	// Disk is the disk model under every server's engine data; zero: the target's own disk.
	Disk     diskmodel.Limits `json:"disk,omitzero"`
	Warmup   time.Duration    `json:"warmup"`   // probes before this offset are excluded from figures
	Duration time.Duration    `json:"duration"` // from load start to end of run
	Timeline []Action         `json:"timeline"`
	Matrix   []Axis           `json:"matrix,omitempty"`
	Rounds   int              `json:"rounds"`
	// SnapshotWarmFrom is the first snapshot of each run (1-based, timeline order) whose take and
	// pause the sweep report counts as warm; 0 means the default, all but the first.
	SnapshotWarmFrom int `json:"snapshot_warm_from,omitempty"`
}

// Cluster is how many nodes of each role.
type Cluster struct {
	Servers int `json:"servers"`
	Clients int `json:"clients"`
}

// Engine is the engine section: which driver runs the engine, how it is started (the command
// driver), the settings the driver has (its table: the reference engine's own, or the ones a
// command-driven playbook declares) and the values the playbook asks for. Its JSON writes each
// value beside driver and command, as the playbook does ("sync_level": 2); engine/json.go.
type Engine struct {
	Driver  string         `json:"driver,omitempty"` // a registered driver (engine/driver); empty is driver.Default
	Command *EngineCommand `json:"command,omitempty"`
	// Declared are the settings the playbook declares for its engine (engine.settings, or the
	// file engine.settings_file names), names as the engine knows them.
	Declared     driver.Table `json:"settings,omitempty"`
	SettingsFile string       `json:"settings_file,omitempty"`
	// Values are the settings asked for, canonical (driver.Setting.Canon); a setting with a
	// default in the table is always asked, one without is asked only when the playbook sets it.
	Values driver.Values `json:"-"`
}

// Setting is one kernel tuning key and value, e.g. {"vm.dirty_ratio","20"} or {"thp","never"}.
type Setting struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Preload is the resting book built before the probe stream starts.
type Preload struct {
	Orders      int64 `json:"orders"`
	Instruments int   `json:"instruments"`
}

// Load is the client stream during the run.
type Load struct {
	ProbeRate float64 `json:"probe_rate"` // probes per second, open loop
	// Spin busy-waits the last stretch before each probe is due instead of sleeping it (a sleep
	// wakes tens of µs late); it costs up to Spin × ProbeRate of a CPU on the client.
	Spin time.Duration `json:"spin,omitempty"`
}

// Action kinds.
const (
	ActSnapshot = "snapshot"
	ActKill     = "kill"
	ActStepDown = "step_down"
	ActBurst    = "burst"
	ActWaitFor  = "wait_for"
)

// Action is one timeline entry. Actions run in order; At is the earliest offset from load start,
// and a wait_for holds back every later action until its condition holds.
type Action struct {
	At      time.Duration `json:"at"`
	Kind    string        `json:"kind"`
	Kill    *Kill         `json:"kill,omitempty"`
	WaitFor *WaitFor      `json:"wait_for,omitempty"`
	Burst   *Burst        `json:"burst,omitempty"`
	Pos     Pos           `json:"-"` // where it stands in the source, for errors found later
}

// Kill stops a node with a signal and optionally relaunches it on the same folder.
type Kill struct {
	Node          string        `json:"node"`   // leader | follower | other-follower | node-N
	Signal        string        `json:"signal"` // KILL | TERM
	RelaunchAfter time.Duration `json:"relaunch_after,omitempty"`
}

// WaitFor blocks the timeline until a node (default: every server) reaches a phase, and with
// StableLeader until every server is ready and the leader has not changed for that long (ready
// alone is sticky: it holds through an election).
type WaitFor struct {
	Phase        string        `json:"phase"` // ready
	Node         string        `json:"node,omitempty"`
	Timeout      time.Duration `json:"timeout"`
	StableLeader time.Duration `json:"stable_leader,omitempty"`
}

// MaxSendersPerClient is the most burst senders one client node runs (the load generator's
// limit: each is a socket and a 64 MiB retransmit ring).
const MaxSendersPerClient = 16

// Burst sends Messages at wire speed, Count times, Every apart: UDP datagrams of Size bytes to
// the leader's UDP ingress, from Senders senders at once, each sending Messages.
type Burst struct {
	Messages int           `json:"messages"`
	Every    time.Duration `json:"every"`
	Count    int           `json:"count"`
	Size     int           `json:"size"`              // bytes per datagram
	Senders  int           `json:"senders,omitempty"` // 0: one per client node
}

// Axis is one matrix dimension: a playbook field path and the values it takes.
type Axis struct {
	Key    string   `json:"key"` // e.g. "preload.orders"
	Values []string `json:"values"`
}

// Pos is a place in a playbook file.
type Pos struct {
	File         string
	Line, Column int
}

// Plan is what a playbook expands to: every run with its resolved playbook, in execution order
// (rounds interleaved: round 1 of every combination, then round 2, ...).
type Plan struct {
	Playbook *Playbook    `json:"playbook"`
	Runs     []PlannedRun `json:"runs"`
	// Model and Target drive the estimates (nil, "": this machine's defaults on the local target).
	Model  *estimate.Model `json:"-"`
	Target string          `json:"-"`
	// BookStored, if set, says whether a run's book is already in the book store, so even the
	// first run that needs it will install it rather than preload.
	BookStored func(run *Playbook) bool `json:"-"`
}

// PlannedRun is one run of a plan.
type PlannedRun struct {
	Index    int               `json:"index"`
	Round    int               `json:"round"`
	Settings map[string]string `json:"settings,omitempty"` // the matrix values of this run
	Playbook *Playbook         `json:"playbook"`           // with the matrix values applied
}
