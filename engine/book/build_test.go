package book

import (
	"errors"
	"testing"
	"unsafe"
)

// A large rebuild defers index inserts (stage); duplicates must still be caught, and be blamed
// on the right order.
func TestBuilderStagedDuplicate(t *testing.T) {
	const n = 200_000
	bl := NewBuilder(n, 0)
	if bl.st.n == 0 {
		t.Fatal("staging not in use for a large rebuild")
	}
	for i := range n - 1 {
		if err := bl.Add(1, Buy, 1_000_000-int64(i/100), uint64(i+1), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := bl.Add(1, Buy, 1, 777, 1); err != nil { // duplicate, found only at Finish
		t.Fatal(err)
	}
	_, err := bl.Finish()
	var se *SequenceError
	if !errors.As(err, &se) || !errors.Is(err, ErrSequence) || se.Ordinal != n-1 {
		t.Fatalf("err %v (%+v), want a duplicate at ordinal %d", err, se, n-1)
	}
}

// Ids that all fall in one bucket overflow it; the overflow is inserted early and the book is
// still complete.
func TestBuilderStageOverflow(t *testing.T) {
	const n = 200_000
	bl := NewBuilder(n, 0)
	var ids []uint64
	for id := uint64(1); len(ids) < 3*bl.st.per; id++ {
		if bl.b.ids.hash(id)>>bl.st.shift == 0 {
			ids = append(ids, id)
		}
	}
	for i, id := range ids {
		if err := bl.Add(1, Sell, 100+int64(i/10), id, 1); err != nil {
			t.Fatal(err)
		}
	}
	b, err := bl.Finish()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, _, _, _, ok := b.Lookup(id); !ok {
			t.Fatalf("id %d lost", id)
		}
	}
	if b.Orders() != len(ids) {
		t.Fatalf("orders %d want %d", b.Orders(), len(ids))
	}
	// And a duplicate across an early drain and the final flush.
	bl = NewBuilder(n, 0)
	for i, id := range append(ids, ids[0]) {
		if err := bl.Add(1, Sell, 100+int64(i/10), id, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bl.Finish(); !errors.Is(err, ErrSequence) {
		t.Fatalf("duplicate across drains: %v", err)
	}
}

// The index splits sub-tables as it grows, never rehashing everything at once; lookups, deletes
// and re-inserts stay correct across splits and directory doublings.
func TestIndexGrowthAndSplits(t *testing.T) {
	var x index
	x.init(0)
	const n = 300_000
	for i := range uint64(n) {
		if !x.insert(i*7+1, loc(int32(i%100), uint32(i))) {
			t.Fatalf("insert %d failed", i)
		}
	}
	if x.depth < 2 || x.n != n {
		t.Fatalf("depth %d n %d: want several sub-tables and %d ids", x.depth, x.n, n)
	}
	for _, sub := range x.dir {
		if len(sub.s) > 1<<subMaxLog || sub.n > len(sub.s)*3/4 {
			t.Fatalf("sub-table of %d slots holds %d", len(sub.s), sub.n)
		}
	}
	for i := range uint64(n) {
		if l, ok := x.get(i*7 + 1); !ok || l != loc(int32(i%100), uint32(i)) {
			t.Fatalf("get %d: %x %v", i, l, ok)
		}
		if x.has(i*7 + 2) {
			t.Fatalf("phantom %d", i*7+2)
		}
	}
	for i := uint64(0); i < n; i += 2 {
		if _, ok := x.take(i*7 + 1); !ok {
			t.Fatalf("take %d", i)
		}
	}
	for i := range uint64(n) {
		_, ok := x.get(i*7 + 1)
		if ok != (i%2 == 1) {
			t.Fatalf("after deletes, get %d: %v", i, ok)
		}
		if i%2 == 0 && !x.insert(i*7+1, 5) {
			t.Fatalf("reinsert %d", i)
		}
	}
	if x.insert(8, 1) {
		t.Fatal("duplicate accepted")
	}
}

// Ids that share their low bits (k<<20) or differ only in high bits (session<<44) must still
// spread over the table.
func TestIndexStructuredIDsSpread(t *testing.T) {
	for _, shift := range []uint{20, 44} {
		var x index
		x.init(0)
		for k := range uint64(60_000) {
			x.insert(k<<shift|1, 1)
		}
		checkRuns(t, &x)
	}
}

func checkRuns(t *testing.T, x *index) {
	t.Helper()
	for _, sub := range x.dir {
		run, longest := 0, 0
		for _, e := range sub.s {
			if e.loc != 0 {
				run++
				longest = max(longest, run)
			} else {
				run = 0
			}
		}
		if longest > 500 {
			t.Fatalf("probe run of %d slots in a sub-table of %d holding %d", longest, len(sub.s), sub.n)
		}
	}
}

// Ascending ids, as a preload sends them, share cache lines: the ids of one group sit in one
// sub-table on adjacent slots, so building a book of n orders misses the cache about n/idGroup
// times in the index rather than n.
func TestIndexGroupsConsecutiveIDs(t *testing.T) {
	var x index
	x.init(0)
	const n = 200_000
	for id := uint64(1); id <= n; id++ {
		x.insert(id, 1)
	}
	where := func(id uint64) (*subTable, uint64) {
		h := x.hash(id)
		st := x.sub(h)
		i, ok := st.find(id, h)
		if !ok {
			t.Fatalf("id %d missing", id)
		}
		return st, i
	}
	const slotsPerLine = 64 / 16
	lines, groups := 0, 0
	for g := uint64(1); g < n/idGroup; g++ {
		seen := map[[2]uint64]bool{}
		for j := range uint64(idGroup) {
			st, i := where(g*idGroup + j)
			seen[[2]uint64{uint64(uintptr(unsafe.Pointer(st))), i / slotsPerLine}] = true
		}
		lines += len(seen)
		groups++
	}
	if per := float64(lines) / float64(groups); per > 2 {
		t.Fatalf("a group of %d consecutive ids spans %.2f cache lines on average, want <= 2", idGroup, per)
	}
}
