package replica

import (
	"slices"

	"github.com/rig-dev/rig/engine"
)

// idRanges is a set of order ids kept as sorted, disjoint, non-adjacent closed ranges: a load
// generator's ids are sequential per stream, so a run's orders take a few ranges, not a map
// entry each. It backs GET /orders (engine.HeldOrders), the durability check.
type idRanges struct{ r [][2]uint64 }

// add puts id in the set; appending the next id of the last range is O(1).
func (s *idRanges) add(id uint64) {
	n := len(s.r)
	if n > 0 && s.r[n-1][1]+1 == id && id != 0 {
		s.r[n-1][1] = id
		return
	}
	i, _ := slices.BinarySearchFunc(s.r, id, func(r [2]uint64, id uint64) int {
		switch {
		case r[1] < id:
			return -1
		case r[0] > id:
			return 1
		}
		return 0
	})
	if i < n && s.r[i][0] <= id && id <= s.r[i][1] {
		return // held already
	}
	joinLeft := i > 0 && s.r[i-1][1]+1 == id
	joinRight := i < n && id+1 == s.r[i][0]
	switch {
	case joinLeft && joinRight:
		s.r[i-1][1] = s.r[i][1]
		s.r = slices.Delete(s.r, i, i+1)
	case joinLeft:
		s.r[i-1][1] = id
	case joinRight:
		s.r[i][0] = id
	default:
		s.r = slices.Insert(s.r, i, [2]uint64{id, id})
	}
}

// HeldOrders is what GET /orders answers: the single orders this node applied since it started
// from its snapshot (or from nothing).
func (n *Node) HeldOrders() engine.HeldOrders {
	f := n.fsm
	f.mu.Lock()
	defer f.mu.Unlock()
	return engine.HeldOrders{Ranges: slices.Clone(f.held.r), KnownFromIndex: f.knownFrom, AppliedIndex: f.applied.Load()}
}
