package rundir

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/rig-dev/rig/agent/disk"
	"github.com/rig-dev/rig/agent/facts"
	"github.com/rig-dev/rig/agent/tune"
	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/linkproxy"
)

// Run statuses.
const (
	StatusRunning     = "running"
	StatusOK          = "ok"
	StatusFailed      = "failed"
	StatusInterrupted = "interrupted"
)

// Manifest is manifest.json: what a run needs to be believed. It is rewritten (atomically) at
// every stage, so an interrupted run still says what it was and how far it got.
type Manifest struct {
	RunID    string            `json:"run_id"`
	Status   string            `json:"status"`
	Error    string            `json:"error,omitempty"`
	Started  time.Time         `json:"started"`
	Ended    time.Time         `json:"ended,omitzero"`
	Target   string            `json:"target"`
	Stack    string            `json:"stack,omitempty"`
	Round    int               `json:"round"`
	Settings map[string]string `json:"settings,omitempty"` // matrix values of this run
	// Playbook is the resolved playbook as package playbooks encodes it (playbooks.Playbook);
	// kept raw so that the agent and the load generator, which import this package, need not
	// import the playbook parser.
	Playbook   json.RawMessage        `json:"playbook"`
	ConfigHash string                 `json:"config_hash"` // sha256 of the resolved playbook JSON
	Rig        BuildInfo              `json:"rig"`
	CPUs       int                    `json:"cpus"`
	LoadAvg    LoadAvg                `json:"load_avg"`
	Inventory  *inventory.Inventory   `json:"inventory,omitempty"`
	Facts      map[string]facts.Facts `json:"facts,omitempty"`  // per node, from the agent
	Tuning     map[string]Tuning      `json:"tuning,omitempty"` // per node: settings read back after apply, and revert
	// Resolved is the engine's settings as the plan resolved them (driver, table, values asked);
	// Engines are, per node, the settings in effect, read back from /status config. Whatever
	// reads the run types and compares the two by Resolved's table, without the driver.
	Resolved *driver.Resolved           `json:"engine_settings,omitempty"`
	Engines  map[string]engine.Reported `json:"engine_config,omitempty"`
	Loadgen  *ProbeStats                `json:"loadgen,omitempty"`   // the load generator's own stats (send lag, reconnects)
	AgentCPU map[string]CPUShare        `json:"agent_cpu,omitempty"` // per node: the agent's own CPU share (the rig's overhead)
	// ClockOffsets per node: node clock minus controller clock (best of 8 round trips), already
	// subtracted from every node-side timestamp in events.jsonl.
	ClockOffsets map[string]ClockOffset `json:"clock_offsets,omitempty"`
	Disks        map[string]disk.Result `json:"disks,omitempty"` // per server: its data volume as found, formatted, mounted
	// DiskChecks: per server, what fio measured on the data volume the engine data is on,
	// beside what the stack provisioned (agent/disk.Check, Compare).
	DiskChecks map[string]disk.VolumeCheck `json:"disk_checks,omitempty"`
	// Recorded: with engine.recording: windows, the stretches every server's recorder ran
	// (controller clock): a cause from the recording is only looked for inside them.
	Recorded []Stretch `json:"recorded,omitempty"`
	// DiskModels: per server, the disk model asked for (the playbook's disk:) and what a probe of
	// it delivered before load.
	DiskModels map[string]diskmodel.Record `json:"disk_models,omitempty"`
	// LinkRTTs: with a placement (zones), every routed pair's round trip through its proxy as
	// asked (probe.set_ns, jitter_ns) and as a probe measured it before load, with the load average.
	LinkRTTs []linkproxy.PairProbe `json:"link_rtts,omitempty"`
	// LinkRTTsLoad: the same probe halfway through the measured load, the run's traffic in the
	// links (a proxy short of CPU delivers late); off the asked, it is a warning, not a stop.
	LinkRTTsLoad []linkproxy.PairProbe `json:"link_rtts_load,omitempty"`
	Warnings     []string              `json:"warnings,omitempty"`
	Phases       []PhaseMark           `json:"phases,omitempty"` // controller stages with load average at each
	// TuningSkipped says why the playbook's kernel tuning was not applied at all (empty: it was,
	// or there was none): every tuning setting of the run then had no effect.
	TuningSkipped string `json:"tuning_skipped,omitempty"`
	// Stages are the run's stages (playbooks/estimate.Stages) with the estimate made before it
	// started and what each took; OverheadS is the run's wall time (start to end) minus the
	// playbook's duration: everything but the timeline.
	Stages    []StageTime `json:"stages,omitempty"`
	OverheadS *float64    `json:"overhead_s,omitempty"`
	Book      *BookUse    `json:"book,omitempty"` // where the resting book came from
	// LeaseTTLS is the agents' lease length in seconds: how long a node stays tuned, its engine
	// running, after the controller was last heard from (runner/lease.go).
	LeaseTTLS float64 `json:"lease_ttl_s,omitempty"`
	// DataSpace per server: the room on its engine data's filesystem before the run, and the
	// estimate of what the run writes there (runner/space.go).
	DataSpace map[string]DataSpace `json:"data_space,omitempty"`
	// Command is the controller's command line (its os.Args) that ran the run.
	Command []string `json:"command,omitempty"`
	// Engine identifies the engine build the run measured (NewEngineBuild).
	Engine *EngineBuild `json:"engine_build,omitempty"`
}

