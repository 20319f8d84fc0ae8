package snapshot

import (
	"sync"

	"github.com/rig-dev/rig/engine/book"
)

// Parallel encode: the book is frozen during a take, so several goroutines may walk it. The walk
// is cut into chunks of whole batches; a dispenser hands chunks out in order, each with a cursor
// positioned by Cursor.Skip (O(levels passed), nothing per order); workers encode their chunk
// into a pooled buffer, and the calling goroutine stitches the chunks into the block writer in
// order. Chunk boundaries are batch boundaries of the linear layout, so the bytes are the same.

const chunkBatches = 16 // ~1 MiB of records per chunk

type chunk struct {
	buf   []byte
	size  int
	seq   int // chunk number
	first int // first batch
	nb    int // batches
	recs  int // records
	cur   book.Cursor
	crcs  [chunkBatches]uint32
	err   error
}

type dispenser struct {
	mu      sync.Mutex
	cur     book.Cursor
	next    int // next batch to hand out
	batches int
	orders  int
	chunks  int
}

// claim assigns the next chunk to c; false when all are handed out.
func (d *dispenser) claim(c *chunk) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.next >= d.batches {
		return false
	}
	c.seq, c.first = d.chunks, d.next
	c.nb = min(chunkBatches, d.batches-d.next)
	c.recs = min(c.nb*BatchRecords, d.orders-d.next*BatchRecords)
	c.cur = d.cur
	d.cur.Skip(c.recs)
	d.next += c.nb
	d.chunks++
	return true
}

func (c *chunk) encode() {
	c.err = nil
	off, left := 0, c.recs
	for i := 0; i < c.nb; i++ {
		n := min(BatchRecords, left)
		size := BatchHeader + n*RecordSize
		p := c.buf[off : off+size]
		if err := encodeRecords(p[BatchHeader:], &c.cur, n); err != nil {
			c.err = err
			return
		}
		c.crcs[i] = sealBatch(p, uint32(c.first+i), n)
		off += size
		left -= n
	}
	c.size = off
}

func writeParallel(bw *blockWriter, b *book.Book, orders, threads int, sum uint64) (uint64, error) {
	batches := int(batchesFor(uint64(orders)))
	nchunks := (batches + chunkBatches - 1) / chunkBatches
	threads = min(threads, nchunks)
	ring := 2*threads + 1 // chunks in flight; bounds memory whatever the book size

	d := &dispenser{cur: b.Walk(), batches: batches, orders: orders}
	free := make(chan *chunk, ring)
	slots := make([]chan *chunk, ring)
	all := make([]chunk, ring)
	for i := range slots {
		slots[i] = make(chan *chunk, 1)
		all[i].buf = getBuf(chunkBatches * batchBytes)
		free <- &all[i]
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var c *chunk
				select {
				case c = <-free:
				case <-done:
					return
				}
				// The buffer is taken before the chunk number, so every claimed chunk can
				// finish and the stitcher can always make progress.
				if !d.claim(c) {
					free <- c
					return
				}
				c.encode()
				slots[c.seq%ring] <- c
			}
		}()
	}

	var err error
	for seq := 0; seq < nchunks; seq++ {
		c := <-slots[seq%ring]
		if err = c.err; err == nil {
			err = bw.write(c.buf[:c.size])
		}
		if err != nil {
			free <- c
			break
		}
		for _, x := range c.crcs[:c.nb] {
			sum = chain(sum, x)
		}
		free <- c
	}
	close(done)
	wg.Wait()
	for i := range all {
		putBuf(all[i].buf)
	}
	if err == nil && !d.cur.Done() {
		err = ErrBookChanged
	}
	return sum, err
}
