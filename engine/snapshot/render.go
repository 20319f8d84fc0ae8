package snapshot

import (
	"github.com/rig-dev/rig/engine/book"
)

// The stream layout is a pure function of the order count, so any byte range of a snapshot can
// be produced on its own: that is how linear and parallel takes share one encoder and produce
// the same bytes. A take cuts the stream into buffers of whole blocks and each buffer into
// pieces; a piece is rendered straight into its place in the buffer, and full buffers go to
// the writer as they are, block by block. Nothing is encoded twice except a batch that
// straddles a piece edge, which both neighbours encode in a scratch buffer (at most one batch
// per piece) so that each can write its part and the one holding the header knows the crc.

type layout struct {
	orders  int64
	batches int64
	size    int64 // whole stream
	end     int64 // offset of End
}

func newLayout(orders int64) layout {
	l := layout{orders: orders, batches: int64(batchesFor(uint64(orders)))}
	l.size = Size(orders)
	l.end = l.size - EndSize
	return l
}

func (l layout) batchStart(k int64) int64 { return BeginSize + k*batchBytes }

func (l layout) batchCount(k int64) int { return int(min(BatchRecords, l.orders-k*BatchRecords)) }

// firstBatch is the first batch that ends after offset a.
func (l layout) firstBatch(a int64) int64 {
	if a < BeginSize {
		return 0
	}
	return min((a-BeginSize)/batchBytes, l.batches)
}

// renderer produces byte ranges of one take's stream.
type renderer struct {
	l       layout
	begin   [BeginSize]byte
	scratch []byte // one batch, for batches that straddle a range edge
}

// render writes stream bytes [a, a+len(dst)) into dst, except End (the caller's, since it
// needs every crc). cur must stand at the first record of batch l.firstBatch(a); it is advanced.
// The crcs of batches whose header lies in the range are appended to crcs, in order.
func (r *renderer) render(dst []byte, a int64, cur *book.Cursor, crcs []uint32) ([]uint32, error) {
	b := a + int64(len(dst))
	if a < BeginSize {
		copy(dst, r.begin[a:min(b, BeginSize)])
	}
	for k := r.l.firstBatch(a); k < r.l.batches; k++ {
		s := r.l.batchStart(k)
		if s >= b {
			break
		}
		n := r.l.batchCount(k)
		e := s + BatchHeader + int64(n)*RecordSize
		var p []byte
		inside := s >= a && e <= b
		if inside {
			p = dst[s-a : e-a]
		} else {
			if r.scratch == nil {
				r.scratch = getBuf(batchBytes)
			}
			p = r.scratch[:e-s]
		}
		if err := encodeRecords(p[BatchHeader:], cur, n); err != nil {
			return crcs, err
		}
		c := sealBatch(p, uint32(k), n)
		if s >= a {
			crcs = append(crcs, c)
		}
		if !inside {
			lo, hi := max(s, a), min(e, b)
			copy(dst[lo-a:hi-a], p[lo-s:hi-s])
		}
	}
	return crcs, nil
}

func (r *renderer) release() {
	if r.scratch != nil {
		putBuf(r.scratch)
		r.scratch = nil
	}
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
