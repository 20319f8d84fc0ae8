package results

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

func TestBurstRowsAndRcvbufErrors(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.run(10000, "load_end")
	f.writeJSON("manifest.json", map[string]any{"status": "ok", "loadgen": map[string]any{
		"bursts": []any{map[string]any{"bursts": []any{
			map[string]any{"due": at(3000), "sent": 2000, "lost": 1, "peak_per_ms": 1500, "send_ns": 1_500_000, "drain_ns": 80_000_000, "max_latency_ns": 81_000_000},
			map[string]any{"due": at(4000), "sent": 2000, "peak_per_ms": 2000, "send_ns": 400_000, "drain_ns": 60_000_000, "max_latency_ns": 60_500_000},
		}}},
	}})
	// Two samples on node-0 with 3 and 4 receive-buffer drops; a torn last line is ignored.
	dir := filepath.Join(f.dir, "node-0", "samples")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "os-x.ndjson"), []byte(`{"cpus":2,"load":{"load1":1.5},"udp":{"rcvbuf_errors_delta":3}}
{"cpus":2,"load":{"load1":3.25,"overloaded":true},"udp":{"rcvbuf_errors_delta":4}}
{"udp":{"rcvbuf_err`), 0o644)
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Bursts) != 2 {
		t.Fatalf("bursts %+v", s.Bursts)
	}
	b := s.Bursts[0]
	if b.AtS != 3 || b.Sent != 2000 || b.Lost != 1 || b.PeakPerMs != 1500 || b.SendMs != 1.5 || b.AbsorbMs != 80 || b.MaxLatencyMs != 81 {
		t.Errorf("burst 1 %+v", b)
	}
	if s.Bursts[1].AtS != 4 || s.Bursts[1].AbsorbMs != 60 {
		t.Errorf("burst 2 %+v", s.Bursts[1])
	}
	if s.UDPRcvbufErrors["node-0"] != 7 {
		t.Errorf("rcvbuf errors %v, want node-0: 7", s.UDPRcvbufErrors)
	}
	var flagged bool
	for _, w := range s.Warnings {
		flagged = flagged || strings.Contains(w, "node-0: load average above its 2 CPUs in 1 of 2 OS samples (up to 3.25)")
	}
	if !flagged {
		t.Errorf("no per-node load warning in %q", s.Warnings)
	}
}

func TestDiskPlotFromSamples(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.action(2000, "snapshot", "node-0", nil)
	f.run(5000, "load_end")
	f.status("node-0", engine.Status{Phase: "ready", StateHash: "ab"})
	f.probes([]rundir.Probe{{IntendedNs: at(1500).UnixNano(), LatencyNs: 1e6}})
	var lines []byte
	for ms := int64(0); ms < 5000; ms += 500 {
		b, _ := json.Marshal(map[string]any{"time": at(ms), "disks": []any{map[string]any{"wmb_s": float64(ms) / 100}}})
		lines = append(append(lines, b...), '\n')
	}
	os.MkdirAll(filepath.Join(f.dir, "node-0", "samples"), 0o755)
	os.WriteFile(filepath.Join(f.dir, "node-0", "samples", "os-r.ndjson"), lines, 0o644)
	dir := f.close()
	s, err := Analyze(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteOutputs(dir, s); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(filepath.Join(dir, PlotDisk))
	if err != nil {
		t.Fatalf("no disk plot: %v (plots %v)", err, s.Plots)
	}
	defer fh.Close()
	if _, err := png.Decode(fh); err != nil {
		t.Fatal(err)
	}
	if pts := s.data.diskSeries()["node-0"]; len(pts) != 10 || pts[9].Y != 45 || pts[0].X != 0 {
		t.Errorf("disk series %v: want 10 samples from 0 s, the last at 45 MiB/s", pts)
	}
}
