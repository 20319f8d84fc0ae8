package loadgen

import (
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine/bookgen"
	"github.com/rig-dev/rig/engine/wire"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"github.com/rig-dev/rig/rundir"
)

// checkBook asserts the orders are exactly ids first..first+n-1, rest on both sides of every
// instrument on several levels with several orders per level, and never cross.
func checkBook(t *testing.T, orders []wire.Order, n int64, instruments int) {
	t.Helper()
	if int64(len(orders)) != n {
		t.Fatalf("%d orders rest, want %d", len(orders), n)
	}
	seen := make(map[uint64]bool, n)
	type lv struct {
		inst  uint32
		price int64
	}
	perLevel := map[lv]int{}
	bestBid := map[uint32]int64{}
	bestAsk := map[uint32]int64{}
	for _, o := range orders {
		if seen[o.ID] {
			t.Fatalf("order id %d sent twice", o.ID)
		}
		seen[o.ID] = true
		if o.ID < 1 || o.ID > uint64(n) || o.ID > loadspec.MaxPreloadID {
			t.Fatalf("order id %d outside the preload range 1..%d", o.ID, n)
		}
		if o.TIF != wire.GTC || o.Market || o.Qty < 1 || int(o.Instrument) >= instruments {
			t.Fatalf("order %+v is not a resting limit order on a known instrument", o)
		}
		perLevel[lv{o.Instrument, o.Price}]++
		if o.Side == wire.Buy {
			if b, ok := bestBid[o.Instrument]; !ok || o.Price > b {
				bestBid[o.Instrument] = o.Price
			}
		} else if a, ok := bestAsk[o.Instrument]; !ok || o.Price < a {
			bestAsk[o.Instrument] = o.Price
		}
	}
	for i := range instruments {
		b, okb := bestBid[uint32(i)]
		a, oka := bestAsk[uint32(i)]
		if !okb || !oka {
			t.Fatalf("instrument %d lacks a side (bid %v, ask %v)", i, okb, oka)
		}
		if b >= a {
			t.Fatalf("instrument %d crosses: best bid %d >= best ask %d", i, b, a)
		}
	}
	multi := 0
	for _, k := range perLevel {
		if k > 1 {
			multi++
		}
	}
	if len(perLevel) < 4*instruments || multi < len(perLevel)/2 {
		t.Fatalf("%d price levels, %d with more than one order: want several levels with several orders each", len(perLevel), multi)
	}
}

