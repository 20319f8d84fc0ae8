package server

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"runtime/trace"
	"slices"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/replica"
	"github.com/rig-dev/rig/engine/server/servertest"
	"github.com/rig-dev/rig/engine/wire"
)

// BenchmarkFlightRecorderCost measures the cost of the reference engine's flight recorder on
// an order's round trip (one-node engine, sync level 0 so the recorder's share is the largest),
// with the recorder on and off in alternating rounds so that the machine's load falls on both
// alike. It reports each mode's p50 and the overhead; quote it with the load average. The
// recorder traces this whole process, the client's goroutine too: an upper bound.
//
// The sub-benchmarks vary what the recorder keeps (MaxBytes, MinAge): the ring is filled by a
// reader goroutine of its own, so its size could only matter through that copy.
func BenchmarkFlightRecorderCost(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  trace.FlightRecorderConfig
	}{
		{"ring=64MiB,age=10s", trace.FlightRecorderConfig{MinAge: 10 * time.Second, MaxBytes: 64 << 20}},
		{"ring=1MiB,age=1s", trace.FlightRecorderConfig{MinAge: time.Second, MaxBytes: 1 << 20}},
	} {
		b.Run(c.name, func(b *testing.B) { benchFlightRecorderCost(b, c.cfg) })
	}
}

func benchFlightRecorderCost(b *testing.B, frCfg trace.FlightRecorderConfig) {
	cfg := servertest.Start(b, func(c *engine.Config) { c.SyncLevel = 0 }, func(ctx context.Context, node *replica.Node, log *slog.Logger, token string) error {
		return New(node, log, token).Run(ctx)
	})
	nc, err := net.Dial("tcp", cfg.ClientAddr)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	var id uint64
	roundTrip := func() time.Duration {
		id++
		req := wire.AppendRequest(nil, &wire.Request{Type: wire.TypeOrder, Corr: id,
			Order: wire.Order{ID: id, Instrument: 1, Side: wire.Buy, TIF: wire.IOC, Price: 100, Qty: 1}})
		start := time.Now()
		if _, err := nc.Write(req); err != nil {
			b.Fatal(err)
		}
		frame, err := wire.ReadFrame(br, nil)
		if err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		var r wire.Response
		if err := wire.DecodeResponse(frame, &r); err != nil || r.Status != wire.StatusOK {
			b.Fatalf("order %d: %v %+v", id, err, r)
		}
		return d
	}
	for range 200 { // warm up
		roundTrip()
	}
	const perRound = 200
	var on, off []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, rec := range []bool{i%2 == 0, i%2 != 0} { // alternate which goes first
			var fr *trace.FlightRecorder
			if rec {
				fr = trace.NewFlightRecorder(frCfg)
				if err := fr.Start(); err != nil {
					b.Fatal(err)
				}
			}
			for range perRound {
				if d := roundTrip(); rec {
					on = append(on, d)
				} else {
					off = append(off, d)
				}
			}
			if fr != nil {
				fr.Stop()
			}
		}
	}
	b.StopTimer()
	p50 := func(v []time.Duration) float64 {
		slices.Sort(v)
		return float64(v[len(v)/2].Nanoseconds()) / 1e3
	}
	pOn, pOff := p50(on), p50(off)
	b.ReportMetric(pOn, "p50_on_us")
	b.ReportMetric(pOff, "p50_off_us")
	b.ReportMetric((pOn/pOff-1)*100, "overhead_%")
}
