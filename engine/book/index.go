package book

import (
	"math/bits"
	"unsafe"
)

// index maps a resting order id to its location (level slot, seq in the level's queue). Open
// addressing with linear probing and backward-shift deletion: no allocation per order, no
// tombstones. The table size is not a power of two (the home slot is a multiply-high of the
// hash), so it can grow by 1.5x and stay between 50% and 75% full.
type index struct {
	s     []islot
	n     int
	limit int
}

type islot struct {
	id  uint64
	loc uint64 // 0: empty (loc() never returns 0)
}

func (x *index) init(hint int) {
	size := max(64, hint*10/7+1)
	x.s = makeSlots(size)
	x.n = 0
	x.limit = size * 3 / 4
}

func (x *index) home(id uint64) int {
	h := (id ^ id>>32) * 0x9e3779b97f4a7c15
	hi, _ := bits.Mul64(h, uint64(len(x.s)))
	return int(hi)
}

// find returns the slot holding id, or the empty slot where it would go and false.
func (x *index) find(id uint64) (int, bool) {
	s := x.s
	i := x.home(id)
	for {
		e := &s[i]
		if e.loc == 0 {
			return i, false
		}
		if e.id == id {
			return i, true
		}
		i++
		if i == len(s) {
			i = 0
		}
	}
}

func (x *index) has(id uint64) bool {
	_, ok := x.find(id)
	return ok
}

func (x *index) get(id uint64) (uint64, bool) {
	i, ok := x.find(id)
	if !ok {
		return 0, false
	}
	return x.s[i].loc, true
}

// insert adds id; false if it is already present.
func (x *index) insert(id, loc uint64) bool {
	if x.n >= x.limit {
		x.grow()
	}
	i, ok := x.find(id)
	if ok {
		return false
	}
	x.s[i] = islot{id: id, loc: loc}
	x.n++
	return true
}

// set re-points a present id.
func (x *index) set(id, loc uint64) {
	i, ok := x.find(id)
	if ok {
		x.s[i].loc = loc
	}
}

func (x *index) take(id uint64) (uint64, bool) {
	i, ok := x.find(id)
	if !ok {
		return 0, false
	}
	l := x.s[i].loc
	x.removeAt(i)
	return l, true
}

func (x *index) del(id uint64) {
	if i, ok := x.find(id); ok {
		x.removeAt(i)
	}
}

// removeAt empties slot i and shifts back later entries of the probe run that may move.
func (x *index) removeAt(i int) {
	s := x.s
	n := len(s)
	j := i
	for {
		j++
		if j == n {
			j = 0
		}
		e := s[j]
		if e.loc == 0 {
			break
		}
		k := x.home(e.id)
		// e stays if its home lies cyclically in (i, j].
		if i <= j {
			if i < k && k <= j {
				continue
			}
		} else if i < k || k <= j {
			continue
		}
		s[i] = e
		i = j
	}
	s[i] = islot{}
	x.n--
}

func (x *index) grow() {
	old := x.s
	size := len(old) + len(old)/2
	x.s = makeSlots(size)
	x.limit = size * 3 / 4
	for _, e := range old {
		if e.loc == 0 {
			continue
		}
		i := x.home(e.id)
		for x.s[i].loc != 0 {
			i++
			if i == size {
				i = 0
			}
		}
		x.s[i] = e
	}
}

// bucket maps id to one of n equal regions of the table, in table order: the region its home
// slot lies in (up to rounding at region edges, which only costs locality).
func (x *index) bucket(id uint64, n int) int {
	h := (id ^ id>>32) * 0x9e3779b97f4a7c15
	hi, _ := bits.Mul64(h, uint64(n))
	return int(hi)
}

func makeSlots(n int) []islot {
	s := make([]islot, n)
	adviseHuge(unsafe.Pointer(unsafe.SliceData(s)), uintptr(n)*unsafe.Sizeof(islot{}))
	return s
}
