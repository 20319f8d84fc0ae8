package stats

import (
	"context"
	"math"
	"math/rand/v2"
)

// ChangePoint is a place where a series' distribution changes: the first value after the change.
type ChangePoint struct {
	Index int     `json:"index"` // the first value of the new segment
	QHat  float64 `json:"qhat"`  // the divergence between the two sides (E-divisive's Q̂)
	// P is the permutation test's p: the share of the Permutations shuffles (within each segment
	// found so far) whose best split diverged at least as much, counting the series itself.
	P            float64 `json:"p"`
	Permutations int     `json:"permutations"`
}

// EDivisiveOptions are the change-point search's knobs.
type EDivisiveOptions struct {
	MaxP         float64 // a candidate is a change point when its p is at most this (default Alpha)
	Permutations int     // shuffles per candidate (default 199: p can go down to 0.005)
	Seed         uint64  // the shuffles' seed: the same series gives the same answer
}

// EDivisive finds change points in x by E-divisive means (Matteson and James, "A Nonparametric
// Approach for Multiple Change Point Analysis of Multivariate Data", 2014; alpha = 1), the
// method of MongoDB's performance change-point detection and of Apache Otava's
// compute_change_points_orig: the split τ (with an end κ) of a segment that maximises the
// energy divergence Q̂ between [start, τ) and [τ, κ) is the candidate, found in every segment
// the change points so far leave; it is kept when a permutation test (values shuffled within
// each segment) says it stands out, and the search goes on until one does not. Returned in index
// order. Series of fewer than 3 values have none.
//
// A shuffle whose Q̂ equals the series' own up to rounding counts as at least as extreme. Otava
// compares the floats as they fall, so it counts some of these ties and not others: on
// history/testdata/otava_versions.json's series the second candidate's p is 1584/17280 = 0.092
// here and 1008/17280 = 0.058 there, both enumerated exactly (both above 0.05).
func EDivisive(x []float64, o EDivisiveOptions) []ChangePoint {
	cps, _ := EDivisiveContext(context.Background(), x, o)
	return cps
}

// EDivisiveContext is EDivisive that stops with ctx's error between two shuffles.
func EDivisiveContext(ctx context.Context, x []float64, o EDivisiveOptions) ([]ChangePoint, error) {
	if o.MaxP == 0 {
		o.MaxP = Alpha
	}
	if o.Permutations == 0 {
		o.Permutations = 199
	}
	x = clean(x)
	var scratch []float64
	rng := rand.New(rand.NewPCG(o.Seed, 0x9e3779b97f4a7c15))
	var cps []ChangePoint
	for {
		bounds := segments(cps, len(x))
		idx, q, ok := bestSplit(x, bounds, &scratch)
		if !ok {
			return cps, nil
		}
		// Permutation test: shuffle within each segment, take the best split again.
		perm := make([]float64, len(x))
		extreme := 0
		for range o.Permutations {
			if err := ctx.Err(); err != nil {
				return cps, err
			}
			copy(perm, x)
			for _, b := range bounds {
				seg := perm[b[0]:b[1]]
				rng.Shuffle(len(seg), func(i, j int) { seg[i], seg[j] = seg[j], seg[i] })
			}
			// A shuffle that only reorders values Q̂ does not tell apart (those on one side of
			// the split) gives the same Q̂ up to rounding: it counts as a tie, as extreme.
			if _, pq, ok := bestSplit(perm, bounds, &scratch); ok && pq >= q-1e-9*math.Abs(q) {
				extreme++
			}
		}
		p := float64(extreme+1) / float64(o.Permutations+1)
		if p > o.MaxP {
			return cps, nil
		}
		cp := ChangePoint{Index: idx, QHat: q, P: p, Permutations: o.Permutations}
		at := len(cps)
		for i, c := range cps {
			if c.Index > idx {
				at = i
				break
			}
		}
		cps = append(cps[:at], append([]ChangePoint{cp}, cps[at:]...)...)
	}
}

// segments are the [start, end) pieces of a series of n values that the change points leave.
func segments(cps []ChangePoint, n int) [][2]int {
	var out [][2]int
	start := 0
	for _, c := range cps {
		if c.Index > start {
			out = append(out, [2]int{start, c.Index})
		}
		start = c.Index
	}
	if start < n {
		out = append(out, [2]int{start, n})
	}
	return out
}

// bestSplit is the split with the largest Q̂ over every segment of more than one value (the
// first one found on a tie, as numpy's argmax and Python's max take it).
func bestSplit(x []float64, bounds [][2]int, scratch *[]float64) (int, float64, bool) {
	bestIdx, bestQ, found := 0, 0.0, false
	for _, b := range bounds {
		if b[1]-b[0] < 2 {
			continue
		}
		if i, q := bestInSegment(x[b[0]:b[1]], scratch); !found || q > bestQ {
			bestIdx, bestQ, found = b[0]+i, q, true
		}
	}
	return bestIdx, bestQ, found
}

// bestInSegment maximises, over 0 < τ < κ ≤ n, with X = z[0:τ] (n₁ values) and Y = z[τ:κ] (m):
//
//	Q̂ = 2/(n₁+m) ΣΣ|Xᵢ−Yⱼ| − 2m/((n₁+m)(n₁−1)) Σᵢ<ₖ|Xᵢ−Xₖ| − 2n₁/((n₁+m)(m−1)) Σⱼ<ₖ|Yⱼ−Yₖ|
//
// (a within-sum of one value counts 0), in O(n²) from P[t][j] = Σᵢ<ₜ |zᵢ−zⱼ|.
func bestInSegment(z []float64, scratch *[]float64) (int, float64) {
	n := len(z)
	// P[t*n+j] = Σ_{i<t} |z_i - z_j|, for t in [0, n], j in [0, n); row 0 is zeros.
	if cap(*scratch) < (n+1)*n {
		*scratch = make([]float64, (n+1)*n)
	}
	P := (*scratch)[:(n+1)*n]
	clear(P[:n])
	for t := 1; t <= n; t++ {
		row, prev := P[t*n:(t+1)*n], P[(t-1)*n:t*n]
		zi := z[t-1]
		for j := range n {
			d := zi - z[j]
			if d < 0 {
				d = -d
			}
			row[j] = prev[j] + d
		}
	}
	at := func(t, j int) float64 { return P[t*n+j] }
	bestT, bestQ := 1, 0.0
	first := true
	wl := 0.0 // Σ_{i<k<τ} |z_i - z_k|
	for tau := 1; tau < n; tau++ {
		if tau >= 2 {
			wl += at(tau-1, tau-1)
		}
		cross, wr := 0.0, 0.0
		for kappa := tau + 1; kappa <= n; kappa++ {
			j := kappa - 1 // the value Y gains
			cross += at(tau, j)
			if kappa-tau >= 2 {
				wr += at(j, j) - at(tau, j)
			}
			n1, m := float64(tau), float64(kappa-tau)
			q := 2 / (n1 + m) * cross
			if tau > 1 {
				q -= 2 * m / ((n1 + m) * (n1 - 1)) * wl
			}
			if kappa-tau > 1 {
				q -= 2 * n1 / ((n1 + m) * (m - 1)) * wr
			}
			if first || q > bestQ {
				bestT, bestQ, first = tau, q, false
			}
		}
	}
	return bestT, bestQ
}
