package book

import (
	"errors"
	"reflect"
	"testing"
)

type fillLog []Fill

func (f *fillLog) on(x Fill) { *f = append(*f, x) }

func mustSubmit(t *testing.T, b *Book, o Order) (Result, []Fill) {
	t.Helper()
	var fl fillLog
	r, err := b.Submit(o, fl.on)
	if err != nil {
		t.Fatalf("submit %+v: %v", o, err)
	}
	return r, fl
}

func TestPriceTimePriority(t *testing.T) {
	b := New()
	mustSubmit(t, b, Order{ID: 1, Side: Sell, Price: 101, Qty: 5})
	mustSubmit(t, b, Order{ID: 2, Side: Sell, Price: 100, Qty: 5})
	mustSubmit(t, b, Order{ID: 3, Side: Sell, Price: 100, Qty: 5})
	mustSubmit(t, b, Order{ID: 4, Side: Buy, Price: 99, Qty: 5})
	if got := b.Orders(); got != 4 {
		t.Fatalf("orders %d, want 4", got)
	}
	// Buy 12 at 101: fills 2 (100, first in time), 3 (100), then 2 of 1 (101).
	r, fills := mustSubmit(t, b, Order{ID: 10, Side: Buy, Price: 101, Qty: 12})
	want := []Fill{{2, 10, 100, 5}, {3, 10, 100, 5}, {1, 10, 101, 2}}
	if !reflect.DeepEqual([]Fill(fills), want) {
		t.Fatalf("fills %+v, want %+v", fills, want)
	}
	if r != (Result{Filled: 12}) {
		t.Fatalf("result %+v", r)
	}
	if d := b.Depth(0, Sell, 5); !reflect.DeepEqual(d, []Level{{101, 3, 1}}) {
		t.Fatalf("ask depth %+v", d)
	}
	// A buy that crosses part and rests the rest at its limit.
	r, _ = mustSubmit(t, b, Order{ID: 11, Side: Buy, Price: 102, Qty: 10})
	if r != (Result{Filled: 3, Rested: 7}) {
		t.Fatalf("result %+v", r)
	}
	if d := b.Depth(0, Buy, 5); !reflect.DeepEqual(d, []Level{{102, 7, 1}, {99, 5, 1}}) {
		t.Fatalf("bid depth %+v", d)
	}
	if d := b.Depth(0, Sell, 5); len(d) != 0 {
		t.Fatalf("ask depth %+v, want empty", d)
	}
}

func TestIOCAndMarket(t *testing.T) {
	b := New()
	mustSubmit(t, b, Order{ID: 1, Side: Buy, Price: 100, Qty: 5})
	mustSubmit(t, b, Order{ID: 2, Side: Buy, Price: 98, Qty: 5})
	h := b.StateHash()
	// IOC that crosses nothing leaves the book unchanged.
	r, fills := mustSubmit(t, b, Order{ID: 3, Side: Sell, Price: 101, Qty: 5, TIF: IOC})
	if r != (Result{}) || len(fills) != 0 || b.StateHash() != h || b.Orders() != 2 {
		t.Fatalf("IOC probe changed the book: %+v %+v", r, fills)
	}
	// IOC fills what crosses, never rests.
	r, _ = mustSubmit(t, b, Order{ID: 4, Side: Sell, Price: 99, Qty: 8, TIF: IOC})
	if r != (Result{Filled: 5}) || b.Orders() != 1 {
		t.Fatalf("IOC result %+v orders %d", r, b.Orders())
	}
	// Market ignores price and never rests.
	r, fills = mustSubmit(t, b, Order{ID: 5, Side: Sell, Price: 1 << 40, Qty: 9, Market: true})
	if r != (Result{Filled: 5}) || b.Orders() != 0 || len(fills) != 1 || fills[0].Price != 98 {
		t.Fatalf("market result %+v fills %+v orders %d", r, fills, b.Orders())
	}
	// Into an unknown instrument: nothing happens, nothing is created.
	r, _ = mustSubmit(t, b, Order{ID: 6, Instrument: 9, Side: Buy, Qty: 1, Market: true})
	if r != (Result{}) || b.Instruments() != 0 {
		t.Fatalf("market into empty instrument: %+v", r)
	}
}

