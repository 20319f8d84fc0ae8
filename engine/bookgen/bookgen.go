// Package bookgen is the resting book a preload builds: its shape, its key, and its orders in
// the order they are sent. The load generator sends them through the log; an engine's driver
// builds a stored book from the same orders (engine/driver.BookInstaller), so neither imports
// the other.
package bookgen

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/rig-dev/rig/engine/wire"
)

// ErrBadOptions classifies invalid load generator options (the message names the field); a
// book shape is one of them (loadgen/loadspec.ErrBadOptions is this error).
var ErrBadOptions = errors.New("invalid load generator options")

// Book defaults.
const (
	DefaultInstruments = 16
	DefaultLevels      = 100
	DefaultSeed        = 1
	DefaultMid         = 1_000_000
	DefaultGap         = 100
	DefaultMaxQty      = 100
	// MaxPreloadID is the highest id a preload may use: probe ids have bit 63 set and burst ids
	// bit 62, so a probe or a burst can never collide with a resting order.
	MaxPreloadID = 1<<62 - 1
)

// Shape is the resting book a preload builds. Order k (k = 0..Orders-1) rests on instrument
// k mod Instruments, on the bid side for even (k / Instruments) and the ask side for odd, at a
// level drawn from Seed: bids at Mid-Gap-level, asks at Mid+Gap+level, level in [0, Levels).
// Nothing crosses: the best bid is Mid-Gap, the best ask Mid+Gap. The same shape always gives
// the same book.
type Shape struct {
	Orders      int64
	Instruments int    // default 16
	Levels      int    // price levels per side and instrument (default 100)
	Seed        uint64 // default 1
	Mid         int64  // default 1,000,000
	Gap         int64  // half spread, >= 1 (default 100)
	MaxQty      int64  // quantities in [1, MaxQty] (default 100)
	FirstID     uint64 // id of order 0 (default 1); ids run to FirstID+Orders-1 <= MaxPreloadID
}

// Normalize fills in the defaults and checks the shape.
func (b *Shape) Normalize() error {
	if b.Orders <= 0 {
		return fmt.Errorf("%w: orders: %d, want > 0", ErrBadOptions, b.Orders)
	}
	for _, f := range []struct {
		v    *int
		d    int
		name string
	}{{&b.Instruments, DefaultInstruments, "instruments"}, {&b.Levels, DefaultLevels, "levels"}} {
		if err := Default(f.v, f.d, f.name); err != nil {
			return err
		}
	}
	if b.Seed == 0 {
		b.Seed = DefaultSeed
	}
	if b.Mid == 0 {
		b.Mid = DefaultMid
	}
	if b.Gap == 0 {
		b.Gap = DefaultGap
	}
	if b.MaxQty == 0 {
		b.MaxQty = DefaultMaxQty
	}
	if b.FirstID == 0 {
		b.FirstID = 1
	}
	switch {
	case b.Gap < 1:
		return fmt.Errorf("%w: gap: %d, want >= 1 (best bid Mid-Gap must stay below best ask Mid+Gap)", ErrBadOptions, b.Gap)
	case b.MaxQty < 1:
		return fmt.Errorf("%w: max_qty: %d, want >= 1", ErrBadOptions, b.MaxQty)
	case b.Mid-b.Gap-int64(b.Levels-1) < 1:
		return fmt.Errorf("%w: mid %d, gap %d and %d levels put bids at or below 0", ErrBadOptions, b.Mid, b.Gap, b.Levels)
	case b.FirstID > MaxPreloadID || uint64(b.Orders) > MaxPreloadID-b.FirstID+1:
		return fmt.Errorf("%w: ids %d..%d exceed %d (higher ids belong to probes and bursts)", ErrBadOptions, b.FirstID, b.FirstID+uint64(b.Orders)-1, uint64(MaxPreloadID))
	}
	return nil
}

// Default sets *v to d when it is 0 and refuses a negative value, naming the field.
func Default(v *int, d int, name string) error {
	if *v < 0 {
		return fmt.Errorf("%w: %s: %d, want > 0", ErrBadOptions, name, *v)
	}
	if *v == 0 {
		*v = d
	}
	return nil
}

// Key names the book: two shapes with the same key build the same book (servers, batching and
// connection settings do not change it, and are not part of the shape).
func (b Shape) Key() (string, error) {
	if err := b.Normalize(); err != nil {
		return "", err
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "book v1 orders=%d instruments=%d levels=%d seed=%d mid=%d gap=%d max_qty=%d first_id=%d",
		b.Orders, b.Instruments, b.Levels, b.Seed, b.Mid, b.Gap, b.MaxQty, b.FirstID))
	return hex.EncodeToString(sum[:8]), nil
}

// Prices are the bounds of a normalized shape's resting prices: the best bid is BidHigh, the
// best ask AskLow.
func (b Shape) Prices() (bidLow, bidHigh, askLow, askHigh int64) {
	return b.Mid - b.Gap - int64(b.Levels-1), b.Mid - b.Gap, b.Mid + b.Gap, b.Mid + b.Gap + int64(b.Levels-1)
}

// Gen yields a normalized shape's orders in the order a preload sends them.
type Gen struct {
	o   *Shape
	rng *rand.Rand
	k   int64
}

// New starts the orders of o, which must be normalized.
func New(o *Shape) *Gen {
	return &Gen{o: o, rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))}
}

// More reports whether an order is left.
func (g *Gen) More() bool { return g.k < g.o.Orders }

// Next is the next order.
func (g *Gen) Next() wire.Order {
	k := g.k
	g.k++
	inst := k % int64(g.o.Instruments)
	level := g.rng.Int64N(int64(g.o.Levels))
	qty := 1 + g.rng.Int64N(g.o.MaxQty)
	o := wire.Order{ID: g.o.FirstID + uint64(k), Instrument: uint32(inst), TIF: wire.GTC, Qty: qty}
	if (k/int64(g.o.Instruments))%2 == 0 {
		o.Side, o.Price = wire.Buy, g.o.Mid-g.o.Gap-level
	} else {
		o.Side, o.Price = wire.Sell, g.o.Mid+g.o.Gap+level
	}
	return o
}

// Orders normalizes book and calls each with every order a preload of it sends, in order; an
// engine's driver builds a stored book from them in its own format.
func Orders(book Shape, each func(wire.Order) error) error {
	if err := book.Normalize(); err != nil {
		return err
	}
	for g := New(&book); g.More(); {
		if err := each(g.Next()); err != nil {
			return err
		}
	}
	return nil
}
