// Package book is the reference engine's order book: many instruments, price-time priority,
// limit (GTC/IOC) and market orders, cancel.
//
// Layout, chosen so that a snapshot walk streams memory instead of chasing pointers:
//   - every price level keeps its queue as one contiguous array of 16-byte {id, qty} records in
//     time order (a cancelled order in the middle leaves a qty-0 placeholder until the level is
//     compacted), so walking the book reads memory sequentially;
//   - price levels live in one slab with int32 links: a sorted doubly linked list per side (best
//     first for the walk and for matching) and a treap over the same nodes (O(log levels) lookup
//     of a price that is not the best, after a small map by price of each side's live levels);
//   - the id index maps id -> {level, seq} in open-addressing sub-tables (extendible hashing):
//     no allocation per order, growth rehashes one 256 KiB sub-table at a time, and ascending
//     ids share cache lines.
//
// No command does O(book) work: a submit or cancel costs O(1) plus O(log levels) to open or
// close a level, plus the fills it makes. The only non-constant steps are amortised ones
// confined to one level's queue (growing its array, or squeezing out placeholders once they
// outnumber its live orders). Depth stops at N. StateHash is a read, O(book), cached until
// the next mutation.
//
// A Book is not safe for concurrent use; it may be read by several goroutines at once (snapshot
// encode) only while nobody mutates it.
package book

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Side of an order.
type Side uint8

// Sides.
const (
	Buy  Side = 0
	Sell Side = 1
)

func (s Side) String() string {
	switch s {
	case Buy:
		return "buy"
	case Sell:
		return "sell"
	}
	return fmt.Sprintf("side(%d)", uint8(s))
}

// TIF is an order's time in force.
type TIF uint8

// Times in force. IOC fills what crosses and never rests (a probe that crosses nothing leaves
// the book unchanged).
const (
	GTC TIF = 0
	IOC TIF = 1
)

// Order is a new order. Market orders ignore Price, take any price and never rest.
type Order struct {
	ID         uint64
	Instrument uint32
	Side       Side
	Price      int64
	Qty        int64
	TIF        TIF
	Market     bool
}

// Fill is one trade: a resting maker against the incoming taker, at the maker's price.
type Fill struct {
	MakerID, TakerID uint64
	Price, Qty       int64
}

// Result of a Submit: Filled is the quantity traded, Rested the quantity left on the book.
type Result struct {
	Filled int64
	Rested int64
}

// Level is one aggregated price level (Depth).
type Level struct {
	Price, Qty int64
	Orders     int
}

// Sentinel errors; the returned errors wrap them with details.
var (
	ErrDuplicateID  = errors.New("duplicate order id")
	ErrUnknownOrder = errors.New("unknown order")
	ErrBadOrder     = errors.New("bad order")
)

const none int32 = -1

// Resting is one slot of a level's queue: a resting order's id and remaining quantity.
// Qty 0 marks a cancelled order's placeholder; walkers skip it.
type Resting struct {
	ID  uint64
	Qty int64
}

// level is a price level: its queue and its links in the side's list and treap.
type level struct {
	q     []Resting // q[head:] is the queue; q[head] and q[len-1] are always live
	price int64
	qty   int64  // total live quantity
	base  uint32 // seq of q[0]; the id index stores seq, so pops at the head move nothing
	head  int32
	live  int32
	dead  int32 // placeholders inside q[head:]
	prev  int32 // next lower price on this side
	next  int32 // next higher price on this side
	left  int32 // treap children
	right int32
	prio  uint32
	half  int32 // instrument index*2 + side
}

// half is one side of one instrument.
type half struct {
	root   int32 // treap root
	best   int32 // highest bid / lowest ask
	worst  int32 // lowest bid / highest ask
	levels int32
	orders int64
	// near maps price mod nearSlots to a live level of this half (slot + 1; 0 none), the last
	// one found there: orders resting at prices near the touch find their level without a walk
	// of the treap. removeLevel clears the entry of the level it frees.
	near [nearSlots]int32
}

const nearSlots = 128

type instrument struct {
	id    uint32
	sides [2]half
}

// Book is a multi-instrument order book.
type Book struct {
	ids      index
	insts    []instrument
	instByID map[uint32]int32
	sorted   []int32 // instrument indices ordered by id: the walk order
	levels   []level
	free     []int32 // free level slots
	orders   int
	nlevels  int

	lastInst uint32 // one-entry cache in front of instByID
	lastIdx  int32

	version   uint64 // bumped by every mutation; StateHash caches on it
	hashAt    uint64
	hashValue uint64
	hashOK    bool
}