func TestErrors(t *testing.T) {
	b := New()
	mustSubmit(t, b, Order{ID: 1, Side: Buy, Price: 100, Qty: 5})
	h := b.StateHash()
	for _, tc := range []struct {
		o    Order
		want error
	}{
		{Order{ID: 2, Side: Buy, Price: 100, Qty: 0}, ErrBadOrder},
		{Order{ID: 2, Side: Buy, Price: 100, Qty: -1}, ErrBadOrder},
		{Order{ID: 2, Side: 2, Price: 100, Qty: 1}, ErrBadOrder},
		{Order{ID: 2, Side: Buy, Price: 100, Qty: 1, TIF: 7}, ErrBadOrder},
		{Order{ID: 1, Side: Sell, Price: 100, Qty: 1}, ErrDuplicateID}, // would have traded
		{Order{ID: 1, Side: Buy, Price: 90, Qty: 1}, ErrDuplicateID},
	} {
		if _, err := b.Submit(tc.o, nil); !errors.Is(err, tc.want) {
			t.Errorf("submit %+v: err %v, want %v", tc.o, err, tc.want)
		}
	}
	if err := b.Cancel(77); !errors.Is(err, ErrUnknownOrder) {
		t.Errorf("cancel unknown: %v", err)
	}
	if b.StateHash() != h || b.Orders() != 1 {
		t.Fatal("a rejected command changed the book")
	}
	if err := b.Cancel(1); err != nil {
		t.Fatal(err)
	}
	if err := b.Cancel(1); !errors.Is(err, ErrUnknownOrder) {
		t.Errorf("second cancel: %v", err)
	}
	if b.Orders() != 0 || b.Levels() != 0 {
		t.Fatalf("orders %d levels %d after cancelling all", b.Orders(), b.Levels())
	}
}

