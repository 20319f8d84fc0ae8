package results

import (
	"os"
	"path/filepath"
	"testing"
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
	os.WriteFile(filepath.Join(dir, "os-x.ndjson"), []byte(`{"udp":{"rcvbuf_errors_delta":3}}
{"udp":{"rcvbuf_errors_delta":4}}
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
}
