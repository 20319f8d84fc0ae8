package snapshot

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/rig-dev/rig/engine/book"
)

// DefaultBlockSize is the block size when Options.BlockSize is 0.
const DefaultBlockSize = 1 << 20

// DefaultParallelMinOrders is the book size below which Write stays linear even when Threads > 1:
// under it the goroutine hand-offs cost more than the encode they split (see engine/bench).
const DefaultParallelMinOrders = 32 << 10

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

// Write streams b to w: Begin, batches of order records, End, handed to w in blocks of
// opts.BlockSize bytes (the last may be shorter), with opts.Sync after each block when
// opts.SyncEveryBlock. The book must not change until Write returns. The output does not depend
// on opts.Threads. Beyond pooled buffers, a take allocates the same small amount at any book size.
func Write(w io.Writer, b *book.Book, meta Meta, opts Options) (Stats, error) {
	var st Stats
	bs := opts.BlockSize
	switch {
	case bs == 0:
		bs = DefaultBlockSize
	case bs < 0:
		return st, fmt.Errorf("snapshot block size %d: want > 0", bs)
	}
	if opts.SyncEveryBlock && opts.Sync == nil {
		return st, errors.New("snapshot options: SyncEveryBlock set without a Sync function")
	}
	bw := blockWriter{w: w, sync: opts.Sync, every: opts.SyncEveryBlock, st: &st}
	bw.buf = getBuf(bs)
	defer putBuf(bw.buf)

	orders := uint64(b.Orders())
	batches := batchesFor(orders)
	var hdr [BeginSize]byte
	putBegin(hdr[:], begin{Meta: meta, orders: orders, levels: uint64(b.Levels()),
		instruments: uint32(b.Instruments()), batch: uint32(batches)})
	if err := bw.write(hdr[:]); err != nil {
		return st, err
	}
	sum := chain(0, le.Uint32(hdr[60:]))

	min := opts.ParallelMinOrders
	if min <= 0 {
		min = DefaultParallelMinOrders
	}
	var err error
	if opts.Threads > 1 && orders >= uint64(min) && batches > 1 {
		sum, err = writeParallel(&bw, b, int(orders), opts.Threads, sum)
	} else {
		sum, err = writeLinear(&bw, b, int(orders), sum)
	}
	if err != nil {
		return st, err
	}
	var end [EndSize]byte
	putEnd(end[:], sum, orders, batches)
	if err := bw.write(end[:]); err != nil {
		return st, err
	}
	if err := bw.flush(); err != nil {
		return st, err
	}
	st.Orders = int64(orders)
	return st, nil
}

func writeLinear(bw *blockWriter, b *book.Book, orders int, sum uint64) (uint64, error) {
	var scratch []byte
	defer func() {
		if scratch != nil {
			putBuf(scratch)
		}
	}()
	cur := b.Walk()
	for seq := 0; orders > 0; seq++ {
		n := min(BatchRecords, orders)
		size := BatchHeader + n*RecordSize
		p := bw.reserve(size) // encode straight into the block when the batch fits
		inPlace := p != nil
		if !inPlace {
			if scratch == nil {
				scratch = getBuf(batchBytes)
			}
			p = scratch[:size]
		}
		if err := encodeRecords(p[BatchHeader:], &cur, n); err != nil {
			return 0, err
		}
		sum = chain(sum, sealBatch(p, uint32(seq), n))
		var err error
		if inPlace {
			err = bw.commit(size)
		} else {
			err = bw.write(p)
		}
		if err != nil {
			return 0, err
		}
		orders -= n
	}
	if !cur.Done() {
		return 0, ErrBookChanged
	}
	return sum, nil
}

// encodeRecords writes the next n orders of the walk as records into dst.
func encodeRecords(dst []byte, c *book.Cursor, n int) error {
	o := 0
	for n > 0 {
		run, ok := c.Next(n)
		if !ok || run.Live > n {
			return ErrBookChanged
		}
		tail := uint64(run.Instrument) | uint64(run.Side)<<32
		price := uint64(run.Price)
		for _, r := range run.Orders {
			if r.Qty == 0 {
				continue
			}
			d := dst[o : o+RecordSize : o+RecordSize]
			le.PutUint64(d[0:], r.ID)
			le.PutUint64(d[8:], price)
			le.PutUint64(d[16:], uint64(r.Qty))
			le.PutUint64(d[24:], tail)
			o += RecordSize
		}
		n -= run.Live
	}
	return nil
}

// blockWriter cuts the stream into blocks of len(buf) bytes, one Write (and, when asked, one
// sync) per block.
type blockWriter struct {
	w     io.Writer
	sync  func() error
	every bool
	buf   []byte
	n     int
	st    *Stats
}

func (bw *blockWriter) write(p []byte) error {
	for len(p) > 0 {
		k := copy(bw.buf[bw.n:], p)
		bw.n += k
		p = p[k:]
		if bw.n == len(bw.buf) {
			if err := bw.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// reserve returns the next n bytes of the current block if they fit, to encode in place; commit
// then accounts for them.
func (bw *blockWriter) reserve(n int) []byte {
	if bw.n+n > len(bw.buf) {
		return nil
	}
	return bw.buf[bw.n : bw.n+n]
}

func (bw *blockWriter) commit(n int) error {
	bw.n += n
	if bw.n == len(bw.buf) {
		return bw.flush()
	}
	return nil
}

func (bw *blockWriter) flush() error {
	if bw.n == 0 {
		return nil
	}
	m, err := bw.w.Write(bw.buf[:bw.n])
	bw.st.Bytes += int64(m)
	if err == nil && m < bw.n {
		err = io.ErrShortWrite
	}
	if err != nil {
		return fmt.Errorf("write snapshot block %d: %w", bw.st.Blocks, err)
	}
	bw.st.Blocks++
	bw.n = 0
	if bw.every {
		if err := bw.sync(); err != nil {
			return fmt.Errorf("sync snapshot block %d: %w", bw.st.Blocks-1, err)
		}
		bw.st.Syncs++
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