// Cancels in the middle of a long queue leave placeholders and trigger compaction; the queue
// must keep time priority and every id must stay reachable.
func TestCancelMiddleAndCompaction(t *testing.T) {
	b := New()
	const n = 1000
	for i := 1; i <= n; i++ {
		mustSubmit(t, b, Order{ID: uint64(i), Side: Sell, Price: 50, Qty: int64(i)})
	}
	for i := 2; i < n; i += 2 { // every even id but the last
		if err := b.Cancel(uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 3; i < n-100; i += 4 {
		if err := b.Cancel(uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	var ids []uint64
	c := b.Walk()
	for {
		run, ok := c.Next(7)
		if !ok {
			break
		}
		for _, r := range run.Orders {
			if r.Qty != 0 {
				ids = append(ids, r.ID)
			}
		}
	}
	if len(ids) != b.Orders() {
		t.Fatalf("walk saw %d orders, book has %d", len(ids), b.Orders())
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("time priority broken at %d: %v", i, ids[i-1:i+1])
		}
	}
	for _, id := range ids {
		if _, _, _, q, ok := b.Lookup(id); !ok || q != int64(id) {
			t.Fatalf("lookup %d: qty %d ok %v", id, q, ok)
		}
	}
	// Sweep it all with a market order: fills in id order.
	var fills fillLog
	if _, err := b.Submit(Order{ID: 1 << 40, Side: Buy, Qty: 1 << 50, Market: true}, fills.on); err != nil {
		t.Fatal(err)
	}
	if len(fills) != len(ids) || b.Orders() != 0 {
		t.Fatalf("%d fills for %d orders, %d left", len(fills), len(ids), b.Orders())
	}
	for i, f := range fills {
		if f.MakerID != ids[i] {
			t.Fatalf("fill %d maker %d, want %d", i, f.MakerID, ids[i])
		}
	}
}

func TestDepthStopsAtN(t *testing.T) {
	b := New()
	for i := range 100 {
		mustSubmit(t, b, Order{ID: uint64(i + 1), Side: Buy, Price: int64(1000 - i), Qty: 1})
	}
	d := b.Depth(0, Buy, 3)
	if !reflect.DeepEqual(d, []Level{{1000, 1, 1}, {999, 1, 1}, {998, 1, 1}}) {
		t.Fatalf("depth %+v", d)
	}
	if d := b.Depth(1, Buy, 3); d != nil {
		t.Fatalf("unknown instrument depth %+v", d)
	}
}

func TestBuilderRejects(t *testing.T) {
	type add struct {
		inst  uint32
		side  Side
		price int64
		id    uint64
		qty   int64
	}
	for name, seq := range map[string][]add{
		"bids ascending":       {{1, Buy, 10, 1, 1}, {1, Buy, 11, 2, 1}},
		"asks descending":      {{1, Sell, 11, 1, 1}, {1, Sell, 10, 2, 1}},
		"sell before buy":      {{1, Sell, 11, 1, 1}, {1, Buy, 10, 2, 1}},
		"instrument goes back": {{2, Buy, 10, 1, 1}, {1, Buy, 10, 2, 1}},
		"duplicate id":         {{1, Buy, 10, 1, 1}, {1, Buy, 9, 1, 1}},
		"zero qty":             {{1, Buy, 10, 1, 0}},
		"crossed":              {{1, Buy, 10, 1, 1}, {1, Sell, 10, 2, 1}},
		"crossed last":         {{1, Buy, 10, 1, 1}, {1, Sell, 9, 2, 1}, {2, Buy, 5, 3, 1}},
	} {
		bl := NewBuilder(0, 0)
		var err error
		for _, a := range seq {
			if err = bl.Add(a.inst, a.side, a.price, a.id, a.qty); err != nil {
				break
			}
		}
		if err == nil {
			_, err = bl.Finish()
		}
		if !errors.Is(err, ErrSequence) {
			t.Errorf("%s: err %v, want ErrSequence", name, err)
		}
	}
}

// A level found through the near-price map is only ever a live level of the same side at that
// price: a freed level slot reused by the other side, or at another price of the same slot
// in the map, must not be taken for it.
func TestNearLevelsFollowFreedSlots(t *testing.T) {
	b := New()
	mustSubmit(t, b, Order{ID: 1, Side: Buy, Price: 1000, Qty: 1})
	mustSubmit(t, b, Order{ID: 2, Side: Buy, Price: 990, Qty: 1}) // not the best: found by the map
	mustSubmit(t, b, Order{ID: 3, Side: Buy, Price: 990, Qty: 1})
	for _, id := range []uint64{2, 3} {
		if err := b.Cancel(id); err != nil { // frees the 990 level's slot
			t.Fatal(err)
		}
	}
	mustSubmit(t, b, Order{ID: 7, Side: Buy, Price: 990, Qty: 3}) // a new level, not the freed one
	if got := b.Depth(0, Buy, 5); !reflect.DeepEqual(got, []Level{{Price: 1000, Qty: 1, Orders: 1}, {Price: 990, Qty: 3, Orders: 1}}) {
		t.Fatalf("bids after re-opening 990: %+v", got)
	}
	if err := b.Cancel(7); err != nil {
		t.Fatal(err)
	}
	mustSubmit(t, b, Order{ID: 4, Side: Sell, Price: 990 + nearSlots*10, Qty: 1}) // reuses it: same map slot, other side
	mustSubmit(t, b, Order{ID: 5, Side: Buy, Price: 990 - nearSlots, Qty: 1})     // same map slot, same side
	mustSubmit(t, b, Order{ID: 6, Side: Buy, Price: 990, Qty: 2})
	want := []Level{{Price: 1000, Qty: 1, Orders: 1}, {Price: 990, Qty: 2, Orders: 1}, {Price: 990 - nearSlots, Qty: 1, Orders: 1}}
	if got := b.Depth(0, Buy, 5); !reflect.DeepEqual(got, want) {
		t.Fatalf("bids %+v, want %+v", got, want)
	}
	if got := b.Depth(0, Sell, 5); !reflect.DeepEqual(got, []Level{{Price: 990 + nearSlots*10, Qty: 1, Orders: 1}}) {
		t.Fatalf("asks %+v", got)
	}
	if _, side, price, _, ok := b.Lookup(6); !ok || side != Buy || price != 990 {
		t.Fatalf("order 6 rests at %v %d (%v), want buy 990", side, price, ok)
	}
}
