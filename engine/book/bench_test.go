package book

import (
	"fmt"
	"testing"
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
