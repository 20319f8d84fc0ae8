package book

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

// Per-command benchmarks, shaped like the seed log's JMH suite: depth = price levels per side,
// 4 resting orders of qty 10 on each. One op is the whole scenario (2 or 13 commands).

const mid = 100_000

func depthBook(b *testing.B, depth int) (*Book, *uint64) {
	bk := New()
	id := uint64(1)
	for l := range depth {
		for range 4 {
			for _, o := range []Order{
				{ID: id, Instrument: 1, Side: Buy, Price: mid - 1 - int64(l), Qty: 10},
				{ID: id + 1, Instrument: 1, Side: Sell, Price: mid + int64(l), Qty: 10},
			} {
				if _, err := bk.Submit(o, nil); err != nil {
					b.Fatal(err)
				}
			}
			id += 2
		}
	}
	return bk, &id
}

var fills int

func countFill(Fill) { fills++ }

func BenchmarkPassiveAddCancel(b *testing.B) {
	for _, depth := range []int{10, 1000} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			bk, id := depthBook(b, depth)
			b.ReportAllocs()
			for b.Loop() {
				*id++
				if _, err := bk.Submit(Order{ID: *id, Instrument: 1, Side: Buy, Price: mid - 1, Qty: 10}, countFill); err != nil {
					b.Fatal(err)
				}
				if err := bk.Cancel(*id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAggressiveFillRefill(b *testing.B) {
	for _, depth := range []int{10, 1000} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			bk, id := depthBook(b, depth)
			b.ReportAllocs()
			for b.Loop() {
				*id++
				if r, _ := bk.Submit(Order{ID: *id, Instrument: 1, Side: Buy, Price: mid, Qty: 10}, countFill); r.Filled != 10 {
					b.Fatalf("filled %d", r.Filled)
				}
				*id++
				if r, _ := bk.Submit(Order{ID: *id, Instrument: 1, Side: Sell, Price: mid, Qty: 10}, countFill); r.Rested != 10 {
					b.Fatalf("rested %d", r.Rested)
				}
			}
		})
	}
}

func BenchmarkSweep3Levels(b *testing.B) {
	for _, depth := range []int{10, 1000} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			bk, id := depthBook(b, depth)
			b.ReportAllocs()
			for b.Loop() {
				*id++
				if r, _ := bk.Submit(Order{ID: *id, Instrument: 1, Side: Buy, Qty: 120, Market: true}, countFill); r.Filled != 120 {
					b.Fatalf("filled %d", r.Filled)
				}
				for l := range 3 {
					for range 4 {
						*id++
						bk.Submit(Order{ID: *id, Instrument: 1, Side: Sell, Price: mid + int64(l), Qty: 10}, countFill)
					}
				}
			}
		})
	}
}

// BenchmarkRestSequential: one op is one GTC order that rests, ids ascending, spread over 16
// instruments and 100 random levels a side as a preload sends them (engine/bookgen's default
// shape), into a book of b.N orders: the per-order apply cost of building a preloaded book.
// Run with -benchtime 1000000x for the book a 1M preload builds. cpu-ns/op is the process's CPU
// time (all threads), which a shared machine's load inflates less than wall time.
func BenchmarkRestSequential(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	orders := make([]Order, b.N)
	for k := range orders {
		o := Order{ID: uint64(k) + 1, Instrument: uint32(k % 16), Qty: 1 + rng.Int64N(100)}
		if (k/16)%2 == 0 {
			o.Side, o.Price = Buy, mid-100-rng.Int64N(100)
		} else {
			o.Side, o.Price = Sell, mid+100+rng.Int64N(100)
		}
		orders[k] = o
	}
	bk := New()
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuNow()
	for _, o := range orders {
		if _, err := bk.Submit(o, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuNow()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	if bk.Orders() != b.N {
		b.Fatalf("%d orders rest, want %d", bk.Orders(), b.N)
	}
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