// New returns an empty book.
func New() *Book {
	b := &Book{instByID: make(map[uint32]int32), lastIdx: none}
	b.ids.init(0)
	return b
}

// Orders is the number of resting orders.
func (b *Book) Orders() int { return b.orders }

// Levels is the number of non-empty price levels over all instruments and sides.
func (b *Book) Levels() int { return b.nlevels }

// Instruments is the number of instruments with at least one resting order.
func (b *Book) Instruments() int {
	n := 0
	for i := range b.insts {
		s := &b.insts[i].sides
		if s[0].orders+s[1].orders > 0 {
			n++
		}
	}
	return n
}

func (b *Book) instIndex(id uint32) int32 {
	if b.lastIdx != none && b.lastInst == id {
		return b.lastIdx
	}
	i, ok := b.instByID[id]
	if !ok {
		return none
	}
	b.lastInst, b.lastIdx = id, i
	return i
}

func (b *Book) addInstrument(id uint32) int32 {
	i := int32(len(b.insts))
	b.insts = append(b.insts, instrument{id: id, sides: [2]half{
		{root: none, best: none, worst: none}, {root: none, best: none, worst: none}}})
	b.instByID[id] = i
	pos, _ := slices.BinarySearchFunc(b.sorted, id, func(x int32, id uint32) int {
		return cmp.Compare(b.insts[x].id, id)
	})
	b.sorted = slices.Insert(b.sorted, pos, i)
	b.lastInst, b.lastIdx = id, i
	return i
}

func validate(o *Order) error {
	switch {
	case o.Qty <= 0:
		return fmt.Errorf("%w: order %d: qty %d, want > 0", ErrBadOrder, o.ID, o.Qty)
	case o.Side > Sell:
		return fmt.Errorf("%w: order %d: side %d, want 0 (buy) or 1 (sell)", ErrBadOrder, o.ID, o.Side)
	case o.TIF > IOC:
		return fmt.Errorf("%w: order %d: tif %d, want 0 (GTC) or 1 (IOC)", ErrBadOrder, o.ID, o.TIF)
	}
	return nil
}

// Submit matches o against the opposite side in price-time priority, calling onFill (if not
// nil) for every trade, and rests what is left of a GTC limit order. onFill must not call back
// into the book. An invalid order or a duplicate of a resting id changes nothing.
func (b *Book) Submit(o Order, onFill func(Fill)) (Result, error) {
	if err := validate(&o); err != nil {
		return Result{}, err
	}
	if b.ids.has(o.ID) {
		return Result{}, fmt.Errorf("%w: order %d is already resting", ErrDuplicateID, o.ID)
	}
	ii := b.instIndex(o.Instrument)
	rem := o.Qty
	if ii != none {
		rem = b.match(ii, &o, onFill)
	}
	res := Result{Filled: o.Qty - rem}
	if rem > 0 && !o.Market && o.TIF == GTC {
		if ii == none {
			ii = b.addInstrument(o.Instrument)
		}
		b.rest(ii, o.Side, o.Price, o.ID, rem)
		res.Rested = rem
	}
	return res, nil
}

// match takes liquidity from the opposite side and returns the quantity left.
func (b *Book) match(ii int32, o *Order, onFill func(Fill)) int64 {
	rem := o.Qty
	h := &b.insts[ii].sides[1-o.Side]
	for rem > 0 && h.best != none {
		li := h.best
		lv := &b.levels[li]
		if !o.Market && ((o.Side == Buy && lv.price > o.Price) || (o.Side == Sell && lv.price < o.Price)) {
			break
		}
		b.version++
		for rem > 0 && lv.live > 0 {
			r := &lv.q[lv.head]
			q := min(rem, r.Qty)
			r.Qty -= q
			lv.qty -= q
			rem -= q
			if onFill != nil {
				onFill(Fill{MakerID: r.ID, TakerID: o.ID, Price: lv.price, Qty: q})
			}
			if r.Qty == 0 {
				b.ids.del(r.ID)
				lv.head++
				lv.live--
				lv.trimHead()
				h.orders--
				b.orders--
			}
		}
		if lv.live == 0 {
			b.removeLevel(li)
		}
	}
	return rem
}

