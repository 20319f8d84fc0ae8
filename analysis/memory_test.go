package analysis

import (
	"encoding/json"
	"errors"
	"github.com/rig-dev/rig/internal/memtest"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// peakOf runs fn and returns the growth of the process's peak resident set over it (VmHWM,
// reset first: writing 5 to /proc/self/clear_refs, proc(5)).
func peakOf(t *testing.T, fn func()) int64 {
	t.Helper()
	debug.FreeOSMemory() // what the fixture freed must not be resident already, or its reuse is not counted
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak resident set: %v", err)
	}
	rss := memtest.StatusBytes(t, "VmRSS")
	fn()
	return memtest.StatusBytes(t, "VmHWM") - rss
}

// memoryRun writes a run folder of probes probes at 1000/s with a snapshot, a kill and a
// relaunch, and, per node, an OS samples file of samples lines.
func memoryRun(t *testing.T, probes, samples int) string {
	f := newFixture(t)
	f.role(-1000, "node-0", "leader")
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.action(5000, "snapshot", "node-0", map[string]any{"index": 10, "leader": "node-0"})
	f.snap(5200, "node-0", 10, 150, nil)
	f.action(20000, "kill", "node-1", map[string]any{"signal": "KILL"})
	f.action(22000, "relaunch", "node-1", nil)
	f.phase(23000, "node-1", "ready")
	end := int64(probes) + 1000
	f.run(end, "load_end")
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		f.status(n, engine.Status{Phase: "ready", StateHash: "h"})
	}
	ps := make([]rundir.Probe, probes)
	for i := range ps {
		ps[i] = rundir.Probe{IntendedNs: at(int64(i)).UnixNano(), LatencyNs: int64(200_000 + i%1000*1000), Outcome: rundir.ProbeOK}
	}
	f.probes(ps)
	ps = nil
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		dir := filepath.Join(f.dir, n, rundir.SamplesDir)
		os.MkdirAll(dir, 0o755)
		fh, err := os.Create(filepath.Join(dir, "os"+rundir.SamplesExt))
		if err != nil {
			t.Fatal(err)
		}
		enc := json.NewEncoder(fh)
		for i := range samples {
			enc.Encode(rundir.Sample{Time: at(int64(i) * 1000), Seq: i, CPUs: 8, Disks: []rundir.SampleDisk{{Name: "nvme0n1", WriteMBPer: 12.5}},
				Procs: []rundir.SampleProc{{Comm: "engine", PID: 100}, {Comm: "agent", PID: 101}}})
		}
		fh.Close()
	}
	return f.close()
}

// TestReportMemoryMeasured is how BytesPerProbe and BytesPerLineByte were measured, and keeps
// them true: the peak resident growth of Analyze and WriteOutputs over a run folder of 2M
// probes, then over one of OS samples alone, per probe and per byte of samples. A constant must
// not be below what was measured (a folder the check lets through could still not fit), nor
// more than three times it (a figure so high it refuses folders that fit).
func TestReportMemoryMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("analyses a run folder of 2M probes (~200 MB)")
	}
	const probes = 2_000_000
	dir := memoryRun(t, probes, 0)
	need, err := EstimateMemory(dir)
	if err != nil || need.Probes != probes {
		t.Fatalf("estimate: %d probes, %v", need.Probes, err)
	}
	peak := peakOf(t, func() {
		s, err := Analyze(dir)
		if err != nil {
			t.Fatal(err)
		}
		if s.Probes.N+s.WarmupProbes != probes {
			t.Fatalf("%d probes analysed", s.Probes.N+s.WarmupProbes)
		}
		if err := WriteOutputs(dir, s); err != nil {
			t.Fatal(err)
		}
	})
	per := float64(peak) / probes
	t.Logf("%d probes: peak resident growth %.1f MB, %.1f B/probe; BytesPerProbe = %d; estimate %s", probes, float64(peak)/1e6, per, BytesPerProbe, need)
	if per > BytesPerProbe {
		t.Errorf("peak resident %.1f B per probe is above BytesPerProbe (%d): raise it", per, BytesPerProbe)
	}
	if 3*per < BytesPerProbe {
		t.Errorf("peak resident %.1f B per probe is under a third of BytesPerProbe (%d): measure it again", per, BytesPerProbe)
	}

	dir = memoryRun(t, 0, 40_000)
	if need, err = EstimateMemory(dir); err != nil || need.LineBytes == 0 {
		t.Fatalf("estimate: %d line bytes, %v", need.LineBytes, err)
	}
	peak = peakOf(t, func() {
		s, err := Analyze(dir)
		if err != nil {
			t.Fatal(err)
		}
		WriteOutputs(dir, s)
	})
	per = float64(peak) / float64(need.LineBytes)
	t.Logf("%.1f MB of samples: peak resident growth %.1f MB, %.2f B/byte; BytesPerLineByte = %d", float64(need.LineBytes)/1e6, float64(peak)/1e6, per, BytesPerLineByte)
	if per > BytesPerLineByte {
		t.Errorf("peak resident %.2f B per byte of lines is above BytesPerLineByte (%d): raise it", per, BytesPerLineByte)
	}
	if 3*per < BytesPerLineByte {
		t.Errorf("peak resident %.2f B per byte of lines is under a third of BytesPerLineByte (%d): measure it again", per, BytesPerLineByte)
	}
}

// The check refuses a folder that needs more than the machine has, naming what it needs, why,
// and what there is.
func TestReportMemoryCheck(t *testing.T) {
	m := MemoryNeed{Probes: 176_000_000, LineBytes: 3 << 20}
	m.Bytes = reportBaseBytes + m.Probes*BytesPerProbe + m.LineBytes*BytesPerLineByte
	err := m.Check(2<<30, "MemAvailable in this machine's /proc/meminfo")
	if !errors.Is(err, ErrMemory) {
		t.Fatalf("err = %v, want ErrMemory", err)
	}
	for _, want := range []string{"about 10.6 GiB", "176,000,000 probes × 64 B", "3.0 MiB of event, sample and log lines × 4", "this machine has 2.0 GiB (MemAvailable"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nlacks %q", err, want)
		}
	}
	if err := m.Check(m.Bytes, "x"); err != nil {
		t.Errorf("a need that fits exactly: %v", err)
	}
}
