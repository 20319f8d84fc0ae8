package disk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/internal/loadavg"
)

// ErrNoFio means fio is not installed on the node.
var ErrNoFio = errors.New("fio is not installed")

// CheckOptions say where and how long fio measures a volume.
type CheckOptions struct {
	// Dir is the mounted volume's folder; fio writes its files in Dir/.rig-disk-check and
	// removes them, and the result is kept beside them in Dir/.rig-disk-check.json.
	Dir string `json:"dir"`
	// SizeBytes is the one file the three jobs write in turn (default 64 MiB, at most a quarter
	// of the free space); Runtime each job's length (default 1s), so a check takes about
	// 3 × Runtime plus laying out the file.
	SizeBytes int64         `json:"size_bytes,omitempty"`
	Runtime   time.Duration `json:"runtime_ns,omitempty"`
	// Reuse answers with the kept result of an earlier check of this volume, when there is one,
	// instead of measuring again: a run checks a volume once, before its first run on it.
	Reuse bool `json:"reuse,omitempty"`
	// Fio is the fio binary (default: fio on PATH).
	Fio string `json:"-"`
}

// Bounds of a check, so that a mistyped request cannot keep a node's disk busy.
const (
	DefaultCheckSize    = 64 << 20
	MaxCheckSize        = 1 << 30
	DefaultCheckRuntime = time.Second
	MaxCheckRuntime     = 30 * time.Second
)

// Measured is what fio found on a volume: sequential 1 MiB writes (direct, queue depth 16),
// random 4 KiB writes (direct, queue depth 32), and 4 KiB writes each followed by fdatasync
// (buffered, one at a time: the engine's sync path).
type Measured struct {
	SeqWriteMBps  float64 `json:"seq_write_mbps"` // 10^6 bytes per second
	RandWriteIOPS float64 `json:"rand_write_iops"`
	SyncMeanUs    float64 `json:"sync_mean_us"` // fdatasync latency
	SyncP99Us     float64 `json:"sync_p99_us"`
	Syncs         int64   `json:"syncs"`
	FioVersion    string  `json:"fio_version"`
	// Args is the fio command line, so the figures can be reproduced by hand.
	Args       []string  `json:"args"`
	LoadAvg    float64   `json:"load_avg"` // 1-minute load average when fio finished
	MeasuredAt time.Time `json:"measured_at"`
	Reused     bool      `json:"reused,omitempty"` // kept from an earlier check, not measured now
}

const checkFile = ".rig-disk-check.json"