func TestPreloadSendsExactlyNNonCrossingOrders(t *testing.T) {
	c := startCluster(t, 3)
	c.SetLeader(1)
	const n = 10_007 // not a multiple of the batch
	var reports []PreloadProgress
	st, err := Preload(t.Context(), PreloadOptions{BookShape: loadspec.BookShape{Orders: n, Instruments: 7, Levels: 20}, Servers: c.Addrs(), Batch: 1000, InFlight: 3, Logger: testLogger(t), Progress: func(p PreloadProgress) { reports = append(reports, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if st.Orders != n || st.Batches != 11 || st.Duplicates != 0 || st.Filled != 0 {
		t.Fatalf("stats %+v, want %d orders in 11 batches", st, n)
	}
	if st.Conn.Redirects < 1 || st.Conn.Leader != c.Addrs()[1] {
		t.Errorf("redirects %d, leader %s: the first server is a follower", st.Conn.Redirects, st.Conn.Leader)
	}
	if st.OrdersPerSec <= 0 {
		t.Errorf("orders/s %v", st.OrdersPerSec)
	}
	orders := c.Orders()
	checkBook(t, orders, n, 7)
	// The first batch went to a follower and was resent to the leader: still, batches enter the
	// log in the order they were generated, so the book is the same on every run.
	for i := 1; i < len(orders); i++ {
		if orders[i].ID < orders[i-1].ID {
			t.Fatalf("order %d applied after order %d: batches overtook one another after the redirect", orders[i].ID, orders[i-1].ID)
		}
	}
	if cs := c.Stats(); cs.Crossed != 0 || cs.Applied != 11 {
		t.Errorf("engine double: %+v, want 11 batches applied and nothing crossed", cs)
	}
	b := st.Book
	for _, o := range orders {
		if (o.Side == wire.Buy && (o.Price < b.BidLow || o.Price > b.BidHigh)) || (o.Side == wire.Sell && (o.Price < b.AskLow || o.Price > b.AskHigh)) {
			t.Fatalf("order %+v outside the reported book %+v", o, b)
		}
	}
	if b.AskLow <= loadspec.DefaultProbePrice {
		t.Errorf("best possible ask %d: the default probe (buy at %d) would cross", b.AskLow, loadspec.DefaultProbePrice)
	}

	// Deterministic: the same options give the same orders (batches may land out of order
	// after a redirect, so compare by id).
	sort.Slice(orders, func(i, j int) bool { return orders[i].ID < orders[j].ID })
	o := PreloadOptions{BookShape: loadspec.BookShape{Orders: n, Instruments: 7, Levels: 20}, Servers: []string{"x:1"}}
	if err := o.normalize(); err != nil {
		t.Fatal(err)
	}
	g := bookgen.New(&o.BookShape)
	for k := range orders {
		if got := g.Next(); got != orders[k] {
			t.Fatalf("order %d: regenerated %+v, sent %+v", k, got, orders[k])
		}
	}
	o.Seed = 2
	g = bookgen.New(&o.BookShape)
	same := 0
	for k := range 100 {
		if g.Next() == orders[k] {
			same++
		}
	}
	if same == 100 {
		t.Error("a different seed gave the same book")
	}
}

// Leadership moves and the connection drops mid-preload: every order still lands exactly once;
// a resent batch the book already applied is counted as a duplicate, not an error.
func TestPreloadSurvivesDropsAndLeaderChange(t *testing.T) {
	c := startCluster(t, 2)
	c.SetDelay(5 * time.Millisecond)
	const n = 60_000
	done := make(chan struct{})
	var st rundir.PreloadStats
	var err error
	go func() {
		defer close(done)
		st, err = Preload(t.Context(), PreloadOptions{BookShape: loadspec.BookShape{Orders: n}, Servers: c.Addrs(), Batch: 500, InFlight: 4, Logger: testLogger(t)})
	}()
	waitFor(t, func() bool { return c.Stats().Orders >= 10_000 })
	c.DropConns(0)
	waitFor(t, func() bool { return c.Stats().Orders >= 25_000 })
	c.Stall(50 * time.Millisecond)
	c.SetLeader(1)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	checkBook(t, c.Orders(), n, loadspec.DefaultInstruments)
	if st.Orders != n {
		t.Errorf("acknowledged %d orders, want %d", st.Orders, n)
	}
	if st.Conn.ConnLosses < 1 || len(st.Conn.LeaderChanges) != 1 {
		t.Errorf("connection losses %d, leader changes %v", st.Conn.ConnLosses, st.Conn.LeaderChanges)
	}
	t.Logf("duplicates %d, resent %d, errors %d", st.Duplicates, st.Conn.Resent, st.Conn.Errors)
}

func TestPreloadRejectedOnFirstSendIsAnError(t *testing.T) {
	c := startCluster(t, 1)
	c.Seed(wire.Order{ID: 1500, Instrument: 0, Side: wire.Buy, Price: 10, Qty: 1})
	_, err := Preload(t.Context(), PreloadOptions{BookShape: loadspec.BookShape{Orders: 3000}, Servers: c.Addrs()})
	if !errors.Is(err, ErrRejected) {
		t.Fatalf("err %v, want ErrRejected", err)
	}
}

func TestPreloadOptionsRejected(t *testing.T) {
	type B = loadspec.BookShape
	for _, o := range []PreloadOptions{
		{BookShape: B{Orders: 10}},
		{Servers: []string{"a:1"}},
		{Servers: []string{"a:1"}, BookShape: B{Orders: 10, Levels: -1}},
		{Servers: []string{"a:1"}, BookShape: B{Orders: 10, Gap: -1}},
		{Servers: []string{"a:1"}, BookShape: B{Orders: 10, Mid: 50, Levels: 100}},
		{Servers: []string{"a:1"}, BookShape: B{Orders: 10, FirstID: loadspec.MaxPreloadID}},
		{Servers: []string{"a:1"}, BookShape: B{Orders: 10}, Batch: 1 << 20},
	} {
		if _, err := Preload(t.Context(), o); !errors.Is(err, ErrBadOptions) {
			t.Errorf("%+v: err %v, want ErrBadOptions", o, err)
		}
	}
}
