package analysis

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/rig-dev/rig/agent/disk"
	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/linkproxy"
	"github.com/rig-dev/rig/rundir"
)

// Summary is every figure the report shows, machine-readable (summary.json). Its JSON field
// names are a contract other tools read: add fields, never rename them.
//
// Conventions, also written under the report's tables:
//   - Times (*_s) are seconds from the load_start event; they are negative before it.
//   - Probes whose intended send time precedes warmup_end are excluded from every figure and
//     only counted (WarmupProbes).
//   - Latency is measured from the intended send time (open loop), in microseconds (*_us) or
//     milliseconds (*_ms).
//   - Percentiles are nearest-rank over answered probes; lost probes are counted separately.
//     p99 is only given from n >= 100 and p99.9 only from n >= 1000 (the field is omitted).
type Summary struct {
	RunID    string `json:"run_id"`
	Playbook string `json:"playbook,omitempty"`
	Status   string `json:"status"` // ok | failed | interrupted from the manifest; "unknown" without one; "abandoned" (controller.go)
	// Error is the run's error from the manifest: its cause first (an engine that died outside
	// the schedule: node, role, signal or exit code, the end of its log).
	Error string `json:"error,omitempty"`
	// ControllerLastHeard is when an abandoned run's controller was last heard from.
	ControllerLastHeard *time.Time `json:"controller_last_heard,omitempty"`
	// StatusReason says why the analysis failed a run the manifest calls ok (the load overran its
	// duration by more than 10 %, or most probes were lost; see health.go).
	StatusReason string   `json:"status_reason,omitempty"`
	Settings     Settings `json:"settings"`

	Nodes map[string]NodeFinal `json:"nodes"` // final engine status per server node
	// StateHashAgree: every server node reported the same non-empty hash at one log position
	// (StateHashes says what was compared, or why nothing was).
	StateHashAgree bool      `json:"state_hash_agree"`
	StateHashes    Agreement `json:"state_hashes"`
	// Traps: what the engine harness caught of the user's codec and service, per node (traps.go).
	Traps Traps `json:"traps,omitempty"`

	Probes       Stats `json:"probes"`        // every post-warm-up probe
	WarmupProbes int   `json:"warmup_probes"` // probes sent before warmup_end: excluded from all figures
	Normal       Stats `json:"normal"`        // post-warm-up probes outside every window of NormalLeftOut
	// NormalLeftOut are the windows Normal leaves out: snapshots and every fault (failover.go).
	NormalLeftOut []FaultWindow `json:"normal_left_out"`

	Snapshots []SnapshotRow `json:"snapshots"`  // one per snapshot action
	Restarts  []RestartRow  `json:"restarts"`   // one per kill action
	StepDowns []StepDownRow `json:"step_downs"` // one per step_down action

	// Forces: the disk model's fsyncs per snapshot window and node (forces.go); absent without
	// a disk model that records them.
	Forces *Forces `json:"forces,omitempty"`
	// ClientConn: the load generator's dials, resends and held probes, in total and per fault
	// (clientconn.go); absent without its stats.
	ClientConn *ClientConn `json:"client_conn,omitempty"`

	// Failovers: every step_down and kill of the leader as an event (failover.go): detection,
	// election, client gap, back to normal; pooled over the run's faults in RowPooled.
	Failovers []FailoverRow `json:"failovers"`
	// RowPooled: every row kind's rows pooled figure by figure (its declared figures), by kind.
	// A summary.json written before it also kept the failovers' apart as failover_pooled, which
	// nothing reads.
	RowPooled RowPooled `json:"pooled,omitempty"`
	// HandOffs: each failover as the step-down guide measures a hand-off (handoff.go): service
	// gap, detection, election, client learning, and every server's states around it.
	HandOffs []HandOff  `json:"hand_offs"`
	Bursts   []BurstRow `json:"bursts"` // one per micro-burst the load generator sent
	// KindRows: the rows of the kinds with rows of their own (actions.Rower), by kind: one per
	// window of their events (kindrows.go).
	KindRows map[string][]KindRow `json:"kind_rows,omitempty"`
	// Durability: every acknowledged order checked against what the servers hold at the end
	// (durability.go); absent without a ledger. A lost acknowledged order leads the report.
	Durability *Durability `json:"durability,omitempty"`
	// UDPRcvbufErrors is, per node, the growth of /proc/net/snmp Udp RcvbufErrors over the run
	// (from the OS samples): datagrams the kernel dropped for want of receive buffer.
	UDPRcvbufErrors map[string]uint64 `json:"udp_rcvbuf_errors,omitempty"`
	// UDPIngress is, per server, the UDP socket receive buffer the engine asked for and what the
	// kernel granted (the reference engine; docs/wire.md).
	UDPIngress map[string]UDPIngress `json:"udp_ingress,omitempty"`
	// NotApplied names the playbook settings of this run that had no effect because they were
	// not applied (e.g. kernel tuning skipped on the local target), with why.
	NotApplied []NotApplied `json:"not_applied,omitempty"`

	// AgentCPU is, per node, the agent's own CPU share over the run (manifest agent_cpu, from
	// its OS samples): the rig's overhead on the node, in percent of one core.
	AgentCPU map[string]rundir.CPUShare `json:"agent_cpu,omitempty"`
	// The disk and the links the run had, asked beside read back where they take effect: the
	// manifest's records (disk_models, disk_checks, link_rtts, link_rtts_load), so the report
	// can show them beside the figures they shape.
	// Placement is where the nodes were: on a stack its rig:placement and each node's AZ (the
	// manifest's inventory), on the local target the playbook's zones and their distance.
	Placement    *Placement                  `json:"placement,omitempty"`
	DiskModels   map[string]diskmodel.Record `json:"disk_models,omitempty"`
	DiskChecks   map[string]disk.VolumeCheck `json:"disk_checks,omitempty"`
	LinkRTTs     []linkproxy.PairProbe       `json:"link_rtts,omitempty"`
	LinkRTTsLoad []linkproxy.PairProbe       `json:"link_rtts_load,omitempty"`

	LeaderAtLoadStart string       `json:"leader_at_load_start,omitempty"`
	LeaderChanges     []LeaderMark `json:"leader_changes"` // a node became leader after load_start
	// UnplannedLeaderChanges are the leader changes no step_down, kill or partition of the leader asked for
	// (see leader.go); the figures whose windows hold one carry unplanned_leader_change.
	UnplannedLeaderChanges []LeaderMark `json:"unplanned_leader_changes"`
	// LeaderWindow: how long after an action a leader change still counts as its, from the
	// engines' raft timers in effect, and the rule the report quotes (leader.go).
	LeaderWindow LeaderWindow `json:"leader_change_window"`
	Actions      []ActionMark `json:"actions"` // every timeline action, in order

	// GCPauses: per node, a JVM engine's GC pauses in the measured window (from its GC log).
	GCPauses []GCRow `json:"gc_pauses,omitempty"`
	// Spike: the slowest probe when no action explains it, with the engines' log lines then.
	Spike *Spike `json:"spike,omitempty"`
	// Excursions: every stretch of probes at ≥ 10× p50 and ≥ 1 ms, each with its causes or
	// marked unexplained and the windows' table of where its time went, and periodic series of
	// them (excursions.go).
	Excursions *Excursions `json:"excursions,omitempty"`
	// HostPressure: per node (the machine once on the local target), the share of the measured
	// window its CPUs, I/O and memory were stalled on (psi.go).
	HostPressure []HostPressure `json:"host_pressure,omitempty"`
	// CauseSourcesOff: the playbook turned the always-on cause sources off (cause_sources: off),
	// so what they would explain is missing by design; the report says so where it lists causes.
	CauseSourcesOff bool `json:"cause_sources_off,omitempty"`
	// Windows: where the time went in every snapshot, restart, failover and burst window, per
	// node and thread (windows.go).
	Windows []TimeWindow `json:"windows,omitempty"`

	// Stages: estimate and actual time of each stage of the run; OverheadS: its wall time minus
	// the playbook's duration; Book: where its resting book came from (from the manifest).
	Stages    []rundir.StageTime `json:"stages,omitempty"`
	OverheadS *float64           `json:"overhead_s,omitempty"`
	Book      *rundir.BookUse    `json:"book,omitempty"`

	Warnings []string `json:"warnings"` // measurement traps and gaps in the data; empty means none
	Plots    []string `json:"plots,omitempty"`

	data *runData // the inputs, kept so WriteOutputs can plot without reading them again
}