// Check measures the volume mounted at o.Dir with fio (see Measured), or with o.Reuse returns the
// kept result of an earlier check. Every measurement replaces the kept one.
func Check(ctx context.Context, o CheckOptions) (Measured, error) {
	if !filepath.IsAbs(o.Dir) {
		return Measured{}, fmt.Errorf("%w: dir %q: want an absolute path", ErrBadOption, o.Dir)
	}
	if o.SizeBytes == 0 {
		o.SizeBytes = DefaultCheckSize
		var st syscall.Statfs_t
		if syscall.Statfs(o.Dir, &st) == nil {
			o.SizeBytes = max(min(o.SizeBytes, int64(st.Bavail)*int64(st.Bsize)/4), 1<<20)
		}
	}
	if o.Runtime == 0 {
		o.Runtime = DefaultCheckRuntime
	}
	if o.SizeBytes < 1<<20 || o.SizeBytes > MaxCheckSize || o.Runtime < 100*time.Millisecond || o.Runtime > MaxCheckRuntime {
		return Measured{}, fmt.Errorf("%w: size %d B, runtime %s: want 1 MiB..1 GiB and 100ms..30s", ErrBadOption, o.SizeBytes, o.Runtime)
	}
	kept := filepath.Join(o.Dir, checkFile)
	if o.Reuse {
		if b, err := os.ReadFile(kept); err == nil {
			var m Measured
			if json.Unmarshal(b, &m) == nil && m.FioVersion != "" {
				m.Reused = true
				return m, nil
			}
		}
	}
	fio := o.Fio
	if fio == "" {
		fio = "fio"
	}
	if _, err := exec.LookPath(fio); err != nil {
		return Measured{}, fmt.Errorf("%w (%v): install Debian's or Amazon Linux's package fio (apt-get install fio, dnf install fio); a stack's nodes get it from their user data", ErrNoFio, err)
	}
	work := filepath.Join(o.Dir, ".rig-disk-check")
	if err := os.MkdirAll(work, 0o700); err != nil {
		return Measured{}, fmt.Errorf("disk check: %w", err)
	}
	defer os.RemoveAll(work)
	args := FioArgs(work, o.SizeBytes, o.Runtime)
	// Bounded: three jobs of Runtime each, plus laying out the files, plus slack for a slow disk.
	ctx, cancel := context.WithTimeout(ctx, 3*o.Runtime+2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, fio, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return Measured{}, fmt.Errorf("disk check: fio in %s: %v: %s", o.Dir, err, lastLine(stderr.String()))
	}
	m, err := ParseFio(stdout.Bytes())
	if err != nil {
		return m, fmt.Errorf("disk check: %w", err)
	}
	m.Args = append([]string{fio}, args...)
	m.MeasuredAt = time.Now().UTC()
	if la, err := loadavg.Read("/"); err == nil {
		m.LoadAvg = la.Load1
	}
	if err := atomicfile.WriteJSON(kept, m); err != nil {
		return m, fmt.Errorf("disk check: keep the result: %w", err)
	}
	return m, nil
}

// FioArgs is the one fio invocation: three jobs, one after the other (stonewall), on one file
// in dir, each for runtime.
func FioArgs(dir string, size int64, runtime time.Duration) []string {
	return []string{"--output-format=json", "--directory=" + dir, "--filename=rig-disk-check", "--size=" + strconv.FormatInt(size, 10),
		"--runtime=" + strconv.FormatInt(max(runtime.Milliseconds(), 1), 10) + "ms", "--time_based", "--ioengine=libaio", "--direct=1",
		"--name=seq", "--rw=write", "--bs=1M", "--iodepth=16",
		"--name=rand", "--stonewall", "--rw=randwrite", "--bs=4k", "--iodepth=32",
		"--name=sync", "--stonewall", "--rw=write", "--bs=4k", "--ioengine=psync", "--direct=0", "--iodepth=1", "--fdatasync=1",
	}
}

// fioOutput is the part of fio's --output-format=json that a check reads.
type fioOutput struct {
	Version string `json:"fio version"`
	Jobs    []struct {
		Name  string `json:"jobname"`
		Error int    `json:"error"`
		Write struct {
			BwBytes float64 `json:"bw_bytes"`
			IOPS    float64 `json:"iops"`
		} `json:"write"`
		Sync struct {
			Lat struct {
				N          int64              `json:"N"`
				Mean       float64            `json:"mean"`
				Percentile map[string]float64 `json:"percentile"`
			} `json:"lat_ns"`
		} `json:"sync"`
	} `json:"jobs"`
}

