package book

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// ErrSequence classifies a restore sequence that is not a valid book in walk order.
var ErrSequence = errors.New("invalid order sequence")

// SequenceError is a Builder error: what was wrong, and the position (from 0) in the sequence
// of the order at fault.
type SequenceError struct {
	Ordinal int64
	What    string
}

func (e *SequenceError) Error() string { return e.What }

// Unwrap makes every SequenceError match ErrSequence.
func (e *SequenceError) Unwrap() error { return ErrSequence }

// Builder rebuilds a book from orders given in walk order (Cursor order), in one linear pass:
// each order is appended to the current level or opens a new level at the worse end of the
// side, so nothing is searched; each side's treap is built from its sorted levels when the side
// is complete. Any sequence that is out of order, duplicates an id or leaves a crossed book is
// a *SequenceError.
//
// The id index of a large book is filled last and in table order (see stage), because
// inserting ids in walk order would cost a cache (and TLB) miss per order.
type Builder struct {
	b     *Book
	ii    int32 // current instrument, none before the first order
	side  Side
	lv    int32 // current (worst so far) level of the current side
	stack []int32
	st    stage
	asks  int64 // ordinal of the first ask of the current instrument
	err   error

	// A staged rebuild hands ids to a stager goroutine in blocks, so bucketing them runs on
	// another core while this one builds the queues. The blocks are consecutive pieces of one
	// write-once array: never recycling a block means this core only ever streams writes to
	// fresh memory, rather than reclaiming cache lines the stager's core has just read.
	pend    []islot
	pendAll []islot
	work    chan []islot
	stDone  chan struct{}
	stDup   uint64 // loc of a duplicate the stager found, 0 none
	stOpen  bool

	// The queues of a rebuilt book are consecutive slices of one arena sized from the hint:
	// orders arrive level by level, so each level is filled in place and clipped (cap = len)
	// when the next opens. No queue grows or is copied during a restore, and the rebuilt book
	// is one contiguous run of records in walk order.
	arena   []Resting
	pos     int  // next free arena slot
	lvStart int  // arena slot of the current level's first order
	inArena bool // the current level is being filled in the arena
}

// NewBuilder starts a rebuild; orders and levels are size hints (0 if unknown).
func NewBuilder(orders, levels int) *Builder {
	b := &Book{instByID: make(map[uint32]int32), lastIdx: none}
	b.ids.init(orders)
	if levels > 0 {
		b.levels = make([]level, 0, levels)
	}
	bl := &Builder{b: b, ii: none, lv: none}
	bl.st.init(&b.ids, orders)
	if bl.st.n > 0 {
		bl.startStager(orders)
	}
	if orders > 0 {
		bl.arena = make([]Resting, orders)
	}
	return bl
}

// Add appends one order.
func (bl *Builder) Add(instrument uint32, side Side, price int64, id uint64, qty int64) error {
	if bl.err != nil {
		return bl.err
	}
	b := bl.b
	if bl.lv != none && side == bl.side && instrument == b.insts[bl.ii].id && price == b.levels[bl.lv].price {
		return bl.append(bl.lv, id, qty)
	}
	if qty <= 0 {
		return bl.fail("order %d: qty %d, want > 0", id, qty)
	}
	if side > Sell {
		return bl.fail("order %d: side %d, want 0 (buy) or 1 (sell)", id, side)
	}
	bl.closeLevel()
	switch {
	case bl.ii == none:
		bl.startInstrument(instrument)
	case instrument == b.insts[bl.ii].id && side == bl.side:
		cur := b.levels[bl.lv].price
		if (side == Buy && price > cur) || (side == Sell && price < cur) {
			return bl.fail("order %d: %s price %d after %d (levels must go best to worst)", id, side, price, cur)
		}
	case instrument == b.insts[bl.ii].id && side > bl.side:
		bl.finishHalf()
	case instrument > b.insts[bl.ii].id:
		bl.finishHalf()
		if err := bl.finishInstrument(); err != nil {
			return err
		}
		bl.startInstrument(instrument)
	default:
		return bl.fail("order %d: instrument %d %s after instrument %d %s (want ascending instrument, buy before sell)",
			id, instrument, side, b.insts[bl.ii].id, bl.side)
	}
	if bl.lv == none && side == Sell { // the first ask of this instrument
		bl.asks = int64(b.orders)
	}
	bl.side = side
	bl.lv = bl.openLevel(side, price)
	bl.lvStart, bl.inArena = bl.pos, bl.pos < len(bl.arena)
	return bl.append(bl.lv, id, qty)
}

// closeLevel clips the current level's queue out of the arena.
func (bl *Builder) closeLevel() {
	if bl.inArena {
		bl.b.levels[bl.lv].q = bl.arena[bl.lvStart:bl.pos:bl.pos]
		bl.inArena = false
	}
}

func (bl *Builder) fail(format string, args ...any) error {
	bl.err = &SequenceError{Ordinal: int64(bl.b.orders), What: fmt.Sprintf(format, args...)}
	return bl.err
}

