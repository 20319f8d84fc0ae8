// Package bench measures the reference engine alone: snapshot take and restore cost per order,
// heap and wire bytes per order, and allocations per take, at several book sizes, linear and
// parallel. It backs `rig bench engine` (README.md, "Commands").
//
// Method (docs/architecture.md, "Measurement rules"): the take is timed against a drain-only sink,
// the median of at least 15 takes per point, the thread settings interleaved round by round; every
// parallel output is first checked byte for byte against the linear one; restore is timed in its
// own pass from an in-memory copy of the stream; heap is measured after GC, the built book minus an
// empty one; the load average is recorded with every size.
package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/rig-dev/rig/engine/book"
	"github.com/rig-dev/rig/engine/snapshot"
	"github.com/rig-dev/rig/internal/loadavg"
)

// MinTakes is the fewest takes per point a median is reported from.
const MinTakes = 15

// Options of a run. Zero values take the defaults noted.
type Options struct {
	Orders      []int  // book sizes (default 100k, 1M, 5M)
	Threads     []int  // encode threads per take (default 1, 2)
	Takes       int    // takes per (size, threads) point, at least MinTakes (default 15)
	Restores    int    // timed restores per size (default 3)
	Instruments int    // instruments in the book (default 8)
	Levels      int    // price levels per side per instrument (default 1000)
	BlockSize   int    // snapshot block size (default snapshot.DefaultBlockSize)
	Seed        uint64 // book generator seed
	// ParallelMinOrders is passed to snapshot.Options (0: the snapshot default; 1: parallel
	// at every size, to measure where parallel starts to pay).
	ParallelMinOrders int
	Log               *slog.Logger
}

// Result is one (orders, threads) point.
type Result struct {
	Orders            int     `json:"orders"`
	Threads           int     `json:"threads"`
	TakeNsPerOrder    float64 `json:"take_ns_per_order"`    // median take / orders
	RestoreNsPerOrder float64 `json:"restore_ns_per_order"` // median restore / orders (restore is single-threaded: same for every threads row)
	HeapBytesPerOrder float64 `json:"heap_bytes_per_order"` // live heap after GC, book minus empty book
	WireBytesPerOrder float64 `json:"wire_bytes_per_order"`
	AllocsPerTake     float64 `json:"allocs_per_take"` // median heap allocations per take
	Takes             int     `json:"takes"`

	TakeMsP50         float64 `json:"take_ms_p50"`
	TakeMsMin         float64 `json:"take_ms_min"`
	TakeMsMax         float64 `json:"take_ms_max"`
	AllocBytesPerTake float64 `json:"alloc_bytes_per_take"` // median bytes allocated per take
	Identical         bool    `json:"identical"`            // output byte-identical to linear (checked before timing)
	LoadAvg           float64 `json:"load_avg"`             // highest 1-minute load average while this size ran
}

// Report of a run.
type Report struct {
	LoadAvg   float64  `json:"load_avg"` // highest 1-minute load average seen during the run
	CPUs      int      `json:"cpus"`
	GoVersion string   `json:"go_version"`
	Results   []Result `json:"results"`
}

func (o *Options) defaults() error {
	if len(o.Orders) == 0 {
		o.Orders = []int{100_000, 1_000_000, 5_000_000}
	}
	if len(o.Threads) == 0 {
		o.Threads = []int{1, 2}
	}
	if o.Takes == 0 {
		o.Takes = MinTakes
	}
	if o.Restores == 0 {
		o.Restores = 3
	}
	if o.Instruments == 0 {
		o.Instruments = 8
	}
	if o.Levels == 0 {
		o.Levels = 1000
	}
	if o.BlockSize == 0 {
		o.BlockSize = snapshot.DefaultBlockSize
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.Takes < MinTakes:
		return fmt.Errorf("takes %d: want at least %d (a median of fewer carries warm-up noise)", o.Takes, MinTakes)
	case o.Restores < 1:
		return fmt.Errorf("restores %d: want at least 1", o.Restores)
	case o.Instruments < 1 || o.Levels < 1:
		return fmt.Errorf("instruments %d, levels %d: want at least 1 each", o.Instruments, o.Levels)
	case o.BlockSize < 1:
		return fmt.Errorf("block size %d: want > 0", o.BlockSize)
	}
	for _, n := range o.Orders {
		if n < 1 {
			return fmt.Errorf("orders %d: want at least 1", n)
		}
	}
	for _, t := range o.Threads {
		if t < 1 {
			return fmt.Errorf("threads %d: want at least 1", t)
		}
	}
	return nil
}