// ParseFio reads the figures of FioArgs's three jobs from fio's JSON output.
func ParseFio(out []byte) (Measured, error) {
	// fio may print notes before the JSON document.
	if i := bytes.IndexByte(out, '{'); i > 0 {
		out = out[i:]
	}
	var f fioOutput
	if err := json.Unmarshal(out, &f); err != nil {
		return Measured{}, fmt.Errorf("fio output is not its JSON: %w", err)
	}
	m := Measured{FioVersion: f.Version}
	seen := map[string]bool{}
	for _, j := range f.Jobs {
		if j.Error != 0 {
			return m, fmt.Errorf("fio job %s failed with error %d", j.Name, j.Error)
		}
		seen[j.Name] = true
		switch j.Name {
		case "seq":
			m.SeqWriteMBps = j.Write.BwBytes / 1e6
		case "rand":
			m.RandWriteIOPS = j.Write.IOPS
		case "sync":
			m.Syncs = j.Sync.Lat.N
			m.SyncMeanUs = j.Sync.Lat.Mean / 1e3
			m.SyncP99Us = j.Sync.Lat.Percentile["99.000000"] / 1e3
		}
	}
	for _, name := range []string{"seq", "rand", "sync"} {
		if !seen[name] {
			return m, fmt.Errorf("fio output has no job %s (jobs: %d)", name, len(f.Jobs))
		}
	}
	if m.SeqWriteMBps <= 0 || m.RandWriteIOPS <= 0 || m.Syncs == 0 {
		return m, fmt.Errorf("fio measured nothing: %.1f MB/s, %.0f IOPS, %d syncs", m.SeqWriteMBps, m.RandWriteIOPS, m.Syncs)
	}
	return m, nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// Provisioned is what a stack provisioned for a volume: throughput in MiB/s (gp3; 0 for io2,
// which provisions none) and IOPS.
type Provisioned struct {
	Type            string `json:"type,omitempty"`
	ThroughputMiBps int    `json:"throughput_mibps,omitempty"`
	IOPS            int    `json:"iops,omitempty"`
}

// VolumeCheck is one volume's check as a run records it: what was provisioned beside what fio
// measured, and whether it was held to it (a volume whose provisioning is not known is not).
type VolumeCheck struct {
	Volume      string      `json:"volume"`
	Provisioned Provisioned `json:"provisioned"`
	Measured    Measured    `json:"measured"`
	Compared    bool        `json:"compared"`
	Error       string      `json:"error,omitempty"` // below CheckFloor: which figures, by how much
}

// Checker runs a check on a node: the agent's client (POST /v1/disk/check).
type Checker interface {
	DiskCheck(ctx context.Context, o CheckOptions) (Measured, error)
}

// CheckFloor is the least fraction of each figure a disk must deliver before a run loads it, of
// what a stack provisioned for its volume or what a playbook asked of a disk model: below it the
// run would measure a disk other than the one it says.
const CheckFloor = 0.8

// ErrBelowProvisioned marks a volume that delivers less than CheckFloor of what was provisioned.
var ErrBelowProvisioned = errors.New("the volume delivers less than it was provisioned for")

// Compare holds what fio measured against what was provisioned, each figure on its own, and
// names every figure below floor with both numbers and by how much.
func Compare(p Provisioned, m Measured, floor float64) error {
	var short []string
	if p.ThroughputMiBps > 0 {
		want := float64(p.ThroughputMiBps) * 1.048576 // MiB/s to MB/s
		if m.SeqWriteMBps < floor*want {
			short = append(short, fmt.Sprintf("sequential write %.1f MB/s is %.0f %% of the provisioned %d MiB/s (%.1f MB/s), %.0f %% short",
				m.SeqWriteMBps, 100*m.SeqWriteMBps/want, p.ThroughputMiBps, want, 100*(1-m.SeqWriteMBps/want)))
		}
	}
	if p.IOPS > 0 && m.RandWriteIOPS < floor*float64(p.IOPS) {
		want := float64(p.IOPS)
		short = append(short, fmt.Sprintf("4 KiB random write %.0f IOPS is %.0f %% of the provisioned %d IOPS, %.0f %% short",
			m.RandWriteIOPS, 100*m.RandWriteIOPS/want, p.IOPS, 100*(1-m.RandWriteIOPS/want)))
	}
	if len(short) == 0 {
		return nil
	}
	return fmt.Errorf("%w (below %.0f %%): %s; a volume restored from a snapshot reads (and writes) slowly until each block has been read once: initialise it (fio or dd reading the whole device) or enable fast snapshot restore, then check again with rig disk-check",
		ErrBelowProvisioned, 100*floor, strings.Join(short, "; "))
}