// trimHead drops placeholders at the front so q[head] is live (or the queue is empty).
func (lv *level) trimHead() {
	for int(lv.head) < len(lv.q) && lv.q[lv.head].Qty == 0 {
		lv.head++
		lv.dead--
	}
}

// trimTail drops placeholders at the back so q[len-1] is live (or the queue is empty).
func (lv *level) trimTail() {
	n := len(lv.q)
	for n > int(lv.head) && lv.q[n-1].Qty == 0 {
		n--
		lv.dead--
	}
	lv.q = lv.q[:n]
}

func (b *Book) rest(ii int32, side Side, price int64, id uint64, qty int64) {
	b.version++
	li := b.levelFor(ii, side, price)
	lv := &b.levels[li]
	seq := lv.push(Resting{ID: id, Qty: qty})
	lv.qty += qty
	lv.live++
	b.insts[ii].sides[side].orders++
	b.orders++
	b.ids.insert(id, loc(li, seq))
}

// push appends r to the queue and returns its seq. When the array is full it first reclaims the
// consumed prefix if that is at least a quarter of it, else grows (append's amortised doubling,
// copying only the live part); either way the cost is amortised over the pushes or pops that
// made it necessary, and seqs stay valid.
func (lv *level) push(r Resting) uint32 {
	n := len(lv.q)
	if n == cap(lv.q) {
		h := int(lv.head)
		if h > 0 && h*4 >= n {
			copy(lv.q, lv.q[h:])
			lv.q = lv.q[:n-h]
		} else {
			lv.q = slices.Grow(lv.q[h:], 1)
		}
		lv.base += uint32(h)
		lv.head = 0
	}
	lv.q = append(lv.q, r)
	return lv.base + uint32(len(lv.q)-1)
}

// Cancel removes a resting order.
func (b *Book) Cancel(id uint64) error {
	lc, ok := b.ids.take(id)
	if !ok {
		return fmt.Errorf("%w: order %d is not resting", ErrUnknownOrder, id)
	}
	b.version++
	li, seq := unloc(lc)
	lv := &b.levels[li]
	i := int(seq - lv.base)
	r := &lv.q[i]
	lv.qty -= r.Qty
	r.Qty = 0
	lv.live--
	lv.dead++
	lv.trimHead()
	lv.trimTail()
	b.insts[lv.half>>1].sides[lv.half&1].orders--
	b.orders--
	if lv.live == 0 {
		b.removeLevel(li)
		return nil
	}
	if lv.dead > 32 && lv.dead > lv.live {
		b.compact(li)
	}
	return nil
}

// compact squeezes out placeholders and re-points the index at every moved order. It runs when
// placeholders outnumber live orders, so its cost is paid for by the cancels that made them.
func (b *Book) compact(li int32) {
	lv := &b.levels[li]
	w := int(lv.head)
	for i := int(lv.head); i < len(lv.q); i++ {
		r := lv.q[i]
		if r.Qty == 0 {
			continue
		}
		if i != w {
			lv.q[w] = r
			b.ids.set(r.ID, loc(li, lv.base+uint32(w)))
		}
		w++
	}
	lv.q = lv.q[:w]
	lv.dead = 0
}

// levelFor returns the level at price on that side, creating it if needed.
func (b *Book) levelFor(ii int32, side Side, price int64) int32 {
	h := &b.insts[ii].sides[side]
	if h.best != none && b.levels[h.best].price == price {
		return h.best
	}
	near := &h.near[uint64(price)%nearSlots]
	if n := *near - 1; n != none && b.levels[n].price == price {
		return n
	}
	pred, succ := none, none
	for n := h.root; n != none; {
		lv := &b.levels[n]
		switch {
		case price < lv.price:
			succ, n = n, lv.left
		case price > lv.price:
			pred, n = n, lv.right
		default:
			*near = n + 1
			return n
		}
	}
	li := b.newLevel(ii, side, price)
	lv := &b.levels[li]
	h = &b.insts[ii].sides[side]
	h.near[uint64(price)%nearSlots] = li + 1
	lv.prev, lv.next = pred, succ
	if pred != none {
		b.levels[pred].next = li
	}
	if succ != none {
		b.levels[succ].prev = li
	}
	h.root = b.tInsert(h.root, li)
	h.levels++
	if side == Buy {
		if succ == none {
			h.best = li
		}
		if pred == none {
			h.worst = li
		}
	} else {
		if pred == none {
			h.best = li
		}
		if succ == none {
			h.worst = li
		}
	}
	return li
}

