package stats

import (
	"math"
	"sort"

	"gonum.org/v1/gonum/stat/combin"
	"gonum.org/v1/gonum/stat/distuv"
)

// MannWhitney is the Mann–Whitney U (Wilcoxon rank-sum) test of a against b.
type MannWhitney struct {
	U float64 `json:"u"` // U of a: pairs with a > b, ties counting one half
	// Z is the normal approximation's statistic, with the tie correction of the variance and a
	// continuity correction of 1/2 towards the mean; 0 when every value is equal.
	Z float64 `json:"z"`
	// PLess and PGreater are one-sided: the probability under "no difference" of a U at most,
	// and at least, the one observed. P is two-sided: twice the smaller, at most 1.
	PLess    float64 `json:"p_less"`
	PGreater float64 `json:"p_greater"`
	P        float64 `json:"p"`
	// Exact: the p-values come from the permutation distribution of the ranks (ties kept as
	// midranks), not from the normal approximation.
	Exact bool `json:"exact"`
	Ties  bool `json:"ties,omitempty"`
}

// exactLimit is the largest pooled sample whose permutation distribution is computed exactly;
// above it the normal approximation is close and the table would grow as n³.
const exactLimit = 60

// MannWhitneyU tests a against b. ok is false when either sample is empty.
func MannWhitneyU(a, b []float64) (m MannWhitney, ok bool) {
	a, b = clean(a), clean(b)
	na, nb := len(a), len(b)
	if na == 0 || nb == 0 {
		return m, false
	}
	ranks, tieSum := midranks(a, b)
	var ra float64
	for _, r := range ranks[:na] {
		ra += r
	}
	m.Ties = tieSum > 0
	m.U = ra - float64(na*(na+1))/2

	n := float64(na + nb)
	mu := float64(na*nb) / 2
	sigma := math.Sqrt(float64(na*nb) / 12 * ((n + 1) - tieSum/(n*(n-1))))
	if sigma > 0 {
		d := m.U - mu
		switch {
		case d > 0:
			d = math.Max(0, d-0.5)
		case d < 0:
			d = math.Min(0, d+0.5)
		}
		m.Z = d / sigma
	}
	if na+nb <= exactLimit {
		m.PLess, m.PGreater = exactTails(ranks, na)
		m.Exact = true
	} else if sigma == 0 {
		m.PLess, m.PGreater = 1, 1
	} else {
		// One-sided tails each with the continuity correction in their own direction.
		m.PLess = distuv.UnitNormal.CDF((m.U + 0.5 - mu) / sigma)
		m.PGreater = 1 - distuv.UnitNormal.CDF((m.U-0.5-mu)/sigma)
	}
	m.P = math.Min(1, 2*math.Min(m.PLess, m.PGreater))
	return m, true
}

// midranks ranks a then b together (1-based, ties sharing their mean rank) and returns the
// ranks in that order and Σ(t³ - t) over groups of t tied values.
func midranks(a, b []float64) ([]float64, float64) {
	n := len(a) + len(b)
	vals := append(append(make([]float64, 0, n), a...), b...)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return vals[idx[i]] < vals[idx[j]] })
	ranks := make([]float64, n)
	var tieSum float64
	for i := 0; i < n; {
		j := i + 1
		for j < n && vals[idx[j]] == vals[idx[i]] {
			j++
		}
		r := float64(i+j+1) / 2 // mean of ranks i+1 .. j
		for k := i; k < j; k++ {
			ranks[idx[k]] = r
		}
		if t := float64(j - i); t > 1 {
			tieSum += t*t*t - t
		}
		i = j
	}
	return ranks, tieSum
}

// exactTails counts, over every way of choosing na of the pooled ranks, how many give a rank
// sum at most and at least the observed one (the first na ranks). Ranks are doubled so that
// midranks are integers.
func exactTails(ranks []float64, na int) (pLess, pGreater float64) {
	obs := 0
	total := 0
	d := make([]int, len(ranks))
	for i, r := range ranks {
		d[i] = int(math.Round(2 * r))
		total += d[i]
		if i < na {
			obs += d[i]
		}
	}
	// ways[k][s]: subsets of size k of the ranks seen so far with doubled sum s.
	ways := make([][]float64, na+1)
	for k := range ways {
		ways[k] = make([]float64, total+1)
	}
	ways[0][0] = 1
	for _, v := range d {
		for k := na; k >= 1; k-- {
			for s := total; s >= v; s-- {
				ways[k][s] += ways[k-1][s-v]
			}
		}
	}
	var le, ge, all float64
	for s, w := range ways[na] {
		all += w
		if s <= obs {
			le += w
		}
		if s >= obs {
			ge += w
		}
	}
	return math.Min(1, le/all), math.Min(1, ge/all)
}

// MinP is the smallest two-sided p-value the exact U test can give for samples of na and nb
// values (no ties): below Alpha only with enough repetitions (e.g. never for 2 against 2, which
// gives at best 1/3).
func MinP(na, nb int) float64 {
	if na == 0 || nb == 0 {
		return 1
	}
	return math.Min(1, 2/combin.GeneralizedBinomial(float64(na+nb), float64(na)))
}

// RunsToReach is the smallest n for which n values against n can reach the strongest difference
// of a Benjamini–Hochberg family of size family at Alpha: the family's smallest p passes only if
// p ≤ Alpha/family, so n is the first with MinP(n, n) ≤ Alpha/family.
func RunsToReach(family int) int {
	bound := Alpha / float64(max(family, 1))
	n := 2
	for MinP(n, n) > bound {
		n++
	}
	return n
}
