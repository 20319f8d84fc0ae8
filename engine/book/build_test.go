package book

import (
	"errors"
	"testing"
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
		if bl.b.ids.bucket(id, bl.st.n) == 0 {
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
