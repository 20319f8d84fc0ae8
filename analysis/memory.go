package analysis

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/rundir"
)

// ErrMemory classifies a run folder rig report refuses to analyse because what it reads would
// not fit in this machine's memory.
var ErrMemory = errors.New("not enough memory to analyse the run folder")

// What analysing a run folder holds resident, per input, measured by memory_test.go
// (TestReportMemoryMeasured: the peak resident set of Analyze and WriteOutputs over a run folder
// of 2M probes, 47 B a probe, and over 68 MB of OS samples, 2.0 B a byte), with a margin.
const (
	BytesPerProbe = 64 // rundir.Probe (24 B) held for the whole analysis, the latency copies of its windows, the plot buckets
	BytesPerAcked = 64 // rundir.Acked (48 B) and the durability walk
	// BytesPerLineByte is per byte of the JSON-line files read whole (events.jsonl, OS samples,
	// inside spans, disk syncs) and the logs kept per line (engine.log, GC logs): decoded,
	// they take more than their text.
	BytesPerLineByte = 4
	// reportBaseBytes is the rest: the runtime, the plots' canvases (a 1152 × 528 RGBA image is
	// 2.4 MB), the summary.
	reportBaseBytes = 64 << 20
)

// lineFiles are the run folder's files the analysis reads whole, one record a line.
var lineFiles = []string{
	rundir.EventsFile,
	rundir.SamplesGlob,
	"*/" + rundir.InsideFile,
	"*/" + rundir.PausesFile,
	rundir.SchedGlob,
	"*/" + rundir.DiskSyncsFile,
	"*/" + rundir.EngineLogFile,
	"*/gc*.log",
}

// MemoryNeed is what Analyze and WriteOutputs of a run folder need resident, and why.
type MemoryNeed struct {
	Probes    int64 // probes read (none when probes.bin holds more than declared: it is refused)
	Acked     int64
	LineBytes int64 // the files of lineFiles, in bytes on disk
	Bytes     int64
}

// EstimateMemory is MemoryNeed of the run folder dir, from its files' sizes and what the run
// declared: nothing is read but loadgen/stats.json and manifest.json.
func EstimateMemory(dir string) (MemoryNeed, error) {
	d := &runData{dir: dir, run: rundir.Folder{Dir: dir}}
	d.readManifest()
	var m MemoryNeed
	if decl, err := d.declaredProbes(); err == nil {
		if n, err := d.run.ProbeRecords(); err == nil && n <= decl.N {
			m.Probes = n
		}
	}
	if n, err := d.run.AckedRecords(); err == nil {
		m.Acked = n
		if decl, err := d.run.DeclaredAcked(); err == nil && n > decl.N {
			m.Acked = 0 // refused unread
		}
	}
	var errs []error
	for _, pattern := range lineFiles {
		names, err := d.run.Glob(pattern)
		if err != nil {
			errs = append(errs, err)
		}
		for _, name := range names {
			if st, err := d.run.Stat(name); err == nil && st.Mode().IsRegular() {
				m.LineBytes += st.Size()
			}
		}
	}
	// In floating point: the counts come from files and their product must not wrap.
	need := float64(reportBaseBytes) + float64(m.Probes)*BytesPerProbe + float64(m.Acked)*BytesPerAcked + float64(m.LineBytes)*BytesPerLineByte
	m.Bytes = int64(min(need, 1<<62))
	return m, errors.Join(errs...)
}

// String says what the need is made of, e.g. "about 1.1 GiB (17,600,000 probes × 64 B, 3.2 MiB
// of event, sample and log lines × 4, 64 MiB besides)".
func (m MemoryNeed) String() string {
	var parts []string
	if m.Probes > 0 {
		parts = append(parts, fmt.Sprintf("%s probes × %d B", group(m.Probes), BytesPerProbe))
	}
	if m.Acked > 0 {
		parts = append(parts, fmt.Sprintf("%s acknowledged orders × %d B", group(m.Acked), BytesPerAcked))
	}
	if m.LineBytes > 0 {
		parts = append(parts, fmt.Sprintf("%s of event, sample and log lines × %d", memSize(m.LineBytes), BytesPerLineByte))
	}
	parts = append(parts, memSize(reportBaseBytes)+" besides")
	return fmt.Sprintf("about %s (%s)", memSize(m.Bytes), strings.Join(parts, ", "))
}

// Check refuses m when it is more than available bytes (source says where that figure
// comes from, e.g. "MemAvailable in this machine's /proc/meminfo").
func (m MemoryNeed) Check(available int64, source string) error {
	if m.Bytes <= available {
		return nil
	}
	return fmt.Errorf("%w: analysing it needs %s; this machine has %s (%s)", ErrMemory, m, memSize(available), source)
}

func group(n int64) string { return units.Group(strconv.FormatInt(n, 10)) }

func memSize(b int64) string { return units.FormatMemory(float64(b)) }
