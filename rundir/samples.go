package rundir

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rig-dev/rig/internal/untrusted"
)

// Sample is one line of <node>/samples/*.ndjson, written by the agent's OS sampler
// (agent/sample): rates over the interval that ended at Time.
type Sample struct {
	Time     time.Time    `json:"time"`
	Seq      int          `json:"seq"`
	Interval float64      `json:"interval_s"` // measured, not nominal
	CPUs     int          `json:"cpus"`
	Load     SampleLoad   `json:"load"`
	Disks    []SampleDisk `json:"disks"`
	UDP      SampleUDP    `json:"udp"`
	VM       SampleVM     `json:"vm"`
	NICs     []SampleNIC  `json:"nics,omitempty"` // ENA interfaces only (AWS)
	Procs    []SampleProc `json:"procs,omitempty"`
	Agent    SampleProc   `json:"agent"` // the sampler's own process: the rig's overhead on the node
	// Host is the whole machine's CPU from /proc/stat; with Procs and Agent it tells another
	// process's CPU from the run's own (analysis/excursions.go). Absent in older run folders.
	Host *SampleHost `json:"host,omitempty"`
}

// SampleHost is /proc/stat's all-CPU line over the interval, each in percent of one core (as
// SampleProc.CPUPct), so BusyPct of a 2-core machine runs up to 200.
type SampleHost struct {
	BusyPct   float64 `json:"busy_pct"` // everything but idle and iowait
	IOWaitPct float64 `json:"iowait_pct"`
	StealPct  float64 `json:"steal_pct"`
}

// SampleLoad is /proc/loadavg.
type SampleLoad struct {
	Load1  float64 `json:"load1"`
	Load5  float64 `json:"load5"`
	Load15 float64 `json:"load15"`
	// Overloaded is set when the 1-minute load exceeds the CPU count: figures from such an
	// interval are suspect (docs/architecture.md, "Measurement rules").
	Overloaded bool `json:"overloaded,omitempty"`
}

// SampleDisk holds iostat -x figures for one device. MB are 2^20 bytes, as in iostat -m.
type SampleDisk struct {
	Name       string  `json:"name"`
	ReadsPerS  float64 `json:"r_s"`
	WritesPerS float64 `json:"w_s"`
	FlushPerS  float64 `json:"f_s"`
	ReadMBPerS float64 `json:"rmb_s"`
	WriteMBPer float64 `json:"wmb_s"`
	ReadAwait  float64 `json:"r_await_ms"`
	WriteAwait float64 `json:"w_await_ms"`
	FlushAwait float64 `json:"f_await_ms"`
	QueueSize  float64 `json:"aqu_sz"`
	Util       float64 `json:"util_pct"`
}

// SampleNIC is the receive drops an AWS ENA interface counts in its driver (`ethtool -S`):
// packets the NIC or its RX rings dropped before the kernel's socket buffers saw them, which
// /proc/net/snmp does not count.
type SampleNIC struct {
	Iface        string `json:"iface"`
	RxDrops      uint64 `json:"rx_drops"` // sum of the per-queue rx drop counters (or the device's, without them)
	RxDropsDelta uint64 `json:"rx_drops_delta"`
}

// SampleUDP holds /proc/net/snmp Udp counters: totals since boot and the increase over the
// interval.
type SampleUDP struct {
	InErrors          uint64 `json:"in_errors"`
	RcvbufErrors      uint64 `json:"rcvbuf_errors"`
	InErrorsDelta     uint64 `json:"in_errors_delta"`
	RcvbufErrorsDelta uint64 `json:"rcvbuf_errors_delta"`
}

// SampleVM holds /proc/vmstat figures: fault rates and the dirty and writeback page counts.
type SampleVM struct {
	PgFaultPerS    float64 `json:"pgfault_s"`
	PgMajFaultPerS float64 `json:"pgmajfault_s"`
	NrDirty        uint64  `json:"nr_dirty"`     // pages
	NrWriteback    uint64  `json:"nr_writeback"` // pages
}

// SampleProc is one process over the interval. CPU is percent of one core, as top shows it.
type SampleProc struct {
	PID      int     `json:"pid"`
	Comm     string  `json:"comm,omitempty"`
	CPUPct   float64 `json:"cpu_pct"`
	RSSBytes uint64  `json:"rss_bytes"`
	Gone     bool    `json:"gone,omitempty"` // not running at the end of the interval
}

// ErrNoSamples is returned by ReadSamples for an empty stream.
var ErrNoSamples = errors.New("no samples")

// ReadSamples parses an NDJSON stream of samples. A torn last line (a reader racing the writer,
// an agent killed mid-write) is ignored; a bad line before the last is an error, returned with
// every sample that did decode, for readers that would rather have those.
func ReadSamples(r io.Reader) ([]Sample, error) {
	var out []Sample
	var torn, bad error
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		if torn != nil && bad == nil {
			bad = torn // it was not the last line
		}
		var s Sample
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			torn = fmt.Errorf("sample line %d: %w", line, err)
			continue
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return out, err
	}
	if bad != nil {
		return out, bad
	}
	if len(out) == 0 {
		return nil, ErrNoSamples
	}
	return out, nil
}

// ReadSamplesFile is ReadSamples of the file at path.
func ReadSamplesFile(path string) ([]Sample, error) {
	f, err := untrusted.Open(path, "samples file") // a regular file: never a FIFO or a device
	if err != nil {
		return nil, err
	}
	defer f.Close()
	samples, err := ReadSamples(f)
	if err != nil {
		err = fmt.Errorf("%s: %w", path, err)
	}
	return samples, err
}

// Samples is ReadSamplesFile of name (e.g. node-0/samples/os.ndjson) in the run folder (Folder).
func (f Folder) Samples(name string) ([]Sample, error) {
	return readWith(f, name, "samples file", func(r io.Reader) ([]Sample, error) {
		samples, err := ReadSamples(r)
		if err != nil {
			err = fmt.Errorf("%s: %w", name, err)
		}
		return samples, err
	})
}

// SamplesGlob matches every node's samples files in the run folder (Folder.Glob).
const SamplesGlob = "*/" + SamplesDir + "/*" + SamplesExt
