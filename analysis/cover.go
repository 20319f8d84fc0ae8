package analysis

import (
	"cmp"
	"container/heap"
	"math"
	"slices"
)

// wspan is a span over which a cause held share w of the time (0 < w ≤ 1). A timed stall (a GC
// pause, a force) holds all of its span; a sampled one (a thread's run-queue wait, a pressure
// stall) is known only as a total over its sample's interval, so it covers the interval at
// total/interval: where in the interval it fell is not known, and placing it anywhere in
// particular would claim what the sample does not say.
type wspan struct {
	span
	w float64
}

// whole is a span its cause held all of.
func whole(s span) wspan { return wspan{s, 1} }

// coverNs is the time the spans cover, each moment counted at the largest weight of the spans
// under way then. For a sampled stall that is the expected share of the moment it held; for
// several at once (threads of one process, causes of one excursion) the largest is the least
// the moment is expected to be covered whatever their waits' correlation (threads queued behind
// the same busy CPUs wait together; adding their shares, or treating them as independent, would
// claim more than the samples show). Spans of weight 1 give their union's length.
func coverNs(ss []wspan) int64 {
	if len(ss) == 0 {
		return 0
	}
	ss = slices.Clone(ss)
	slices.SortFunc(ss, func(a, b wspan) int { return cmp.Compare(a.from, b.from) })
	bounds := make([]int64, 0, 2*len(ss))
	for _, s := range ss {
		if s.to > s.from && s.w > 0 {
			bounds = append(bounds, s.from, s.to)
		}
	}
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)
	var h byWeight
	var total float64
	next := 0
	for i := 0; i+1 < len(bounds); i++ {
		at := bounds[i]
		for ; next < len(ss) && ss[next].from <= at; next++ {
			if ss[next].to > ss[next].from && ss[next].w > 0 {
				heap.Push(&h, ss[next])
			}
		}
		for len(h) > 0 && h[0].to <= at {
			heap.Pop(&h)
		}
		if len(h) > 0 {
			total += float64(bounds[i+1]-at) * min(h[0].w, 1)
		}
	}
	return int64(math.Round(total))
}

// byWeight is a max-heap of spans by weight; spans ended are dropped lazily from its top.
type byWeight []wspan

func (h byWeight) Len() int           { return len(h) }
func (h byWeight) Less(i, j int) bool { return h[i].w > h[j].w }
func (h byWeight) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *byWeight) Push(x any)        { *h = append(*h, x.(wspan)) }
func (h *byWeight) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