// Settings is the run-settings line of the report. Fields from the playbook are omitted when the
// manifest does not carry them.
type Settings struct {
	CPUs         int       `json:"cpus,omitempty"`
	LoadAvgStart []float64 `json:"load_avg_start,omitempty"` // 1, 5, 15 minutes
	LoadAvgEnd   []float64 `json:"load_avg_end,omitempty"`
	ServerNodes  int       `json:"server_nodes"`
	LoadS        float64   `json:"load_s"`                     // load_start to load_end (or run end); 0 if the load never started
	WarmupS      float64   `json:"warmup_s"`                   // load_start to warmup_end
	ProbeRate    float64   `json:"probe_rate_per_s,omitempty"` // measured: probes sent / LoadS

	// The engine's settings in effect, as the servers reported them (the asked value where none
	// reports it); NotAsAsked names every setting in effect with another value than asked.
	SyncLevel        *int     `json:"sync_level,omitempty"`
	SnapshotBlock    *int64   `json:"snapshot_block,omitempty"`
	EncodeThreads    *int     `json:"encode_threads,omitempty"`
	NotAsAsked       []string `json:"not_as_asked,omitempty"`
	PreloadOrders    *int64   `json:"preload_orders,omitempty"`
	PlannedProbeRate *float64 `json:"planned_probe_rate_per_s,omitempty"`
	PlannedDurationS *float64 `json:"planned_duration_s,omitempty"` // the playbook's duration
}

