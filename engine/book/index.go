package book

import (
	"math/bits"
	"math/rand/v2"
)

// index maps a resting order id to its location (level slot, seq in the level's queue).
//
// It is an extendible hash table: the top bits of an id's hash pick a sub-table through a
// directory, and each sub-table is open addressing with linear probing and backward-shift
// deletion (no tombstones, no allocation per order). A sub-table grows by doubling up to
// subMaxLog, then splits in two on the next hash bit; the directory doubles when a split needs
// one more bit. So the most any one insert ever rehashes is one sub-table (16K slots), never the
// whole index: no command pays O(book) for growth. Sub-tables stay between 3/8 and 3/4 full.
//
// The hash is seeded per book, so ids chosen to collide cannot pile into one sub-table.
//
// Runs of idGroup consecutive ids share one hash but for their low bits, which are the id's
// own: such a run lands in one sub-table on adjacent slots (one cache line), so a preload's
// ascending ids pay one cache miss per run instead of one per order.
type index struct {
	dir   []*subTable
	shift uint // 64 - global depth
	depth uint
	n     int
	seed  uint64
}

type subTable struct {
	s     []islot
	mask  uint64
	n     int
	depth uint // local depth: the top bits all its ids share
}

// home is the first slot to probe for hash h: its low bits (the directory takes the high
// ones), which for ids of one group are the id's own low bits, so the group's slots adjoin.
func (t *subTable) home(h uint64) uint64 { return h & t.mask }

type islot struct {
	id  uint64
	loc uint64 // 0: empty (loc() never returns 0)
}

const (
	// idGroup ids (4 × 16-byte slots: one 64-byte cache line) share a hash but for their low bits.
	idGroup   = 4
	subMaxLog = 14 // 16384 slots, 256 KiB: one fits L2 (see stage)
	subMinLog = 6
	maxDepth  = 40
)

// init sizes the index for hint ids (0: small).
func (x *index) init(hint int) {
	x.n, x.seed = 0, rand.Uint64()
	need := max(1<<subMinLog, hint*10/7+1) // slots at 70% load
	if need <= 1<<subMaxLog {
		x.depth, x.shift = 0, 64
		x.dir = []*subTable{newSubTable(uint(bits.Len(uint(need-1))), 0)}
		return
	}
	d := uint(bits.Len(uint((need - 1) >> subMaxLog)))
	x.depth, x.shift = d, 64-d
	x.dir = make([]*subTable, 1<<d)
	for i := range x.dir {
		x.dir[i] = newSubTable(subMaxLog, d)
	}
}

// hash mixes the seeded id's group (id / idGroup) with the splitmix64 finalizer, whose every
// output bit depends on every input bit, so ids that share low bits or differ only in high
// ones still spread; the id's position in its group replaces the low bits.
func (x *index) hash(id uint64) uint64 {
	return mix64(id/idGroup^x.seed)&^(idGroup-1) | id&(idGroup-1)
}

func newSubTable(log, depth uint) *subTable {
	n := 1 << log
	s := make([]islot, n)
	return &subTable{s: s, mask: uint64(n - 1), depth: depth}
}

func (x *index) sub(h uint64) *subTable { return x.dir[h>>x.shift] } // h>>64 is 0 in Go

// find returns the slot holding id in t, or the empty slot where it would go and false.
func (t *subTable) find(id, h uint64) (uint64, bool) {
	s, m := t.s, t.mask
	for i := t.home(h); ; i = (i + 1) & m {
		e := &s[i]
		if e.loc == 0 {
			return i, false
		}
		if e.id == id {
			return i, true
		}
	}
}

func (x *index) has(id uint64) bool {
	h := x.hash(id)
	_, ok := x.sub(h).find(id, h)
	return ok
}

func (x *index) get(id uint64) (uint64, bool) {
	h := x.hash(id)
	t := x.sub(h)
	i, ok := t.find(id, h)
	if !ok {
		return 0, false
	}
	return t.s[i].loc, true
}

// insert adds id; false if it is already present.
func (x *index) insert(id, loc uint64) bool {
	h := x.hash(id)
	t := x.sub(h)
	for t.n >= len(t.s)*3/4 {
		x.grow(t, h)
		t = x.sub(h)
	}
	i, ok := t.find(id, h)
	if ok {
		return false
	}
	t.s[i] = islot{id: id, loc: loc}
	t.n++
	x.n++
	return true
}

// set re-points a present id.
func (x *index) set(id, loc uint64) {
	h := x.hash(id)
	t := x.sub(h)
	if i, ok := t.find(id, h); ok {
		t.s[i].loc = loc
	}
}

func (x *index) take(id uint64) (uint64, bool) {
	h := x.hash(id)
	t := x.sub(h)
	i, ok := t.find(id, h)
	if !ok {
		return 0, false
	}
	l := t.s[i].loc
	x.removeAt(t, i)
	x.n--
	return l, true
}

func (x *index) del(id uint64) {
	h := x.hash(id)
	t := x.sub(h)
	if i, ok := t.find(id, h); ok {
		x.removeAt(t, i)
		x.n--
	}
}

// removeAt empties slot i and shifts back later entries of the probe run that may move.
func (x *index) removeAt(t *subTable, i uint64) {
	s, m := t.s, t.mask
	for j := (i + 1) & m; ; j = (j + 1) & m {
		e := s[j]
		if e.loc == 0 {
			break
		}
		// e stays if its home lies cyclically in (i, j].
		if k := t.home(x.hash(e.id)); (j-k)&m < (j-i)&m {
			continue
		}
		s[i] = e
		i = j
	}
	s[i] = islot{}
	t.n--
}

// put adds an entry known to be absent, without growth checks.
func (t *subTable) put(e islot, h uint64) {
	s, m := t.s, t.mask
	i := t.home(h)
	for s[i].loc != 0 {
		i = (i + 1) & m
	}
	s[i] = e
	t.n++
}

// grow makes room in t, which holds hash h: it doubles t up to subMaxLog, else splits it (or,
// should a split ever fail to separate its ids, keeps doubling rather than deepen without end).
func (x *index) grow(t *subTable, h uint64) {
	if len(t.s) < 1<<subMaxLog || t.depth >= maxDepth {
		old := t.s
		nt := newSubTable(uint(bits.Len(uint(len(old)))), t.depth)
		for _, e := range old {
			if e.loc != 0 {
				nt.put(e, x.hash(e.id))
			}
		}
		*t = *nt
		return
	}
	if t.depth == x.depth { // one more directory bit
		nd := make([]*subTable, 2*len(x.dir))
		for i, p := range x.dir {
			nd[2*i], nd[2*i+1] = p, p
		}
		x.dir = nd
		x.depth++
		x.shift--
	}
	lo, hi := newSubTable(subMaxLog, t.depth+1), newSubTable(subMaxLog, t.depth+1)
	bit := uint64(1) << (63 - t.depth)
	for _, e := range t.s {
		if e.loc == 0 {
			continue
		}
		eh := x.hash(e.id)
		if eh&bit == 0 {
			lo.put(e, eh)
		} else {
			hi.put(e, eh)
		}
	}
	// t owns a run of 2^(depth - t.depth) directory entries; split it in halves.
	span := 1 << (x.depth - t.depth)
	first := int(h>>x.shift) &^ (span - 1)
	for i := range span {
		if i < span/2 {
			x.dir[first+i] = lo
		} else {
			x.dir[first+i] = hi
		}
	}
}
