package bookgen

import (
	"errors"
	"testing"

	"github.com/rig-dev/rig/engine/wire"
)

// Orders gives the shape's orders in id order, each inside the shape's prices on its side, the
// same ones every time; a bad shape is refused naming the field.
func TestOrders(t *testing.T) {
	shape := Shape{Orders: 1000, Instruments: 3, Levels: 7, Seed: 5}
	var first []wire.Order
	if err := Orders(shape, func(o wire.Order) error { first = append(first, o); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := shape.Normalize(); err != nil {
		t.Fatal(err)
	}
	bidLow, bidHigh, askLow, askHigh := shape.Prices()
	for k, o := range first {
		if o.ID != uint64(k)+1 || o.Instrument != uint32(k%3) || o.TIF != wire.GTC {
			t.Fatalf("order %d: %+v", k, o)
		}
		if (o.Side == wire.Buy && (o.Price < bidLow || o.Price > bidHigh)) || (o.Side == wire.Sell && (o.Price < askLow || o.Price > askHigh)) {
			t.Fatalf("order %d at %d outside bids %d..%d, asks %d..%d", k, o.Price, bidLow, bidHigh, askLow, askHigh)
		}
	}
	k := 0
	if err := Orders(shape, func(o wire.Order) error {
		if o != first[k] {
			t.Fatalf("order %d: %+v the second time, %+v the first", k, o, first[k])
		}
		k++
		return nil
	}); err != nil || k != len(first) {
		t.Fatalf("second pass: %d orders, %v", k, err)
	}
	if err := Orders(Shape{Orders: 10, Gap: -1}, func(wire.Order) error { return nil }); !errors.Is(err, ErrBadOptions) {
		t.Errorf("a negative gap: %v; want ErrBadOptions", err)
	}
	a, _ := Shape{Orders: 10}.Key()
	b, _ := Shape{Orders: 10, Instruments: DefaultInstruments}.Key()
	c, _ := Shape{Orders: 11}.Key()
	if a != b || a == c {
		t.Errorf("keys: defaults %s vs explicit %s, other orders %s", a, b, c)
	}
}
