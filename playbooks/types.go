package playbooks

import (
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/linkproxy"
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
	Disk diskmodel.Limits `json:"disk,omitzero"`
	// Placement puts the nodes in zones with a distance between them; zero: side by side.
	Placement linkproxy.Placement `json:"placement,omitzero"`
	Warmup    time.Duration       `json:"warmup"`   // probes before this offset are excluded from figures
	Duration  time.Duration       `json:"duration"` // from load start to end of run
	Timeline  []Action            `json:"timeline"`
	// AllowAllDown lets the timeline have every server down at once (a whole-cluster power loss,
	// or a kill while the others have no power): nothing serves until one is back, which is
	// refused unless the playbook says that is the experiment; the plan names each such moment.
	AllowAllDown bool   `json:"allow_all_down,omitempty"`
	Matrix       []Axis `json:"matrix,omitempty"`
	Rounds       int    `json:"rounds"`
	// SnapshotWarmFrom is the first snapshot of each run (1-based, timeline order) whose take and
	// pause the sweep report counts as warm; 0 means the default, all but the first.
	SnapshotWarmFrom int `json:"snapshot_warm_from,omitempty"`

	// DiskVolume is disk.volume: the stack's data volume (inventory.Volume) the engine data
	// lives on; "": the first. Only a target with data volumes has any (docs/infra.md).
	DiskVolume string `json:"disk_volume,omitempty"`

	// CauseSources is cause_sources: "off" turns the always-on cause sources off (the
	// scheduler and pressure samples on every node, the reference engine's GC pause record), so
	// a matrix of on against off prices them; empty is on.
	CauseSources string `json:"cause_sources,omitempty"`

	pos map[string]Pos // field path -> where its value stands in Source (PosOf)
}

// Cluster is how many nodes of each role.
type Cluster struct {
	Servers int `json:"servers"`
	Clients int `json:"clients"`
}

// Engine is the engine section: which driver runs the engine, how it is started (the command
// driver), the settings the driver has (its table: the reference engine's own, or the ones a
// command-driven playbook declares) and the values the playbook asks for. Its JSON writes each
// value beside driver and command, as the playbook does ("sync_level": 2): MarshalJSON in
// settings.go.
type Engine struct {
	Driver  string         `json:"driver,omitempty"` // a registered driver (engine/driver); empty is driver.Default
	Command *EngineCommand `json:"command,omitempty"`
	// Declared are the settings the playbook declares for its engine (engine.settings, or the
	// file engine.settings_file names), names as the engine knows them.
	Declared     driver.Table `json:"settings,omitempty"`
	SettingsFile string       `json:"settings_file,omitempty"`
	// OrderBytes is engine.bytes_per_order: the resident memory one resting order costs a server
	// of an engine whose driver does not measure its own (driver.MemoryEstimator); 0: not given.
	OrderBytes int64 `json:"bytes_per_order,omitempty"`
	// Recording is engine.recording: "on" has the agent record where the engine's time went
	// with the engine's own recorder (Java Flight Recorder on a JVM engine, the Go flight
	// recorder's GET /trace on a Go engine), dumped after every timeline action and at the end
	// (docs/engines.md, "Inside a JVM engine"); "windows" records only around the timeline's
	// windows (RecordingWindows); "off"; empty is DefaultRecording.
	Recording string `json:"recording,omitempty"`
	// AdminGC is engine.admin_gc: a command-driven engine answers POST /gc (engine.AdminGC), so
	// the gc action may call it.
	AdminGC bool `json:"admin_gc,omitempty"`
	// BurstArgs is engine.burst_client: the arguments with which engine.command.binary, run on a
	// client node, sends a burst through the engine's own client (a user's gateway) instead of
	// the contract's UDP ingress; the runner appends the path of the burst's request.
	BurstArgs string `json:"burst_client,omitempty"`
	// BookCaptureArgs is engine.book_capture: the arguments with which engine.command.binary, run
	// on a server node, captures the engine's own snapshot of a preloaded book from a stopped
	// node's data folder, so later runs install it instead of preloading (BookCapture).
	BookCaptureArgs string `json:"book_capture,omitempty"`
	// PreloadRate is engine.preload_rate: the orders per second the engine preloads at, as its
	// playbook declares, for estimates when the results folder holds no earlier run of it; 0: not given.
	PreloadRate float64 `json:"preload_rate,omitempty"`
	// Values are the settings asked for, canonical (driver.Setting.Canon); a setting with a
	// default in the table is always asked, one without is asked only when the playbook sets it.
	Values driver.Values `json:"-"`
	// drivers are the drivers engine.driver may name, handed to Parse; nil in a playbook decoded
	// from a manifest, which carries its resolved settings instead (rundir.Manifest.Resolved).
	drivers *driver.Registry
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

// Action is one timeline entry. Actions run in order; At is the earliest offset from load start,
// and a wait_for holds back every later action until its condition holds. Spec is the entry's
// kind with its settings (package actions); its JSON is keyed by the kind, as in the playbook.
type Action struct {
	At   time.Duration `json:"at"`
	Kind string        `json:"kind"`
	Spec actions.Spec  `json:"-"`
	Pos  Pos           `json:"-"` // where it stands in the source, for errors found later
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
	// LocalCPUs are the local target's CPUs, which its every node shares (0: this machine's).
	LocalCPUs int `json:"-"`
}

// PlannedRun is one run of a plan.
type PlannedRun struct {
	Index    int               `json:"index"`
	Round    int               `json:"round"`
	Settings map[string]string `json:"settings,omitempty"` // the matrix values of this run
	Playbook *Playbook         `json:"playbook"`           // with the matrix values applied
}

// The values of cause_sources.
const (
	CauseSourcesOn  = "on"
	CauseSourcesOff = "off"
)

// CauseSourcesOff reports whether the playbook turned the always-on cause sources off.
func (p *Playbook) CauseSourcesOff() bool { return p.CauseSources == CauseSourcesOff }
