package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/rig-dev/rig/engine/book"
)

// genBook builds a resting book of n orders over a few instruments. Every fifth order is
// cancelled again (leaving placeholders inside queues), so the walk and the partitioner see
// the book as live trading leaves it. levels=1 puts everything on one price per side.
func genBook(t testing.TB, n int, seed uint64, levels int) *book.Book {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 99))
	b := book.New()
	id := uint64(1)
	for b.Orders() < n {
		side := book.Side(rng.IntN(2))
		off := int64(rng.IntN(levels))
		price := 10_000 - 1 - off
		if side == book.Sell {
			price = 10_000 + off
		}
		o := book.Order{ID: id, Instrument: uint32(rng.IntN(4)) * 7, Side: side, Price: price, Qty: 1 + int64(rng.IntN(100))}
		id++
		if _, err := b.Submit(o, nil); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(5) == 0 && id > 3 {
			_ = b.Cancel(id - 1 - uint64(rng.IntN(3))) // may already be gone
		}
	}
	return b
}

func take(t testing.TB, b *book.Book, meta Meta, opts Options) []byte {
	t.Helper()
	var buf bytes.Buffer
	st, err := Write(&buf, b, meta, opts)
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	if st.Bytes != int64(buf.Len()) || st.Orders != int64(b.Orders()) {
		t.Fatalf("stats %+v for %d bytes, %d orders", st, buf.Len(), b.Orders())
	}
	return buf.Bytes()
}

// Sizes on and around batch (2048 records) boundaries, and large enough for several buffers.
var sizes = []int{0, 1, 2, 2047, 2048, 2049, 4095, 4096, 4097, 32767, 32768, 32769, 98309, 100_000}