// UDPIngress is a server's UDP receive buffer: asked for, granted (getsockopt) and the
// net.core.rmem_max that caps it.
type UDPIngress struct {
	Asked   int  `json:"asked"`
	Granted int  `json:"granted"`
	RmemMax int  `json:"rmem_max"`
	Clamped bool `json:"clamped"` // granted less than twice the request: rmem_max capped it
}

// NotApplied is a setting that had no effect: it was never applied.
type NotApplied struct {
	Setting string `json:"setting"` // e.g. tuning.net.core.rmem_max
	Value   string `json:"value"`
	Reason  string `json:"reason"`
}

// NodeFinal is a server node's final status (its status.json).
type NodeFinal struct {
	StateHash string `json:"state_hash"`
	// StateHashAt is the log position StateHash is of (engine.Status.StateHashPosition); a
	// snapshot's hash is of an earlier position than AppliedIndex.
	StateHashAt uint64 `json:"state_hash_at,omitempty"`
	// StateHashOfSnapshot: StateHash hashes the bytes of the snapshot at StateHashAt, not the state.
	StateHashOfSnapshot bool   `json:"state_hash_of_snapshot,omitempty"`
	Phase               string `json:"phase"`
	Role                string `json:"role,omitempty"`
	AppliedIndex        uint64 `json:"applied_index"`
	// Orders is absent when the engine does not count them (engine.UnsupportedOrders).
	Orders        *int `json:"orders,omitempty"`
	StatusMissing bool `json:"status_missing,omitempty"` // seen in events, but no readable status.json
}

// Agreement results.
const (
	AgreementAgree      = "agree"
	AgreementDiffer     = "differ"
	AgreementNotChecked = "not checked"
)

// Agreement is the comparison of the nodes' final state hashes, made only between hashes of one
// log position.
type Agreement struct {
	Result   string `json:"result"`             // Agreement*
	Position uint64 `json:"position,omitempty"` // the log position compared at (agree, differ)
	// OfSnapshot: the hashes compared are of snapshot bytes, which may differ where state agrees.
	OfSnapshot bool   `json:"of_snapshot,omitempty"`
	Reason     string `json:"reason,omitempty"` // why not checked, or what differs
}

