package results

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
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
	RunID      string            `json:"run_id"`
	Status     string            `json:"status"`
	Error      string            `json:"error,omitempty"`
	Started    time.Time         `json:"started"`
	Ended      time.Time         `json:"ended,omitzero"`
	Target     string            `json:"target"`
	Stack      string            `json:"stack,omitempty"`
	Round      int               `json:"round"`
	Settings   map[string]string `json:"settings,omitempty"` // matrix values of this run
	Playbook   any               `json:"playbook"`           // as resolved
	ConfigHash string            `json:"config_hash"`        // sha256 of the resolved playbook JSON
	Rig        BuildInfo         `json:"rig"`
	CPUs       int               `json:"cpus"`
	LoadAvg    LoadAvg           `json:"load_avg"`
	Inventory  any               `json:"inventory,omitempty"`
	Facts      map[string]any    `json:"facts,omitempty"`         // per node, from the agent
	Tuning     map[string]any    `json:"tuning,omitempty"`        // per node: settings read back after apply, and revert
	Engines    map[string]any    `json:"engine_config,omitempty"` // per node: effective config read back from /status
	Loadgen    any               `json:"loadgen,omitempty"`       // the load generator's own stats (send lag, reconnects)
	AgentCPU   map[string]any    `json:"agent_cpu,omitempty"`     // per node: the agent's own CPU share (the rig's overhead)
	// ClockOffsets per node: node clock minus controller clock (best of 8 round trips), already
	// subtracted from every node-side timestamp in events.jsonl.
	ClockOffsets map[string]any `json:"clock_offsets,omitempty"`
	Disks        map[string]any `json:"disks,omitempty"` // per server: its data volume as found, formatted, mounted
	Warnings     []string       `json:"warnings,omitempty"`
	Phases       []PhaseMark    `json:"phases,omitempty"` // controller stages with load average at each
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

// ReadLoadAvg reads /proc/loadavg under root ("/" normally).
func ReadLoadAvg(root string) []float64 {
	b, err := os.ReadFile(filepath.Join(root, "proc/loadavg"))
	if err != nil {
		return nil
	}
	f := strings.Fields(string(b))
	var out []float64
	for i := 0; i < 3 && i < len(f); i++ {
		v, _ := strconv.ParseFloat(f[i], 64)
		out = append(out, v)
	}
	return out
}

// WriteManifest writes dir/manifest.json atomically.
func WriteManifest(dir string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	return WriteFileAtomic(filepath.Join(dir, "manifest.json"), b)
}

// WriteFileAtomic writes via a temp file and rename, so readers never see half a file.
func WriteFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
