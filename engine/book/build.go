package book

import (
	"errors"
	"fmt"
	"math"
	"unsafe"
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
	if orders > 0 {
		bl.arena = make([]Resting, orders)
		adviseHuge(unsafe.Pointer(unsafe.SliceData(bl.arena)), uintptr(orders)*unsafe.Sizeof(Resting{}))
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
	if !bl.st.add(id, loc(li, seq)) {
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

// Orders is the number of orders added so far.
func (bl *Builder) Orders() int { return bl.b.orders }

// Levels is the number of levels opened so far.
func (bl *Builder) Levels() int { return bl.b.nlevels }

// Instruments is the number of instruments opened so far.
func (bl *Builder) Instruments() int { return len(bl.b.insts) }

// Finish completes the book. The Builder must not be used afterwards.
func (bl *Builder) Finish() (*Book, error) {
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
	if dup, ok := bl.st.flush(); !ok {
		return nil, &SequenceError{Ordinal: b.ordinal(dup), What: fmt.Sprintf("order %d: duplicate id", b.idAt(dup))}
	}
	bl.b = nil
	bl.err = errors.New("builder already finished")
	return b, nil
}

// stage defers the id-index inserts of a large rebuild. Each id goes to the bucket of the table
// region its home slot falls in (64 KiB of table per bucket); Finish then inserts bucket by
// bucket, so every insert lands in a region that is already in cache. Appending to ~n/4096
// buckets is a stream of writes the cache absorbs. A bucket that fills up early (beyond 8
// standard deviations of its expected load) is inserted on the spot, which is slower, never wrong.
type stage struct {
	x      *index
	n      int     // buckets; 0: insert directly (small books fit in cache anyway)
	per    int     // capacity per bucket
	buf    []islot // n*per
	fill   []int32
	direct bool
}

const (
	stageMinOrders = 128 << 10
	stageSlots     = 16384
)

func (s *stage) init(x *index, orders int) {
	s.x = x
	if orders < stageMinOrders {
		return
	}
	s.n = (len(x.s) + stageSlots - 1) / stageSlots
	mean := float64(orders) / float64(s.n)
	s.per = int(mean+8*math.Sqrt(mean)) + 16
	s.buf = make([]islot, s.n*s.per)
	adviseHuge(unsafe.Pointer(unsafe.SliceData(s.buf)), uintptr(len(s.buf))*unsafe.Sizeof(islot{}))
	s.fill = make([]int32, s.n)
}

// add records id; false if it is known to be a duplicate already.
func (s *stage) add(id, loc uint64) bool {
	if s.n == 0 {
		return s.x.insert(id, loc)
	}
	b := s.x.bucket(id, s.n)
	f := int(s.fill[b])
	if f == s.per {
		if _, ok := s.drain(b); !ok {
			return false
		}
		f = 0
	}
	s.buf[b*s.per+f] = islot{id: id, loc: loc}
	s.fill[b] = int32(f + 1)
	return true
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

// flush inserts every bucket in table order and releases the staging memory.
func (s *stage) flush() (uint64, bool) {
	for b := range s.n {
		if dup, ok := s.drain(b); !ok {
			return dup, false
		}
	}
	s.n, s.buf, s.fill = 0, nil, nil
	return 0, true
}