func TestRoundTripAndParallelIdentical(t *testing.T) {
	for _, n := range sizes {
		for _, levels := range []int{1, 50} {
			if testing.Short() && n > 40_000 {
				continue
			}
			t.Run(fmt.Sprintf("orders=%d/levels=%d", n, levels), func(t *testing.T) {
				b := genBook(t, n, uint64(n), levels)
				meta := Meta{LogIndex: uint64(n) + 17, Term: 3}
				lin := take(t, b, meta, Options{})
				if int64(len(lin)) != Size(int64(n)) {
					t.Fatalf("%d bytes, Size says %d", len(lin), Size(int64(n)))
				}
				for _, bs := range []int{0, 1 << 16, 100_003, 3 << 20} {
					if got := take(t, b, meta, Options{BlockSize: bs}); !bytes.Equal(got, lin) {
						t.Fatalf("linear, block size %d: output differs (first diff at %d)", bs, firstDiff(got, lin))
					}
					for _, th := range []int{2, 3, 8} {
						par := take(t, b, meta, Options{Threads: th, ParallelMinOrders: 1, BlockSize: bs})
						if !bytes.Equal(par, lin) {
							t.Fatalf("threads=%d block size %d: output differs from linear (first diff at %d)", th, bs, firstDiff(par, lin))
						}
					}
				}
				r, m, err := Read(bytes.NewReader(lin))
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				if m != meta || r.Orders() != n || r.StateHash() != b.StateHash() || r.Levels() != b.Levels() {
					t.Fatalf("restored meta %+v orders %d hash %x levels %d, want %+v %d %x %d",
						m, r.Orders(), r.StateHash(), r.Levels(), meta, n, b.StateHash(), b.Levels())
				}
				if again := take(t, r, meta, Options{Threads: 2, ParallelMinOrders: 1}); !bytes.Equal(again, lin) {
					t.Fatalf("snapshot -> restore -> snapshot differs at %d", firstDiff(again, lin))
				}
			})
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// recorder is a writer that records the size of every Write and interleaves sync marks.
type recorder struct {
	bytes.Buffer
	writes []int
	syncs  int
	events []string
	failAt int // fail the failAt-th write (1-based); 0 never
}

func (r *recorder) Write(p []byte) (int, error) {
	r.writes = append(r.writes, len(p))
	r.events = append(r.events, "w")
	if r.failAt > 0 && len(r.writes) == r.failAt {
		return 0, errors.New("disk full")
	}
	return r.Buffer.Write(p)
}

func (r *recorder) sync() error {
	r.syncs++
	r.events = append(r.events, "s")
	return nil
}

func TestBlocksAndSyncs(t *testing.T) {
	b := genBook(t, 40_000, 1, 30)
	want := take(t, b, Meta{}, Options{})
	for _, bs := range []int{1, 1000, 4096, 1 << 20} {
		for _, th := range []int{1, 2} {
			for _, every := range []bool{false, true} {
				rec := &recorder{}
				st, err := Write(rec, b, Meta{}, Options{Threads: th, ParallelMinOrders: 1, BlockSize: bs, Sync: rec.sync, SyncEveryBlock: every})
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(rec.Bytes(), want) {
					t.Fatalf("bs=%d threads=%d: bytes differ", bs, th)
				}
				blocks := (len(want) + bs - 1) / bs
				if st.Blocks != blocks || len(rec.writes) != blocks {
					t.Fatalf("bs=%d: %d blocks (%d writes), want %d", bs, st.Blocks, len(rec.writes), blocks)
				}
				for i, n := range rec.writes {
					if i < blocks-1 && n != bs || i == blocks-1 && n != len(want)-(blocks-1)*bs {
						t.Fatalf("bs=%d: write %d has %d bytes", bs, i, n)
					}
				}
				wantSyncs := 0
				if every {
					wantSyncs = blocks
					for i := 0; i < len(rec.events); i += 2 { // w s w s ...
						if rec.events[i] != "w" || rec.events[i+1] != "s" {
							t.Fatalf("bs=%d: events %v, want a sync after every block", bs, rec.events[:i+2])
						}
					}
				}
				if st.Syncs != wantSyncs || rec.syncs != wantSyncs {
					t.Fatalf("bs=%d every=%v: %d syncs (stats %d), want %d", bs, every, rec.syncs, st.Syncs, wantSyncs)
				}
			}
		}
	}
	if _, err := Write(io.Discard, b, Meta{}, Options{SyncEveryBlock: true}); err == nil {
		t.Fatal("SyncEveryBlock without Sync accepted")
	}
	if _, err := Write(io.Discard, b, Meta{}, Options{BlockSize: -1}); err == nil {
		t.Fatal("negative block size accepted")
	}
}

func TestWriteAndSyncErrors(t *testing.T) {
	b := genBook(t, 200_000, 2, 40)
	before := runtime.NumGoroutine()
	for _, th := range []int{1, 2, 4} {
		for _, failAt := range []int{1, 2, 5} {
			rec := &recorder{failAt: failAt}
			_, err := Write(rec, b, Meta{}, Options{Threads: th, ParallelMinOrders: 1, BlockSize: 1 << 16})
			if err == nil || err.Error() != fmt.Sprintf("write snapshot block %d: disk full", failAt-1) {
				t.Fatalf("threads=%d failAt=%d: err %v", th, failAt, err)
			}
		}
		syncErr := errors.New("EIO")
		n := 0
		_, err := Write(io.Discard, b, Meta{}, Options{Threads: th, ParallelMinOrders: 1, BlockSize: 1 << 16, SyncEveryBlock: true,
			Sync: func() error {
				if n++; n == 3 {
					return syncErr
				}
				return nil
			}})
		if !errors.Is(err, syncErr) {
			t.Fatalf("threads=%d: sync error %v", th, err)
		}
	}
	checkGoroutines(t, before)
}

// A take allocates the same small amount whatever the book size.
func TestTakeAllocsConstant(t *testing.T) {
	small, large := genBook(t, 40_000, 3, 40), genBook(t, 400_000, 4, 40)
	for _, th := range []int{1, 2} {
		opts := Options{Threads: th, ParallelMinOrders: 1}
		Write(io.Discard, large, Meta{}, opts) // warm the pools
		a := testing.AllocsPerRun(5, func() { Write(io.Discard, small, Meta{}, opts) })
		c := testing.AllocsPerRun(5, func() { Write(io.Discard, large, Meta{}, opts) })
		t.Logf("threads=%d: %.0f allocs at 40k orders, %.0f at 400k", th, a, c)
		if c > a+2 || c > 64 {
			t.Fatalf("threads=%d: %.0f allocs at 40k orders, %.0f at 400k: want O(1)", th, a, c)
		}
	}
}
