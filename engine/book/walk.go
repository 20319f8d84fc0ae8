package book

// Cursor walks the resting orders in snapshot order: instruments by ascending id, the buy side
// before the sell side, levels best first, orders in time priority. Advancing to the next level
// is O(1); the orders of a level come back as a slice of its queue, so a walker reads memory
// sequentially. A Cursor is a value: copy it to remember a position. Any mutation of the book
// invalidates it.
type Cursor struct {
	b     *Book
	inst  int // position in b.sorted
	side  Side
	lv    int32 // current level; none at the end
	pos   int32 // next queue slot of lv
	taken int32 // live orders of lv already passed
}

// Run is a stretch of one level's queue. Orders aliases the book (read only, valid until the
// next mutation); entries with Qty 0 are cancelled placeholders to skip. Live counts the others.
type Run struct {
	Instrument uint32
	Side       Side
	Price      int64
	Orders     []Resting
	Live       int
}

// Walk returns a cursor at the first resting order.
func (b *Book) Walk() Cursor {
	c := Cursor{b: b, lv: none}
	c.enter(0, Buy)
	return c
}

// enter positions c at the best level of the first non-empty half at or after (inst, side).
func (c *Cursor) enter(inst int, side Side) {
	b := c.b
	for inst < len(b.sorted) {
		h := &b.insts[b.sorted[inst]].sides[side]
		if h.best != none {
			c.inst, c.side, c.lv = inst, side, h.best
			c.pos, c.taken = b.levels[h.best].head, 0
			return
		}
		if side == Buy {
			side = Sell
		} else {
			inst, side = inst+1, Buy
		}
	}
	c.inst, c.side, c.lv = len(b.sorted), Buy, none
}

func (c *Cursor) nextLevel() {
	b := c.b
	if w := b.worse(&b.levels[c.lv]); w != none {
		c.lv, c.pos, c.taken = w, b.levels[w].head, 0
		return
	}
	if c.side == Buy {
		c.enter(c.inst, Sell)
	} else {
		c.enter(c.inst+1, Buy)
	}
}

// Done reports whether the cursor is past the last order.
func (c *Cursor) Done() bool { return c.lv == none }

// Next returns the next run of at most max live orders (max >= 1) and advances past it.
func (c *Cursor) Next(max int) (Run, bool) {
	if c.lv == none {
		return Run{}, false
	}
	b := c.b
	lv := &b.levels[c.lv]
	ins := &b.insts[lv.half>>1]
	run := Run{Instrument: ins.id, Side: c.side, Price: lv.price}
	rem := int(lv.live - c.taken)
	if max >= rem {
		run.Orders, run.Live = lv.q[c.pos:], rem
		c.nextLevel()
		return run, true
	}
	end := c.stop(lv, max)
	run.Orders, run.Live = lv.q[c.pos:end], max
	c.pos, c.taken = int32(end), c.taken+int32(max)
	return run, true
}

// stop is the queue index just past the n-th live order from c.pos (n < live remaining).
func (c *Cursor) stop(lv *level, n int) int {
	i := int(c.pos)
	if lv.dead == 0 {
		return i + n
	}
	for ; n > 0; i++ {
		if lv.q[i].Qty != 0 {
			n--
		}
	}
	return i
}

// Skip advances past n live orders without reading them: O(levels passed), plus a scan of the
// last level's queue if it holds placeholders.
func (c *Cursor) Skip(n int) {
	b := c.b
	for n > 0 && c.lv != none {
		lv := &b.levels[c.lv]
		rem := int(lv.live - c.taken)
		if n >= rem {
			n -= rem
			c.nextLevel()
			continue
		}
		c.pos = int32(c.stop(lv, n))
		c.taken += int32(n)
		return
	}
}

// ordinal is the walk position (from 0) of the order at location lc, found by walking levels:
// O(levels), for error reports only.
func (b *Book) ordinal(lc uint64) int64 {
	li, seq := unloc(lc)
	var n int64
	c := b.Walk()
	for c.lv != none {
		lv := &b.levels[c.lv]
		if c.lv == li {
			for i := int(lv.head); i < int(seq-lv.base); i++ {
				if lv.q[i].Qty != 0 {
					n++
				}
			}
			return n
		}
		n += int64(lv.live)
		c.nextLevel()
	}
	return -1
}

func (b *Book) idAt(lc uint64) uint64 {
	li, seq := unloc(lc)
	lv := &b.levels[li]
	return lv.q[seq-lv.base].ID
}