// Stats summarises the probes of one window. P50/Max are omitted when no probe was answered,
// P90 below n = 10, P99 below n = 100 and P99.9 below n = 1000.
type Stats struct {
	N      int      `json:"n"`    // answered probes: the percentiles are over these
	Lost   int      `json:"lost"` // probes never answered
	P50Us  *float64 `json:"p50_us,omitempty"`
	P90Us  *float64 `json:"p90_us,omitempty"` // from n >= 10
	P99Us  *float64 `json:"p99_us,omitempty"`
	P999Us *float64 `json:"p999_us,omitempty"`
	MaxUs  *float64 `json:"max_us,omitempty"`
}

// Window is Stats over the probes whose intended send time lies in [FromS, ToS).
type Window struct {
	Stats
	FromS float64 `json:"from_s"`
	ToS   float64 `json:"to_s"`
	// Open: the window never closed (never relaunched, or never ready); ToS is where it was cut:
	// the node's next kill, or the end of load.
	Open bool `json:"open,omitempty"`
	// ExcludedS is how much of [FromS, ToS) was left out as snapshot windows and the drain after
	// each (all_up only); DrainS is the drain's part: from a window's end until latency was back
	// at its median of the 5 s before the snapshot, at most 10 s.
	ExcludedS float64 `json:"excluded_s,omitempty"`
	DrainS    float64 `json:"drain_s,omitempty"`
	// OverlapsSnapshot: a snapshot window intersects this one, so its figures include a pause.
	OverlapsSnapshot bool `json:"overlaps_snapshot,omitempty"`
	// UnplannedLeaderChange: a leader change no action asked for happened in this window.
	UnplannedLeaderChange bool `json:"unplanned_leader_change,omitempty"`
}

// SnapshotRow is one snapshot action.
type SnapshotRow struct {
	AtS         float64            `json:"at_s"`
	Index       *int64             `json:"index"` // null when neither the action nor any node reported it
	Leader      string             `json:"leader,omitempty"`
	TakeMs      map[string]float64 `json:"take_ms"` // per node that reported finishing it
	PersistedMs map[string]float64 `json:"persisted_ms,omitempty"`
	Bytes       int64              `json:"bytes,omitempty"`
	// FinishedS is when the last node that was ready at the action reported finishing; null when
	// none did. A node down or catching up at the action takes the snapshot later, when its
	// replay reaches the marker: its take is listed but does not stretch the window.
	FinishedS *float64 `json:"finished_s"`
	// The pause window: [action - 1 s, FinishedS + 1 s], closed; without FinishedS it runs to the
	// next snapshot action or the end of load.
	WindowFromS float64 `json:"window_from_s"`
	WindowToS   float64 `json:"window_to_s"`
	// PauseFromS, PauseToS: the probes the client pause is taken over, by intended send time:
	// [the trigger, FinishedS + 1 s]. Probes sent before the trigger are left out: their wait
	// began before the snapshot did.
	PauseFromS float64 `json:"pause_from_s"`
	PauseToS   float64 `json:"pause_to_s"`
	// ClientPauseMs is the worst probe latency among the probes sent in [PauseFromS, PauseToS]
	// (post-warm-up probes only). A lost probe counts as waiting until the end of load, so a
	// pause set by one is a lower bound.
	ClientPauseMs   *float64 `json:"client_pause_ms"`
	PauseAtS        *float64 `json:"pause_at_s,omitempty"` // intended send time of that probe
	PauseLowerBound bool     `json:"pause_lower_bound,omitempty"`
	WindowProbes    int      `json:"window_probes"` // post-warm-up probes in the pause window (answered + lost)
	WindowLost      int      `json:"window_lost"`
	NormalP50Us     *float64 `json:"normal_p50_us,omitempty"` // Summary.Normal.P50Us, repeated beside each pause for comparison
	// UnplannedLeaderChange: a leader change no action asked for happened in the window.
	UnplannedLeaderChange bool `json:"unplanned_leader_change,omitempty"`
}