// DataSpace is one server's free-space check before its engine started.
type DataSpace struct {
	facts.Space
	WritesBytes int64 `json:"writes_bytes"` // what the run writes into its data folder, estimated
	SharedWith  int   `json:"shared_with"`  // servers whose data is on that filesystem (itself included)
}

// StageTime is one stage of a run: the runner's estimate before the run started and, once the
// stage ended, what it took.
type StageTime struct {
	Name      string   `json:"name"`
	EstimateS float64  `json:"estimate_s"`
	From      string   `json:"estimate_from,omitempty"` // the history or defaults the estimate came from
	ActualS   *float64 `json:"actual_s,omitempty"`
}

// BookUse says where a run's resting book came from: preloaded through the log, or a stored book
// (the same options build the same book) installed in every server's snapshots folder.
type BookUse struct {
	Key       string `json:"key"` // loadspec.BookShape.Key of the preload's book
	Orders    int64  `json:"orders"`
	Reused    bool   `json:"reused"`               // installed from the store, not preloaded
	BuiltBy   string `json:"built_by,omitempty"`   // the run whose preload first built this book
	StateHash string `json:"state_hash,omitempty"` // the stored book's state hash
	// A run that preloaded: whether its book was stored for later runs, how long writing it
	// took (part of the run's overhead), and why not.
	Stored    bool    `json:"stored,omitempty"`
	StoreS    float64 `json:"store_s,omitempty"`
	NotStored string  `json:"not_stored,omitempty"`
}

// Tuning is one node's kernel tuning: what the agent applied and read back, and what it
// restored at the end.
type Tuning struct {
	Applied  *tune.Report `json:"applied,omitempty"`
	Reverted *tune.Report `json:"reverted,omitempty"`
}

// CPUShare is a process's CPU use over the run, in percent of one core.
type CPUShare struct {
	MeanPct float64 `json:"mean_pct"`
	MaxPct  float64 `json:"max_pct"`
}

// ClockOffset is a node's clock minus the controller's, and the round trip it was measured with.
type ClockOffset struct {
	OffsetUs int64 `json:"offset_us"`
	RTTUs    int64 `json:"rtt_us"`
}

// LoadAvg is /proc/loadavg (1, 5, 15 minutes) at the start and end of the run.
type LoadAvg struct {
	Start []float64 `json:"start,omitempty"`
	End   []float64 `json:"end,omitempty"`
}

// PhaseMark is one controller stage with the load average at its start.
type PhaseMark struct {
	Name    string    `json:"name"`
	T       time.Time `json:"t"`
	LoadAvg []float64 `json:"load_avg,omitempty"`
}

// BuildInfo identifies the binary that ran.
type BuildInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

// EngineBuild identifies the engine a run measured: its driver, a version label, the commit it
// was built from and the SHA-256 of its binary (or jar) as the controller read it.
type EngineBuild struct {
	Driver  string `json:"driver"`
	Version string `json:"version,omitempty"` // a label: rig run --engine-version, else the rig's version for the reference engine
	Commit  string `json:"commit,omitempty"`
	Binary  string `json:"binary,omitempty"`
	SHA256  string `json:"sha256,omitempty"` // empty when the binary is not a file on the controller's machine
}

// NewEngineBuild describes the engine run from binary by driver. The reference engine is rig
// itself (`rig engine`), so it has rig's version and commit unless version or commit say
// otherwise; another engine has what they say. binary is hashed when it is a file here.
func NewEngineBuild(driver, binary, version, commit string, rig BuildInfo, reference bool) *EngineBuild {
	e := &EngineBuild{Driver: driver, Binary: binary, Version: version, Commit: commit}
	if reference {
		if e.Version == "" {
			e.Version = rig.Version
		}
		if e.Commit == "" {
			e.Commit = rig.Commit
		}
	}
	e.SHA256 = fileSHA256(binary)
	return e
}

// binaryHashes caches fileSHA256 by path, size and modification time: every run of a sweep
// hashes the same tens of MiB of rig binary otherwise.
var binaryHashes sync.Map

// fileSHA256 is the hex SHA-256 of a regular file, "" when it cannot be read.
func fileSHA256(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	key := fmt.Sprintf("%s\x00%d\x00%d", path, fi.Size(), fi.ModTime().UnixNano())
	if v, ok := binaryHashes.Load(key); ok {
		return v.(string)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	sum := hex.EncodeToString(h.Sum(nil))
	binaryHashes.Store(key, sum)
	return sum
}

// Build reads the binary's build info (module version, VCS revision).
func Build() BuildInfo {
	b := BuildInfo{Version: "dev", Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	return b
}

// Hash is the config hash of a resolved playbook: sha256 over its canonical JSON.
func Hash(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// WriteManifest writes dir/manifest.json atomically.
func WriteManifest(dir string, m *Manifest) error {
	return atomicfile.WriteJSON(filepath.Join(dir, ManifestFile), m)
}

// ReadManifest reads dir/manifest.json. A field of an unexpected type is left empty and reported
// as a *json.UnmarshalTypeError alongside the rest of the manifest.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := Folder{dir}.ReadFile(ManifestFile, ManifestFile, MaxJSONBytes)
	if err != nil {
		return nil, err
	}
	var m Manifest
	return &m, json.Unmarshal(b, &m)
}

// Stretch is a stretch of time, [From, To] in unix ns.
type Stretch struct {
	FromNs int64 `json:"from_ns"`
	ToNs   int64 `json:"to_ns"`
}

// Covers says whether s holds all of [from, to].
func (s Stretch) Covers(from, to int64) bool { return s.FromNs <= from && to <= s.ToNs }