// Run measures every size in opts.Orders at every thread count in opts.Threads.
func Run(ctx context.Context, opts Options) (Report, error) {
	if err := opts.defaults(); err != nil {
		return Report{}, err
	}
	rep := Report{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	for _, n := range opts.Orders {
		res, err := runSize(ctx, n, &opts)
		if err != nil {
			return rep, fmt.Errorf("bench %d orders: %w", n, err)
		}
		for _, r := range res {
			rep.LoadAvg = max(rep.LoadAvg, r.LoadAvg)
		}
		rep.Results = append(rep.Results, res...)
	}
	return rep, nil
}

func runSize(ctx context.Context, n int, o *Options) ([]Result, error) {
	load := loadAvg()
	o.Log.Info("building book", "orders", n, "load_avg", load)

	// Heap: live heap with the built book minus live heap with an empty one, so only what the
	// orders cost is counted.
	empty := book.New()
	h0 := liveHeap()
	runtime.KeepAlive(empty)
	b := book.New()
	if err := Preload(b, n, o.Instruments, o.Levels, o.Seed); err != nil {
		return nil, err
	}
	h1 := liveHeap()
	heap := float64(int64(h1)-int64(h0)) / float64(n)

	meta := snapshot.Meta{LogIndex: uint64(n), Term: 1}
	var linear bytes.Buffer
	linear.Grow(int(snapshot.Size(int64(n))))
	if _, err := snapshot.Write(&linear, b, meta, snapshot.Options{BlockSize: o.BlockSize}); err != nil {
		return nil, fmt.Errorf("linear take: %w", err)
	}
	want := linear.Bytes()

	results := make([]Result, len(o.Threads))
	samples := make([][]sample, len(o.Threads))
	for i, t := range o.Threads {
		results[i] = Result{Orders: n, Threads: t, HeapBytesPerOrder: heap,
			WireBytesPerOrder: float64(len(want)) / float64(n)}
		cw := &compareWriter{want: want}
		if _, err := snapshot.Write(cw, b, meta, snapshot.Options{Threads: t, BlockSize: o.BlockSize, ParallelMinOrders: o.ParallelMinOrders}); err != nil {
			return nil, fmt.Errorf("take with %d threads: %w", t, err)
		}
		if !cw.ok() {
			return nil, fmt.Errorf("take with %d threads differs from the linear take at byte %d", t, cw.diffAt())
		}
		results[i].Identical = true
	}

	// Interleave: round r runs every thread setting once, starting from a rotating one, so
	// drift and warm-up hit every setting alike. The first round is warm-up and not counted.
	for r := -1; r < o.Takes; r++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for k := range o.Threads {
			i := (k + max(r, 0)) % len(o.Threads)
			s, err := timeTake(b, meta, snapshot.Options{Threads: o.Threads[i], BlockSize: o.BlockSize, ParallelMinOrders: o.ParallelMinOrders})
			if err != nil {
				return nil, err
			}
			if r >= 0 {
				samples[i] = append(samples[i], s)
			}
		}
	}
	load = max(load, loadAvg())

	// Restore, in its own pass, with the book under test released first.
	hash := b.StateHash()
	b = nil
	var restores []time.Duration
	for range o.Restores {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		runtime.GC()
		start := time.Now()
		rb, m, err := snapshot.Read(bytes.NewReader(want))
		d := time.Since(start)
		if err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
		if rb.Orders() != n || m != meta || rb.StateHash() != hash {
			return nil, errors.New("restore: restored book differs from the original (orders, meta or state hash)")
		}
		restores = append(restores, d)
	}
	restore := median(restores)
	load = max(load, loadAvg())

	for i := range results {
		r := &results[i]
		ss := samples[i]
		durs := make([]time.Duration, len(ss))
		allocs := make([]float64, len(ss))
		abytes := make([]float64, len(ss))
		for j, s := range ss {
			durs[j], allocs[j], abytes[j] = s.d, float64(s.allocs), float64(s.bytes)
		}
		p50 := median(durs)
		r.Takes = len(ss)
		r.TakeNsPerOrder = float64(p50) / float64(n)
		r.TakeMsP50 = ms(p50)
		r.TakeMsMin, r.TakeMsMax = ms(slices.Min(durs)), ms(slices.Max(durs))
		r.AllocsPerTake = medianF(allocs)
		r.AllocBytesPerTake = medianF(abytes)
		r.RestoreNsPerOrder = float64(restore) / float64(n)
		r.LoadAvg = load
		o.Log.Info("measured", "orders", n, "threads", r.Threads, "take_ms_p50", r.TakeMsP50,
			"take_ns_per_order", r.TakeNsPerOrder, "restore_ns_per_order", r.RestoreNsPerOrder, "load_avg", load)
	}
	return results, nil
}

