package snapshot

import (
	"sync"

	"github.com/rig-dev/rig/engine/book"
)

// Parallel encode: the book is frozen during a take, so several goroutines may walk it. Each
// buffer of the stream is cut into pieces; workers claim pieces in stream order, each with a
// cursor the positioner placed by skipping whole levels, and render them straight into a ring
// of pooled buffers. The calling goroutine writes each buffer once all its pieces are done, in
// order, and frees its ring slot; while it waits it renders pieces too. Memory is the ring,
// whatever the book size.

const (
	maxPiece = 1 << 20
	minPiece = 64 << 10
)

type parallelTake struct {
	e       *emitter
	mu      sync.Mutex
	cond    sync.Cond
	pos     positioner
	next    int // next piece to claim
	pieces  int // total pieces
	m       int // pieces per buffer
	plen    int // bytes per piece (the last of a buffer may be shorter)
	ring    int
	bufs    [][]byte
	gen     []int      // per slot: the buffer it may hold now
	done    []int      // per slot: pieces finished
	crcs    [][]uint32 // per slot and piece: crcs of the batches whose header is in the piece
	perCrcs int
	err     error
	stop    bool
}

func writeParallel(e *emitter, b *book.Book, threads int) error {
	l := e.l
	nbuf := int((l.size + int64(e.bufSize) - 1) / int64(e.bufSize))
	target := min(maxPiece, max(minPiece, int(l.size/int64(4*threads))))
	m := max(1, (e.bufSize+target-1)/target)
	t := &parallelTake{e: e, pos: positioner{l: l, cur: b.Walk()}, m: m, plen: (e.bufSize + m - 1) / m,
		pieces: nbuf * m, ring: min(nbuf, 2*threads+1)}
	t.cond.L = &t.mu
	t.perCrcs = t.plen/batchBytes + 2
	t.bufs = make([][]byte, t.ring)
	t.gen = make([]int, t.ring)
	t.done = make([]int, t.ring)
	t.crcs = make([][]uint32, t.ring*m)
	flat := make([]uint32, t.ring*m*t.perCrcs)
	for i := range t.crcs {
		t.crcs[i] = flat[i*t.perCrcs : i*t.perCrcs : (i+1)*t.perCrcs]
	}
	for s := range t.ring {
		t.bufs[s] = getBuf(e.bufSize)
		t.gen[s] = s
	}
	defer func() {
		for _, buf := range t.bufs {
			putBuf(buf)
		}
	}()

	var wg sync.WaitGroup
	for range min(threads-1, t.pieces) { // the calling goroutine is the last worker (stitch)
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.work()
		}()
	}
	err := t.stitch(nbuf)
	t.mu.Lock()
	if err != nil && t.err == nil {
		t.err = err
	}
	t.stop = true
	t.cond.Broadcast()
	t.mu.Unlock()
	wg.Wait()
	return t.err
}

// bounds is the byte range of piece q, empty past the end of the stream.
func (t *parallelTake) bounds(q int) (a, b int64) {
	j, pi := q/t.m, q%t.m
	a = int64(j)*int64(t.e.bufSize) + int64(pi*t.plen)
	b = min(a+int64(t.plen), int64(j+1)*int64(t.e.bufSize), t.e.l.size)
	return a, max(a, b)
}

// piece is a claimed piece of work: the stream bytes [a, b) of ring slot s.
type piece struct {
	a, b int64
	cur  book.Cursor
	dst  []byte
	ci   int // index into t.crcs
}

// claim takes the next piece whose ring slot is free (t.mu held). It waits for the slot only
// when wait is set; the stitcher, which frees slots, never waits here.
func (t *parallelTake) claim(wait bool) (piece, bool) {
	for !t.stop && t.next < t.pieces {
		q := t.next
		a, b := t.bounds(q)
		if a == b {
			t.next++
			continue
		}
		j := q / t.m
		s := j % t.ring
		if t.gen[s] != j {
			if !wait {
				return piece{}, false
			}
			t.cond.Wait()
			continue
		}
		t.next++
		off := a - int64(j)*int64(t.e.bufSize)
		// Claims happen in stream order, so the positioner only moves forward.
		return piece{a: a, b: b, cur: t.pos.at(a), dst: t.bufs[s][off : off+(b-a)], ci: s*t.m + q%t.m}, true
	}
	return piece{}, false
}

// run renders p without the lock and records the result (t.mu held on entry and exit).
func (t *parallelTake) run(p piece, r *renderer) {
	t.mu.Unlock()
	crcs, err := r.render(p.dst, p.a, &p.cur, t.crcs[p.ci][:0])
	t.mu.Lock()
	t.crcs[p.ci] = crcs
	t.done[p.ci/t.m]++
	if err != nil && t.err == nil {
		t.err, t.stop = err, true
	}
	t.cond.Broadcast()
}

func (t *parallelTake) work() {
	r := renderer{l: t.e.l, begin: t.e.r.begin}
	defer r.release()
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		p, ok := t.claim(true)
		if !ok {
			return
		}
		t.run(p, &r)
	}
}

// stitch writes the buffers in order as their pieces complete. While it waits it renders
// pieces itself, so a take never waits on a helper the OS has not scheduled: on a busy
// machine parallel degrades to about linear, not worse.
func (t *parallelTake) stitch(nbuf int) error {
	defer t.e.r.release()
	for j := range nbuf {
		s := j % t.ring
		want := 0
		for pi := range t.m {
			if a, b := t.bounds(j*t.m + pi); a < b {
				want++
			}
		}
		t.mu.Lock()
		for t.done[s] < want && !t.stop {
			if p, ok := t.claim(false); ok {
				t.run(p, &t.e.r)
				continue
			}
			t.cond.Wait()
		}
		if t.stop {
			t.mu.Unlock()
			return nil // t.err says why
		}
		t.mu.Unlock()
		a := int64(j) * int64(t.e.bufSize)
		buf := t.bufs[s][:min(int64(t.e.bufSize), t.e.l.size-a)]
		for pi := range want {
			for _, c := range t.crcs[s*t.m+pi] {
				t.e.sum = chain(t.e.sum, c)
			}
		}
		if err := t.e.emit(buf, a, nil); err != nil {
			return err
		}
		t.mu.Lock()
		t.done[s] = 0
		t.gen[s] = j + t.ring
		t.cond.Broadcast()
		t.mu.Unlock()
	}
	return nil
}
