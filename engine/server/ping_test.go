package server

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rig-dev/rig/diskmodel"
	"github.com/rig-dev/rig/diskmodel/fusefs"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/wire"
)

// A ping is answered while the leader's log waits for a slow sync: the engine's data is on a
// disk model where every fsync takes 400 ms, so each log append holds raft's leader loop; raft's
// apply queue takes 64 commands, and Apply blocks for the rest. The commands' replies must show
// that stall (else the test proves nothing), and the ping sent behind them must come back long
// before it ends (before this fix it came back after the sync).
func TestPingAnsweredWhileLogSyncs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting the disk model (FUSE, mount(2)) needs root")
	}
	const syncCost = 400 * time.Millisecond
	d, err := fusefs.Mount(context.Background(), fusefs.Options{Backing: t.TempDir(), Mountpoint: t.TempDir(),
		Limits: diskmodel.Limits{SyncLatency: syncCost}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil && !errors.Is(err, fusefs.ErrDetached) {
			t.Errorf("unmount: %v", err)
		}
	})
	cfg := startEngineWith(t, func(c *engine.Config) {
		c.Dir = filepath.Join(d.Dir(), "n0")
		c.SyncLevel = 2
		// A one-node cluster: its timers only need to outlast the slow syncs of its start.
		c.HeartbeatTimeout, c.ElectionTimeout = "2s", "2s"
	})
	nc, err := net.Dial("tcp", cfg.ClientAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	order := func(i int) []byte {
		return wire.AppendRequest(nil, &wire.Request{Type: wire.TypeOrder, Corr: uint64(i),
			Order: wire.Order{ID: uint64(i), Instrument: 1, Side: wire.Buy, TIF: wire.IOC, Price: 100, Qty: 1}})
	}
	// The first order starts a log append; the rest and the ping arrive while it syncs.
	if _, err := nc.Write(order(1)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(syncCost / 4)
	const orders = 300 // more than raft's apply queue holds (MaxAppendEntries, 64 by default with BatchApplyCh)
	var out []byte
	for i := 2; i <= orders; i++ {
		out = append(out, order(i)...)
	}
	const pingCorr = 1 << 63
	out = wire.AppendRequest(out, &wire.Request{Type: wire.TypePing, Corr: pingCorr})
	sent := time.Now()
	if _, err := nc.Write(out); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(nc)
	var pingAt, lastOrderAt time.Duration
	for got := 0; got < orders+1; got++ {
		frame, err := wire.ReadFrame(br, nil)
		if err != nil {
			t.Fatalf("reading reply %d: %v", got+1, err)
		}
		var r wire.Response
		if err := wire.DecodeResponse(frame, &r); err != nil {
			t.Fatal(err)
		}
		switch {
		case r.Corr == pingCorr:
			pingAt = time.Since(sent)
		case r.Status != wire.StatusOK:
			t.Fatalf("order %d: status %d %s", r.Corr, r.Status, r.Text)
		default:
			lastOrderAt = time.Since(sent)
		}
	}
	t.Logf("ping answered after %v; the last of %d orders after %v (each log sync %v)", pingAt, orders, lastOrderAt, syncCost)
	if lastOrderAt < syncCost/2 {
		t.Fatalf("the orders were answered after %v, before one %v sync: the log did not stall, so the ping proves nothing", lastOrderAt, syncCost)
	}
	if pingAt > syncCost/2 {
		t.Fatalf("ping answered after %v, behind the log's %v sync; want it answered at once", pingAt, syncCost)
	}
}