func (bl *Builder) append(li int32, id uint64, qty int64) error {
	if qty <= 0 {
		return bl.fail("order %d: qty %d, want > 0", id, qty)
	}
	b := bl.b
	if bl.inArena && bl.pos == len(bl.arena) {
		bl.closeLevel() // more orders than the hint: the level continues in its own array
	}
	lv := &b.levels[li]
	var seq uint32
	if bl.inArena {
		bl.arena[bl.pos] = Resting{ID: id, Qty: qty}
		seq = uint32(bl.pos - bl.lvStart)
		bl.pos++
	} else {
		seq = lv.push(Resting{ID: id, Qty: qty})
	}
	if bl.stOpen {
		bl.pend = append(bl.pend, islot{id: id, loc: loc(li, seq)})
		if len(bl.pend) == cap(bl.pend) {
			bl.work <- bl.pend
			bl.pend = bl.nextBlock()
		}
	} else if _, ok := bl.st.add(id, loc(li, seq)); !ok {
		if bl.inArena {
			bl.pos--
		} else {
			lv.q = lv.q[:len(lv.q)-1]
		}
		return bl.fail("order %d: duplicate id", id)
	}
	lv.qty += qty
	lv.live++
	b.insts[bl.ii].sides[bl.side].orders++
	b.orders++
	return nil
}

func (bl *Builder) startInstrument(id uint32) {
	bl.ii = bl.b.addInstrument(id)
	bl.lv = none
}

// openLevel appends a level at the worse end of the current side.
func (bl *Builder) openLevel(side Side, price int64) int32 {
	b := bl.b
	li := b.newLevel(bl.ii, side, price)
	h := &b.insts[bl.ii].sides[side]
	if w := h.worst; w != none {
		if side == Buy { // bids descend: the new level is below the worst
			b.levels[li].next, b.levels[w].prev = w, li
		} else {
			b.levels[li].prev, b.levels[w].next = w, li
		}
	}
	h.worst = li
	if h.best == none {
		h.best = li
	}
	h.levels++
	return li
}

func (bl *Builder) finishHalf() {
	if bl.ii == none || bl.lv == none {
		return
	}
	bl.closeLevel()
	b := bl.b
	h := &b.insts[bl.ii].sides[bl.side]
	lowest := h.best
	if bl.side == Buy {
		lowest = h.worst
	}
	h.root, bl.stack = b.tBuild(lowest, bl.stack)
	bl.lv = none
}

func (bl *Builder) finishInstrument() error {
	b := bl.b
	ins := &b.insts[bl.ii]
	bid, ask := ins.sides[Buy].best, ins.sides[Sell].best
	if bid != none && ask != none && b.levels[bid].price >= b.levels[ask].price {
		// Blame the first ask, the order that made the book cross.
		bl.err = &SequenceError{Ordinal: bl.asks, What: fmt.Sprintf("instrument %d: crossed book, best bid %d >= best ask %d",
			ins.id, b.levels[bid].price, b.levels[ask].price)}
		return bl.err
	}
	return nil
}

const stagerBlock = 4096

func (bl *Builder) startStager(orders int) {
	bl.pendAll = make([]islot, orders)
	bl.pend = bl.nextBlock()
	bl.work = make(chan []islot, 64)
	bl.stDone = make(chan struct{})
	bl.stOpen = true
	go func() {
		defer close(bl.stDone)
		for p := range bl.work {
			for _, e := range p {
				if dup, ok := bl.st.add(e.id, e.loc); !ok && bl.stDup == 0 {
					bl.stDup = dup
				}
			}
		}
	}()
}

// nextBlock is the next empty block of pendAll, or a new one past the hint.
func (bl *Builder) nextBlock() []islot {
	if n := min(stagerBlock, len(bl.pendAll)); n > 0 {
		p := bl.pendAll[:0:n]
		bl.pendAll = bl.pendAll[n:]
		return p
	}
	return make([]islot, 0, stagerBlock)
}

// stopStager hands over the last ids and waits for the stager to finish.
func (bl *Builder) stopStager() {
	if !bl.stOpen {
		return
	}
	bl.stOpen = false
	if len(bl.pend) > 0 {
		bl.work <- bl.pend
	}
	close(bl.work)
	<-bl.stDone
	bl.pend, bl.pendAll, bl.work = nil, nil, nil
}

// Discard abandons a rebuild that will not be finished, releasing what it holds (a large
// rebuild runs a helper goroutine until Finish or Discard). It is a no-op after Finish.
func (bl *Builder) Discard() {
	bl.stopStager()
	bl.b, bl.arena, bl.st = nil, nil, stage{}
	if bl.err == nil {
		bl.err = errors.New("builder discarded")
	}
}

// Orders is the number of orders added so far.
func (bl *Builder) Orders() int { return bl.b.orders }

// Levels is the number of levels opened so far.
func (bl *Builder) Levels() int { return bl.b.nlevels }

// Instruments is the number of instruments opened so far.
func (bl *Builder) Instruments() int { return len(bl.b.insts) }

