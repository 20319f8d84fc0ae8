package analysis

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

// UDP bursts are joined by number over every load generator, take the receiver's figures from
// the server that received them, and are judged by BurstUDP's criteria; the report says
// what SO_RCVBUF was asked and granted, and which settings had no effect.
func TestUDPBurstFigures(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.run(10000, "load_end")
	series := func(sent int) map[string]any {
		return map[string]any{"transport": "udp", "size": 170, "senders": 1, "bursts": []any{
			map[string]any{"burst": 0, "due": at(3000), "sent": sent, "peak_per_ms": 400, "send_ns": 90_000_000},
			map[string]any{"burst": 1, "due": at(4000), "sent": sent, "peak_per_ms": 300, "send_ns": 80_000_000},
			map[string]any{"burst": 2, "due": at(5000), "sent": sent, "peak_per_ms": 300, "send_ns": 80_000_000},
		}}
	}
	f.writeJSON("manifest.json", map[string]any{"status": "ok",
		"playbook":       map[string]any{"name": "mb", "tuning": []any{map[string]any{"key": "net.core.rmem_max", "value": "212992"}}},
		"tuning_skipped": "on the local target it would change this machine's own kernel settings",
		"loadgen":        map[string]any{"bursts": []any{series(25000)}}})
	f.writeJSON("client-1/loadgen/bursts-0/bursts.json", series(25000))
	f.status("node-0", engine.Status{Phase: "ready", StateHash: "ab", UDP: &engine.UDP{
		RcvbufAsked: 128 << 20, RcvbufGranted: 425984, RmemMax: 212992,
		Bursts: []engine.UDPBurst{
			{Burst: 0, Sessions: 2, Received: 50000, First: at(3000), Last: at(3120), AbsorbMs: 120, PeakPerMs: 900,
				LatencyP50Us: 800, LatencyP99Us: 14000, LatencyMaxUs: 19000, Gaps: 3, Naks: 40, Repaired: 3, RepairMaxMs: 12.5,
				SocketDrops: 569, RcvbufErrors: 569, Closed: true},
			{Burst: 1, Sessions: 2, Received: 50000, First: at(4000), Last: at(4090), AbsorbMs: 90, PeakPerMs: 1100,
				LatencyP50Us: 90, LatencyP99Us: 400, LatencyMaxUs: 700, Closed: true},
			{Burst: 2, Sessions: 2, Received: 50000, First: at(5000), Last: at(5300), AbsorbMs: 300, PeakPerMs: 1100,
				LatencyP50Us: 900, LatencyP99Us: 4000, LatencyMaxUs: 5000, Closed: true},
		}}})
	f.status("node-1", engine.Status{Phase: "ready", StateHash: "ab", UDP: &engine.UDP{RcvbufAsked: 128 << 20, RcvbufGranted: 425984, RmemMax: 212992}})
	dir := f.close()
	s, err := Analyze(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Bursts) != 3 || s.Bursts[0].UDP == nil || s.Bursts[1].UDP == nil {
		t.Fatalf("bursts %+v", s.Bursts)
	}
	b0, b1 := s.Bursts[0], s.Bursts[1]
	if b0.Sent != 50000 || b0.PeakPerMs != 800 || b0.Lost != 0 || b0.AbsorbMs != 120 || b0.MaxLatencyMs != 19 ||
		b0.UDP.Receiver != "node-0" || b0.UDP.Senders != 2 || b0.UDP.PeakPerMs != 900 || *b0.UDP.P99Ms != 14 || b0.UDP.RcvbufErrors != 569 {
		t.Errorf("burst 0 %+v %+v", b0, *b0.UDP)
	}
	if b0.UDP.Pass || len(b0.UDP.Fail) != 4 || !strings.Contains(strings.Join(b0.UDP.Fail, "; "), "569 UDP receive-buffer errors; 569 datagrams dropped") {
		t.Errorf("burst 0 should fail on errors, drops, p99 and loss repair: %q", b0.UDP.Fail)
	}
	if !b1.UDP.Pass || b1.UDP.NICRxDrops != nil {
		t.Errorf("burst 1 should pass: %+v", *b1.UDP)
	}
	if in := s.UDPIngress["node-0"]; !in.Clamped || in.Granted != 425984 {
		t.Errorf("udp ingress %+v", s.UDPIngress)
	}
	if len(s.NotApplied) != 1 || s.NotApplied[0].Setting != "tuning.net.core.rmem_max" || s.NotApplied[0].Value != "212992" {
		t.Errorf("not applied %+v", s.NotApplied)
	}
	if err := WriteOutputs(dir, s); err != nil {
		t.Fatal(err)
	}
	rep, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	for _, want := range []string{
		"**tuning.net.core.rmem_max = 212992 had no effect: not applied** (on the local target",
		"node-0: SO_RCVBUF asked 128 MiB, got 416 KiB: net.core.rmem_max (208 KiB) clamps it.",
		"| 0 | 3.0 s | 170 B × 2 | 50000 | 50000 | 900 | 120 ms | 800 µs | 14.0 ms | 19.0 ms | 3 | 40 | 12.5 ms | 569 | **fail**: ",
		"| 1 | 4.0 s | 170 B × 2 | 50000 | 50000 | 1100 | 90.0 ms | 90 µs | 400 µs | 700 µs | 0 | 0 | — | 0 | pass |",
		"1 of 3 UDP bursts pass",
		"| **fail**: p99 4 ms >= 1 ms |",
		"1 failed on p99 alone, with nothing dropped or repaired: the buffer held",
	} {
		if !strings.Contains(string(rep), want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
}
