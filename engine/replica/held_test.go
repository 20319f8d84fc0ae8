package replica

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rig-dev/rig/engine"
)

// The held-order set keeps sequential ids as one range and any order of arrival as the same
// disjoint ranges a sorted set would give; Holds finds exactly the ids added.
func TestIDRangesMatchASet(t *testing.T) {
	var s idRanges
	for id := uint64(1<<63 | 5<<32); id < 1<<63|5<<32+1000; id++ {
		s.add(id)
	}
	if len(s.r) != 1 {
		t.Fatalf("1,000 sequential ids in %d ranges, want 1", len(s.r))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[uint64]bool{}
	s = idRanges{}
	for range 5000 {
		id := uint64(rng.IntN(3000))
		want[id] = true
		s.add(id)
	}
	h := engine.HeldOrders{Ranges: s.r}
	for id := uint64(0); id < 3100; id++ {
		if h.Holds(id) != want[id] {
			t.Fatalf("Holds(%d) = %v, want %v", id, h.Holds(id), want[id])
		}
	}
	for i := 1; i < len(s.r); i++ {
		if s.r[i-1][1]+1 >= s.r[i][0] || s.r[i][0] > s.r[i][1] {
			t.Fatalf("ranges not sorted, disjoint and apart: %v", s.r[i-1:i+1])
		}
	}
	if !slices.IsSortedFunc(s.r, func(a, b [2]uint64) int { return int(a[0]) - int(b[0]) }) {
		t.Fatal("ranges out of order")
	}
}
