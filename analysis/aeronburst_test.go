package analysis

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// Two bursts through Aeron's ingress: the first overflows the receiver's socket buffer (the
// servers' samples around it grow RcvbufErrors, NAKs and loss-gap fills), the second is clean.
func TestAeronBurstFigures(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.run(10000, "load_end")
	f.writeJSON("manifest.json", map[string]any{"status": "ok"})
	f.writeJSON("client-0/loadgen/bursts-4/bursts.json", map[string]any{"transport": "aeron", "size": 170, "senders": 1, "messages": 50000,
		"bursts": []any{
			map[string]any{"burst": 4, "due": at(3000), "sent": 50000, "answered": 50000, "peak_per_ms": 9000, "answered_peak_per_ms": 700,
				"send_ns": 6_000_000, "drain_ns": 95_000_000, "p50_latency_ns": 40_000_000, "p99_latency_ns": 90_000_000, "max_latency_ns": 94_000_000,
				"back_pressured": 12, "client_counters": map[string]any{"retransmits_sent": 186, "nak_messages_received": 1315, "bytes_sent": 1}},
			map[string]any{"burst": 5, "due": at(6000), "sent": 10000, "answered": 10000, "answered_peak_per_ms": 2000, "peak_per_ms": 5000, "send_ns": 2_000_000,
				"p50_latency_ns": 200_000, "p99_latency_ns": 800_000, "max_latency_ns": 900_000},
		}})
	sample := func(ms int64, rcvbuf, naks, gaps int64) engine.TransportCounters {
		return engine.TransportCounters{Time: time.Unix(0, ms*1e6), UDPRcvbufErrors: rcvbuf,
			Counters: map[string]int64{CounterNaksSent: naks, CounterLossGapFills: gaps, CounterBackPressure: 0, "bytes_received": ms},
			Settings: map[string]int64{"aeron.rcv.initial.window.length": 4 << 20, "so_rcvbuf_granted": 425984, "net.core.rmem_max": 212992}}
	}
	f.writeJSON("client-0/loadgen/bursts-4/transport.json", rundir.TransportSamples{FirstBurst: 4, Nodes: map[string][]engine.TransportCounters{
		"node-0": {sample(2700, 100, 5, 0), sample(5700, 59388, 1320, 2), sample(9000, 59388, 1320, 2)},
		"node-1": {sample(2700, 100, 0, 0), sample(5700, 59388, 0, 0), sample(9000, 59388, 0, 0)},
		"node-2": {{}, sample(5700, 59388, 900, 9), sample(9000, 59388, 900, 9)}, // missed the first sample: no deltas for burst 4
	}})
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Bursts) != 2 || s.Bursts[0].UDP == nil || s.Bursts[0].UDP.Aeron == nil {
		t.Fatalf("bursts %+v", s.Bursts)
	}
	b0, b1 := s.Bursts[0], s.Bursts[1]
	u := b0.UDP
	if u.Transport != TransportAeron || u.Burst != 4 || u.Received != 50000 || u.PeakPerMs != 700 || u.AbsorbMs != 95 || u.P50Ms != 40 ||
		*u.P99Ms != 90 || u.MaxMs != 94 || u.RcvbufErrors != 59288 || u.Naks != 1315 || u.Gaps != 2 || u.Repaired != 186 || u.Aeron.Refused != 12 {
		t.Errorf("burst 4 %+v", *u)
	}
	if _, kept := u.Aeron.Nodes["client"]["bytes_sent"]; kept || u.Aeron.Nodes["node-0"][CounterNaksSent] != 1315 {
		t.Errorf("per-node counters %v", u.Aeron.Nodes)
	}
	if got := strings.Join(u.Fail, "; "); u.Pass || got != "59288 UDP receive-buffer errors; p99 "+fmtMs(90)+" >= 1 ms; 2 loss-gap fills" {
		t.Errorf("burst 4 fails on %q", got)
	}
	if !b1.UDP.Pass || b1.UDP.RcvbufErrors != 0 || b1.UDP.Naks != 0 {
		t.Errorf("burst 5 should pass: %+v", *b1.UDP)
	}
	var sb strings.Builder
	writeBursts(func(format string, a ...any) { sb.WriteString(fmt.Sprintf(format, a...)) }, s)
	for _, want := range []string{"| 4 | 3.0 s | 170 B × 1 | 50000 | 50000 | 700 |", "**fail**: 59288 UDP receive-buffer errors", "1 of 2 bursts through Aeron's ingress pass", "receiver window 4 MiB", "up to 5000 messages per ms for 2.00 ms): SO_RCVBUF at least P × S × burst ms = 1.6 MiB"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, sb.String())
		}
	}
}