// RestartRow is one kill action and what followed it.
type RestartRow struct {
	Node      string   `json:"node"`
	Signal    string   `json:"signal,omitempty"`
	KillS     float64  `json:"kill_s"`
	RelaunchS *float64 `json:"relaunch_s"` // null: never relaunched
	ReadyS    *float64 `json:"ready_s"`    // null: never reached phase ready after the relaunch
	// LaunchToReadyMs is relaunch action to the first phase->ready seen after it.
	LaunchToReadyMs *float64 `json:"launch_to_ready_ms"`
	// PhasesMs is how long the node stayed in each phase between relaunch and ready; "starting"
	// counts from the relaunch action (process start included). A phase the agent never saw
	// (shorter than the engine's change check, or than the 20 ms polls of an engine without a
	// change stream) is absent.
	PhasesMs map[string]float64 `json:"phases_ms"`
	// OpenPhase is the phase the node was still in at the end of the run (never ready); its
	// PhasesMs entry runs to the end of the run.
	OpenPhase string         `json:"open_phase,omitempty"`
	Windows   RestartWindows `json:"windows"`
}

// RestartWindows are the client-latency windows around one restart.
type RestartWindows struct {
	AllUp     Window  `json:"all_up"`              // [warmup_end, first kill) minus snapshot windows
	OneDown   Window  `json:"one_down"`            // [kill, relaunch)
	Rejoining *Window `json:"rejoining,omitempty"` // [relaunch, ready); absent if never relaunched
}

// LeaderMark is a node taking leadership.
type LeaderMark struct {
	AtS  float64 `json:"at_s"`
	Node string  `json:"node"`
}

// ActionMark is one timeline action.
type ActionMark struct {
	AtS    float64 `json:"at_s"`
	Action string  `json:"action"`
	Node   string  `json:"node,omitempty"`
	// Moves is what the action did to leadership, as its event says (rundir.LeaderMove).
	Moves rundir.LeaderMove `json:"-"`
}

// AnalyzeRun analyses a finished run's folder and writes its outputs (runner.Options.Analyze):
// failed is called first when the run is no measurement (Summary.StatusReason), so the manifest
// says so before the report is written from it.
func AnalyzeRun(runDir string, failed func(reason string)) error {
	sum, err := Analyze(runDir)
	if err != nil {
		return err
	}
	if sum.StatusReason != "" {
		failed(sum.StatusReason)
	}
	return WriteOutputs(runDir, sum)
}

// WriteOutputs writes summary.json, report.md and plots/*.png into runDir. A plot that cannot be
// drawn is reported in the returned error (and as a warning) but does not stop the rest.
func WriteOutputs(runDir string, s *Summary) error {
	d := s.data
	if d == nil {
		var err error
		if d, err = loadRun(runDir); err != nil {
			return fmt.Errorf("write outputs for %s: %w", runDir, err)
		}
	}
	plots, plotErr := writePlots(runDir, d, s)
	s.Plots = plots
	if plotErr != nil {
		s.Warnings = append(s.Warnings, "plots: "+plotErr.Error())
	}
	var errs []error
	if plotErr != nil {
		errs = append(errs, plotErr)
	}
	if err := atomicfile.WriteFile(filepath.Join(runDir, rundir.ReportFile), []byte(renderReport(s)), 0o644); err != nil {
		errs = append(errs, err)
	}
	if err := atomicfile.WriteJSON(filepath.Join(runDir, rundir.SummaryFile), s); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Placement is where a run's nodes were.
type Placement struct {
	Stack string              `json:"stack,omitempty"` // single-az | multi-az (a stack's rig:placement)
	AZ    map[string]string   `json:"az,omitempty"`    // node → availability zone, on a stack
	Zones linkproxy.Placement `json:"zones,omitzero"`  // the playbook's zones and their distance (local target)
}