func (b *Book) newLevel(ii int32, side Side, price int64) int32 {
	var li int32
	if n := len(b.free); n > 0 {
		li = b.free[n-1]
		b.free = b.free[:n-1]
	} else {
		li = int32(len(b.levels))
		b.levels = append(b.levels, level{})
	}
	lv := &b.levels[li]
	*lv = level{q: lv.q[:0], price: price, prev: none, next: none, left: none, right: none,
		prio: prioOf(price), half: ii*2 + int32(side)}
	b.nlevels++
	return li
}

// removeLevel unlinks an empty level and frees its slot, keeping a small queue array for reuse.
func (b *Book) removeLevel(li int32) {
	lv := &b.levels[li]
	h := &b.insts[lv.half>>1].sides[lv.half&1]
	h.root = b.tDelete(h.root, lv.price)
	if lv.prev != none {
		b.levels[lv.prev].next = lv.next
	}
	if lv.next != none {
		b.levels[lv.next].prev = lv.prev
	}
	better, worse := lv.prev, lv.next // asks: lower is better
	if lv.half&1 == int32(Buy) {
		better, worse = worse, better
	}
	if h.best == li {
		h.best = worse
	}
	if h.worst == li {
		h.worst = better
	}
	h.levels--
	if near := &h.near[uint64(lv.price)%nearSlots]; *near == li+1 {
		*near = 0
	}
	if cap(lv.q) > 256 {
		lv.q = nil
	} else {
		lv.q = lv.q[:0]
	}
	lv.head, lv.live, lv.dead, lv.qty = 0, 0, 0, 0
	b.free = append(b.free, li)
	b.nlevels--
}

// Depth returns up to n best levels of one side, best first. It visits at most n levels.
func (b *Book) Depth(instrument uint32, side Side, n int) []Level {
	return b.AppendDepth(nil, instrument, side, n)
}

// AppendDepth is Depth appending to dst, for callers that reuse a buffer.
func (b *Book) AppendDepth(dst []Level, instrument uint32, side Side, n int) []Level {
	ii := b.instIndex(instrument)
	if ii == none || side > Sell || n <= 0 {
		return dst
	}
	li := b.insts[ii].sides[side].best
	for ; li != none && n > 0; n-- {
		lv := &b.levels[li]
		dst = append(dst, Level{Price: lv.price, Qty: lv.qty, Orders: int(lv.live)})
		li = b.worse(lv)
	}
	return dst
}

// worse is the next level away from the best on lv's side.
func (b *Book) worse(lv *level) int32 {
	if lv.half&1 == int32(Buy) {
		return lv.prev
	}
	return lv.next
}

// Lookup returns a resting order's instrument, side, price and remaining qty.
func (b *Book) Lookup(id uint64) (instrument uint32, side Side, price, qty int64, ok bool) {
	lc, ok := b.ids.get(id)
	if !ok {
		return 0, 0, 0, 0, false
	}
	li, seq := unloc(lc)
	lv := &b.levels[li]
	return b.insts[lv.half>>1].id, Side(lv.half & 1), lv.price, lv.q[seq-lv.base].Qty, true
}

// StateHash is a deterministic 64-bit hash of the book's content in walk order (instrument,
// side, price-time), covering every order's id, price and qty. It is O(book) (a sequential
// walk), cached until the next mutation.
func (b *Book) StateHash() uint64 {
	if b.hashOK && b.hashAt == b.version {
		return b.hashValue
	}
	h := uint64(0x9e3779b97f4a7c15) ^ uint64(b.orders)
	c := b.Walk()
	for {
		run, ok := c.Next(1 << 30)
		if !ok {
			break
		}
		tag := mix64(uint64(run.Instrument)<<1|uint64(run.Side)) ^ uint64(run.Price)
		for _, r := range run.Orders {
			if r.Qty != 0 {
				h = mix64(h ^ tag ^ r.ID*0xbf58476d1ce4e5b9 ^ uint64(r.Qty)<<17)
			}
		}
	}
	b.hashAt, b.hashValue, b.hashOK = b.version, h, true
	return h
}

// mix64 is the splitmix64 finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func prioOf(price int64) uint32 { return uint32(mix64(uint64(price)) >> 32) }

func loc(li int32, seq uint32) uint64 { return uint64(li+1)<<32 | uint64(seq) }

func unloc(l uint64) (int32, uint32) { return int32(l>>32) - 1, uint32(l) }
