package loadgen

import (
	"encoding/binary"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine/wire"
	"github.com/rig-dev/rig/rundir"
)

// benchStream is a probe stream wired to real output files but no network, so the benchmark
// measures the load generator's own CPU cost per probe.
func benchStream(b *testing.B) (*stream, *conn) {
	b.Helper()
	dir := b.TempDir()
	sink, err := createSink(filepath.Join(dir, rundir.ProbesFile))
	if err != nil {
		b.Fatal(err)
	}
	period := 1e9 / 5000.0
	cfg := streamConfig{
		kind: "probe", servers: []string{"bench:1"}, log: slog.New(slog.DiscardHandler),
		at: func(i int64) int64 { return int64(float64(i) * period) }, total: streamMax,
		chunk: probeChunk, grace: time.Second, instruments: 16, price: 1, sink: sink,
		hlogWidth: int64(time.Second),
	}
	s := newStream(cfg, probeIDBit)
	hl, err := createIntervalLog(filepath.Join(dir, rundir.ProbesHlogFile), s.epochUnix, cfg.hlogWidth, "bench")
	if err != nil {
		b.Fatal(err)
	}
	s.hl = hl
	s.endAt = 1 << 62
	c := &conn{cl: s.cl, addr: "bench:1", inflight: make(map[uint64]struct{})}
	b.Cleanup(func() {
		s.cl.close()
		hl.close(0, "")
		sink.close()
	})
	return s, c
}

// BenchmarkProbePath is the client-side cost of one probe without the syscalls: schedule it,
// put it in flight, encode its frame, decode its answer, route the answer and record it
// (probes.bin record, run and interval histograms, send lag). Run:
//
//	go test ./loadgen -run '^$' -bench ProbePath -benchmem
func BenchmarkProbePath(b *testing.B) {
	b.Run("full", func(b *testing.B) {
		s, c := benchStream(b)
		cl := s.cl
		var out []byte
		resp := wire.AppendResponse(nil, &wire.Response{Type: wire.TypeOrder, Status: wire.StatusOK, Index: 1})
		var r wire.Response
		corrs := make([]uint64, 1)
		var lags []int64
		b.ReportAllocs()
		b.ResetTimer()
		for i := int64(0); i < int64(b.N); i++ {
			corr := uint64(i + 1)
			s.scheduleChunk(i, i+1)
			cl.mu.Lock()
			c.inflight[corr] = struct{}{}
			cl.mu.Unlock()
			corrs[0] = corr
			out = s.encode(out[:0], corr)
			now := cl.now()
			lags = s.sentChunk(i, i+1, writeTimes{woke: now, at: now}, lags, false)
			binary.LittleEndian.PutUint64(resp[5:], corr) // the server echoes the correlation id
			if err := wire.DecodeResponse(resp[4:], &r); err != nil {
				b.Fatal(err)
			}
			cl.onResponse(c, &r, cl.now())
		}
		b.StopTimer()
		if s.answered != int64(b.N) {
			b.Fatalf("answered %d of %d", s.answered, b.N)
		}
	})
	b.Run("encode", func(b *testing.B) {
		s, _ := benchStream(b)
		var out []byte
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			out = s.encode(out[:0], uint64(i+1))
		}
	})
	b.Run("decode", func(b *testing.B) {
		resp := wire.AppendResponse(nil, &wire.Response{Type: wire.TypeOrder, Status: wire.StatusOK, Index: 1})
		var r wire.Response
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := wire.DecodeResponse(resp[4:], &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("record", func(b *testing.B) {
		s, _ := benchStream(b)
		r := wire.Response{Type: wire.TypeOrder, Status: wire.StatusOK}
		b.ReportAllocs()
		for i := int64(0); i < int64(b.N); i++ {
			s.scheduleChunk(i, i+1)
			s.answer(uint64(i+1), &r, s.cfg.at(i)+50_000)
		}
	})
}

// rig bench loadgen's measurement end to end on loopback, small: every figure is there and
// consistent (the receiver's latency comes from the load generator's stamped bursts only).
func TestBenchSendReports(t *testing.T) {
	rep, err := BenchSend(t.Context(), BenchOptions{Messages: 2000, Size: 170, Repeats: 1, Rates: []float64{1000},
		Spins: []time.Duration{0, 50 * time.Microsecond}, For: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.BurstMs <= 0 || rep.BareMs <= 0 || rep.Ratio <= 0 || rep.Received == 0 {
		t.Errorf("burst figures %+v", rep)
	}
	if !(rep.RecvP50Us > 0 && rep.RecvP50Us <= rep.RecvP99Us && rep.RecvP99Us <= rep.RecvMaxUs) {
		t.Errorf("receiver latency p50 %v p99 %v max %v", rep.RecvP50Us, rep.RecvP99Us, rep.RecvMaxUs)
	}
	if len(rep.ProbeLag) != 2 || rep.ProbeLag[0].SpinUs != 0 || rep.ProbeLag[1].SpinUs != 50 {
		t.Fatalf("probe lag rows %+v, want one per spin", rep.ProbeLag)
	}
	for _, l := range rep.ProbeLag {
		if l.Rate != 1000 || l.Probes != 200 || l.P50Us > l.P99Us || l.P99Us > l.MaxUs {
			t.Errorf("probe lag %+v", l)
		}
	}
}