type sample struct {
	d             time.Duration
	allocs, bytes uint64
}

func timeTake(b *book.Book, meta snapshot.Meta, opts snapshot.Options) (sample, error) {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	_, err := snapshot.Write(drain{}, b, meta, opts)
	d := time.Since(start)
	runtime.ReadMemStats(&m1)
	if err != nil {
		return sample{}, fmt.Errorf("take with %d threads: %w", opts.Threads, err)
	}
	return sample{d: d, allocs: m1.Mallocs - m0.Mallocs, bytes: m1.TotalAlloc - m0.TotalAlloc}, nil
}

// drain is the drain-only sink: it accepts every block and does nothing with it.
type drain struct{}

func (drain) Write(p []byte) (int, error) { return len(p), nil }

// compareWriter checks a stream against the expected bytes as it is written.
type compareWriter struct {
	want []byte
	off  int
	diff int // -1 none yet
	set  bool
}

func (c *compareWriter) Write(p []byte) (int, error) {
	if !c.set {
		for i := range p {
			if c.off+i >= len(c.want) || p[i] != c.want[c.off+i] {
				c.diff, c.set = c.off+i, true
				break
			}
		}
	}
	c.off += len(p)
	return len(p), nil
}

func (c *compareWriter) ok() bool { return !c.set && c.off == len(c.want) }

func (c *compareWriter) diffAt() int {
	if c.set {
		return c.diff
	}
	return min(c.off, len(c.want))
}

// Preload fills b with n resting orders, ids 1..n: instruments round-robin, sides and prices
// uniform over levels ticks on each side of a fixed mid, qty 1..1000. Nothing crosses, so every
// order rests, as a preloaded book does.
func Preload(b *book.Book, n, instruments, levels int, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	const mid = 1_000_000
	for i := range n {
		side := book.Side(rng.IntN(2))
		off := int64(rng.IntN(levels))
		price := mid - 1 - off
		if side == book.Sell {
			price = mid + off
		}
		o := book.Order{ID: uint64(i) + 1, Instrument: uint32(i % instruments), Side: side, Price: price, Qty: 1 + rng.Int64N(1000)}
		if _, err := b.Submit(o, nil); err != nil {
			return fmt.Errorf("preload order %d: %w", o.ID, err)
		}
	}
	return nil
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// loadAvg is the 1-minute load average, or -1 where /proc/loadavg is unavailable.
func loadAvg() float64 {
	la, err := loadavg.Read("/")
	if err != nil {
		return -1
	}
	return la.Load1
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func medianF(d []float64) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

var _ io.Writer = drain{}