// Finish completes the book. The Builder must not be used afterwards.
func (bl *Builder) Finish() (*Book, error) {
	bl.stopStager()
	if bl.err != nil {
		return nil, bl.err
	}
	if bl.ii != none {
		bl.finishHalf()
		if err := bl.finishInstrument(); err != nil {
			return nil, err
		}
	}
	b := bl.b
	if bl.stDup != 0 {
		return nil, &SequenceError{Ordinal: b.ordinal(bl.stDup), What: fmt.Sprintf("order %d: duplicate id", b.idAt(bl.stDup))}
	}
	if dup, ok := bl.st.flush(); !ok {
		return nil, &SequenceError{Ordinal: b.ordinal(dup), What: fmt.Sprintf("order %d: duplicate id", b.idAt(dup))}
	}
	bl.b = nil
	bl.err = errors.New("builder already finished")
	return b, nil
}

// stage defers the id-index inserts of a large rebuild. Each id goes to the bucket of its
// sub-table (256 KiB of slots, pre-sized from the hint); Finish then inserts bucket by bucket,
// so every insert lands in a table that is already in cache, instead of costing a cache and
// TLB miss per order. A bucket that fills up early (beyond 8 standard deviations of its
// expected load) is inserted on the spot, which is slower, never wrong.
type stage struct {
	x     *index
	shift uint    // bucket = hash >> shift: the directory as pre-sized (later splits refine it)
	n     int     // buckets; 0: insert directly (small books fit in cache anyway)
	per   int     // capacity per bucket
	buf   []islot // n*per
	fill  []int32
}

// stageMinOrders is the book size from which a rebuild stages its index inserts (below it the
// index is small enough that direct inserts mostly hit cache). It and the 256 KiB sub-table were
// chosen from measured restores (docs/constants.md, "Staged index inserts").
const stageMinOrders = 64 << 10

func (s *stage) init(x *index, orders int) {
	s.x = x
	if orders < stageMinOrders || len(x.dir) < 2 {
		return
	}
	s.n, s.shift = len(x.dir), x.shift
	mean := float64(orders) / float64(s.n)
	s.per = int(mean+8*math.Sqrt(mean)) + 16
	s.buf = make([]islot, s.n*s.per)
	s.fill = make([]int32, s.n)
}

// add records id; on a duplicate already known it returns the loc of the later occurrence and
// false.
func (s *stage) add(id, loc uint64) (uint64, bool) {
	if s.n == 0 {
		return loc, s.x.insert(id, loc)
	}
	b := int(s.x.hash(id) >> s.shift)
	f := int(s.fill[b])
	if f == s.per {
		if dup, ok := s.drain(b); !ok {
			return dup, false
		}
		f = 0
	}
	s.buf[b*s.per+f] = islot{id: id, loc: loc}
	s.fill[b] = int32(f + 1)
	return 0, true
}

// drain inserts bucket b; on a duplicate it returns the duplicate's loc and false.
func (s *stage) drain(b int) (uint64, bool) {
	for _, e := range s.buf[b*s.per : b*s.per+int(s.fill[b])] {
		if !s.x.insert(e.id, e.loc) {
			return e.loc, false
		}
	}
	s.fill[b] = 0
	return 0, true
}

// flush inserts every bucket and releases the staging memory. Buckets map to distinct
// sub-tables, so they are filled on all CPUs at once (the book is not yet visible to anyone);
// a bucket whose sub-table would have to grow is left to a sequential pass, since growth may
// change the directory. On duplicates it reports the one found first in bucket order.
func (s *stage) flush() (uint64, bool) {
	workers := min(runtime.GOMAXPROCS(0), s.n)
	var next atomic.Int64
	dups := make([]uint64, s.n) // per bucket: the duplicate's loc, 0 none
	full := make([]bool, s.n)
	added := make([]int, s.n)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := int(next.Add(1) - 1); b < s.n; b = int(next.Add(1) - 1) {
				dups[b], full[b], added[b] = s.fill1(b)
			}
		}()
	}
	wg.Wait()
	for b := range s.n {
		s.x.n += added[b]
	}
	for b := range s.n {
		if dups[b] != 0 {
			return dups[b], false
		}
		if full[b] {
			if dup, ok := s.drain(b); !ok {
				return dup, false
			}
		}
	}
	s.n, s.buf, s.fill = 0, nil, nil
	return 0, true
}

// fill1 inserts bucket b into its own sub-tables (ids of different buckets never share one)
// without ever growing them. It returns a duplicate's loc, or full if a sub-table ran out of
// room (the rest of the bucket is kept for drain), and how many ids it added.
func (s *stage) fill1(b int) (dup uint64, full bool, added int) {
	x := s.x
	es := s.buf[b*s.per : b*s.per+int(s.fill[b])]
	for _, e := range es {
		h := x.hash(e.id)
		t := x.sub(h)
		if t.n >= len(t.s)*3/4 {
			s.fill[b] = int32(copy(es, es[added:]))
			return 0, true, added
		}
		i, ok := t.find(e.id, h)
		if ok {
			return e.loc, false, added
		}
		t.s[i] = e
		t.n++
		added++
	}
	s.fill[b] = 0
	return 0, false, added
}
