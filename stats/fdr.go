package stats

import (
	"fmt"
	"sort"
)

// MinValuesFirm is the fewest values a side a verdict rests on before it is called firm; below
// it (2 against 2: the rank test never goes under p = 1/3) the verdict is marked weak.
const MinValuesFirm = 3

// BenjaminiHochberg adjusts p-values for the false discovery rate over the family (Benjamini and
// Hochberg, 1995): q₍ᵢ₎ = min over j ≥ i of m·p₍ⱼ₎/j, at most 1, in the input's order; the
// hypotheses with q ≤ α are the ones the step-up procedure rejects at FDR α (statsmodels'
// multipletests(method='fdr_bh')).
func BenjaminiHochberg(p []float64) []float64 {
	m := len(p)
	idx := make([]int, m)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return p[idx[a]] < p[idx[b]] })
	q := make([]float64, m)
	prev := 1.0
	for r := m - 1; r >= 0; r-- {
		v := p[idx[r]] * float64(m) / float64(r+1)
		prev = min(prev, v, 1)
		q[idx[r]] = prev
	}
	return q
}

// DecidingP is the p-value of the test that decided a verdict: Mann–Whitney's where it can reach
// Alpha with these sample sizes, else Welch's; 0 for samples without spread whose values differ,
// 1 when every value is equal. ok is false when there is no verdict (too few values).
func (c Comparison) DecidingP() (float64, bool) {
	switch {
	case c.Verdict == NoVerdict:
		return 0, false
	case c.Welch == nil && c.Verdict == NoDifference:
		return 1, true
	case c.Welch == nil:
		return 0, true
	case c.U != nil && MinP(c.Base.N, c.Contender.N) < Alpha:
		return c.U.P, true
	}
	return c.Welch.P, true
}

// ControlFDR applies Benjamini–Hochberg to every verdict shown together: each comparison with a
// verdict gets Q, its adjusted p-value over the family; a difference whose Q is above Alpha is no
// longer called (Verdict becomes NoDifference, the uncorrected one kept in Uncorrected) and Why
// says so. Verdicts resting on fewer than MinValuesFirm values a side are marked Weak. It
// returns how many verdicts called a difference before and after the correction.
func ControlFDR(cs []*Comparison) (before, after int) {
	var ps []float64
	var in []*Comparison
	for _, c := range cs {
		if p, ok := c.DecidingP(); ok {
			ps, in = append(ps, p), append(in, c)
		}
		c.Weak = c.Verdict != NoVerdict && (c.Base.N < MinValuesFirm || c.Contender.N < MinValuesFirm)
	}
	q := BenjaminiHochberg(ps)
	for i, c := range in {
		v := q[i]
		c.Q = &v
		if !c.Significant() {
			continue
		}
		before++
		if v > Alpha {
			c.Uncorrected = c.Verdict
			c.Verdict = NoDifference
			c.Why += fmt.Sprintf("; not called after Benjamini–Hochberg over %d verdicts (q=%.3g > %.2g)", len(in), v, Alpha)
			continue
		}
		after++
	}
	return before, after
}
