package snapshot

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/rig-dev/rig/engine/book"
)

// DefaultBlockSize is the block size when Options.BlockSize is 0.
const DefaultBlockSize = 1 << 20

// DefaultParallelMinOrders is the book size below which Write stays linear even when Threads > 1:
// the smallest size where two threads measurably beat one (`rig bench engine --parallel-min 1
// --takes 101`; docs/constants.md, "Parallel snapshot take"). A parallel take pays a fixed cost
// of waking a helper that a small book cannot earn back.
const DefaultParallelMinOrders = 100_000

// Options control a take.
type Options struct {
	Threads        int          // encode goroutines; <=1 linear
	BlockSize      int          // bytes per block handed to the writer (default 1 MiB)
	Sync           func() error // called after every block when SyncEveryBlock (e.g. f.Sync or fdatasync)
	SyncEveryBlock bool

	// ParallelMinOrders overrides DefaultParallelMinOrders (0: default; 1: always parallel
	// when Threads > 1, as tests do).
	ParallelMinOrders int
}

// Stats describe a take.
type Stats struct {
	Orders int64
	Bytes  int64
	Blocks int
	Syncs  int
}

// ErrBookChanged means the book was mutated while a take was walking it.
var ErrBookChanged = errors.New("book changed during snapshot")

// minBuffer is the least a take buffers at once: blocks smaller than this are grouped, so a
// tiny block size does not make every block a separate piece of work.
const minBuffer = 256 << 10

// Write streams b to w: Begin, batches of order records, End, handed to w in blocks of
// opts.BlockSize bytes (the last may be shorter), each one Write call, with opts.Sync after
// each block when opts.SyncEveryBlock. The book must not change until Write returns. The
// output does not depend on opts.Threads. Beyond pooled buffers, a take allocates the same
// small amount at any book size.
func Write(w io.Writer, b *book.Book, meta Meta, opts Options) (Stats, error) {
	bs := opts.BlockSize
	switch {
	case bs == 0:
		bs = DefaultBlockSize
	case bs < 0:
		return Stats{}, fmt.Errorf("snapshot block size %d: want > 0", bs)
	}
	if opts.SyncEveryBlock && opts.Sync == nil {
		return Stats{}, errors.New("snapshot options: SyncEveryBlock set without a Sync function")
	}
	orders := int64(b.Orders())
	e := emitter{w: w, sync: opts.Sync, every: opts.SyncEveryBlock, block: bs}
	e.l = newLayout(orders)
	e.r.l = e.l
	e.bufSize = bs * max(1, (minBuffer+bs-1)/bs)
	putBegin(e.r.begin[:], begin{Meta: meta, orders: uint64(orders), levels: uint64(b.Levels()),
		instruments: uint32(b.Instruments()), batch: uint32(e.l.batches)})
	e.sum = chain(0, le.Uint32(e.r.begin[60:]))

	min := opts.ParallelMinOrders
	if min <= 0 {
		min = DefaultParallelMinOrders
	}
	var err error
	if opts.Threads > 1 && orders >= int64(min) && e.l.size > minBuffer {
		err = writeParallel(&e, b, opts.Threads)
	} else {
		err = writeLinear(&e, b)
	}
	if err != nil {
		return e.st, err
	}
	e.st.Orders = orders
	return e.st, nil
}

// emitter hands finished buffers to the writer in stream order, completing End on the way.
type emitter struct {
	w       io.Writer
	sync    func() error
	every   bool
	block   int
	bufSize int
	l       layout
	r       renderer // Begin bytes (and the linear take's scratch)
	sum     uint64
	st      Stats
}

// emit writes buf, the stream bytes from offset a, after folding in the crcs of its batches
// (in order) and filling in whatever part of End it holds.
func (e *emitter) emit(buf []byte, a int64, crcs []uint32) error {
	for _, c := range crcs {
		e.sum = chain(e.sum, c)
	}
	if b := a + int64(len(buf)); b > e.l.end {
		// Every batch header lies before End, so every crc is in by now.
		var end [EndSize]byte
		putEnd(end[:], e.sum, uint64(e.l.orders), uint64(e.l.batches))
		lo := max(a, e.l.end)
		copy(buf[lo-a:], end[lo-e.l.end:b-e.l.end])
	}
	for len(buf) > 0 {
		n := min(e.block, len(buf))
		m, err := e.w.Write(buf[:n])
		e.st.Bytes += int64(m)
		if err == nil && m < n {
			err = io.ErrShortWrite
		}
		if err != nil {
			return fmt.Errorf("write snapshot block %d: %w", e.st.Blocks, err)
		}
		e.st.Blocks++
		if d := slowBlock(); d > 0 {
			time.Sleep(d)
		}
		if e.every {
			if err := e.sync(); err != nil {
				return fmt.Errorf("sync snapshot block %d: %w", e.st.Blocks-1, err)
			}
			e.st.Syncs++
		}
		buf = buf[n:]
	}
	return nil
}

// positioner hands out cursors at batch starts, for ranges requested in stream order:
// Cursor.Skip costs O(levels passed), nothing per order.
type positioner struct {
	l     layout
	cur   book.Cursor
	batch int64
}

// at returns a cursor at the first record of the first batch overlapping offset a.
func (p *positioner) at(a int64) book.Cursor {
	if k := p.l.firstBatch(a); k > p.batch {
		p.cur.Skip(int(min(k*BatchRecords, p.l.orders) - p.batch*BatchRecords))
		p.batch = k
	}
	return p.cur
}

func writeLinear(e *emitter, b *book.Book) error {
	buf := getBuf(e.bufSize)
	defer putBuf(buf)
	defer e.r.release()
	pos := positioner{l: e.l, cur: b.Walk()}
	crcs := make([]uint32, 0, e.bufSize/batchBytes+2)
	for a := int64(0); a < e.l.size; a += int64(e.bufSize) {
		p := buf[:min(int64(e.bufSize), e.l.size-a)]
		cur := pos.at(a)
		var err error
		if crcs, err = e.r.render(p, a, &cur, crcs[:0]); err != nil {
			return err
		}
		if err := e.emit(p, a, crcs); err != nil {
			return err
		}
	}
	return nil
}

// Buffers are pooled by size and kept (a few per size) between takes, so a take allocates no
// buffer proportional to the book.
var pool struct {
	sync.Mutex
	free map[int][][]byte
}

const maxPooledPerSize = 32

func getBuf(n int) []byte {
	pool.Lock()
	defer pool.Unlock()
	if l := pool.free[n]; len(l) > 0 {
		b := l[len(l)-1]
		pool.free[n] = l[:len(l)-1]
		return b
	}
	return make([]byte, n)
}

func putBuf(b []byte) {
	pool.Lock()
	defer pool.Unlock()
	if pool.free == nil {
		pool.free = make(map[int][][]byte)
	}
	if l := pool.free[len(b)]; len(l) < maxPooledPerSize {
		pool.free[len(b)] = append(l, b)
	}
}
