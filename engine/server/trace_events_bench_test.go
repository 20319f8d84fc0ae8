package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"runtime/trace"
	"slices"
	"testing"
	"time"

	xtrace "golang.org/x/exp/trace"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/replica"
	"github.com/rig-dev/rig/engine/server/servertest"
	"github.com/rig-dev/rig/engine/wire"
)

// BenchmarkTraceEventsPerOrder counts what the runtime writes into a trace for one order's
// round trip (one-node engine, sync level 0, the client's goroutine traced too): events, those
// carrying a stack, and the kinds that make them. runtime/trace cannot leave any kind out, so
// this count times a per-event cost is the recorder's cost per order, whatever its ring's size.
func BenchmarkTraceEventsPerOrder(b *testing.B) {
	t := b
	cfg := servertest.Start(t, func(c *engine.Config) { c.SyncLevel = 0 }, func(ctx context.Context, node *replica.Node, log *slog.Logger, token string) error {
		return New(node, log, token).Run(ctx)
	})
	nc, err := net.Dial("tcp", cfg.ClientAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	var id uint64
	rt := func() {
		id++
		req := wire.AppendRequest(nil, &wire.Request{Type: wire.TypeOrder, Corr: id,
			Order: wire.Order{ID: id, Instrument: 1, Side: wire.Buy, TIF: wire.IOC, Price: 100, Qty: 1}})
		if _, err := nc.Write(req); err != nil {
			t.Fatal(err)
		}
		if _, err := wire.ReadFrame(br, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 200 {
		rt()
	}
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: 10 * time.Second, MaxBytes: 64 << 20})
	if err := fr.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	n := b.N
	b.ResetTimer()
	for range n {
		rt()
	}
	b.StopTimer()
	var buf bytes.Buffer
	if _, err := fr.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	fr.Stop()
	size := buf.Len()
	r, err := xtrace.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	stacks := 0
	total := 0
	for {
		ev, err := r.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		total++
		k := ev.Kind().String()
		if ev.Kind() == xtrace.EventStateTransition {
			st := ev.StateTransition()
			if st.Resource.Kind == xtrace.ResourceGoroutine {
				a, b := st.Goroutine()
				k += " " + a.String() + "->" + b.String()
			}
		}
		counts[k]++
		if ev.Stack() != xtrace.NoStack {
			stacks++
		}
	}
	b.ReportMetric(float64(total)/float64(n), "events/order")
	b.ReportMetric(float64(stacks)/float64(n), "stacks/order")
	b.ReportMetric(float64(size)/float64(n), "bytes/order")
	kinds := slices.Sorted(maps.Keys(counts))
	for _, k := range kinds {
		if v := counts[k]; v > n/10 {
			b.Logf("%s: %.2f an order", k, float64(v)/float64(n))
		}
	}
}
