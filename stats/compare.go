package stats

import (
	"fmt"
	"math"
)

// Direction says which way a figure improves.
type Direction int

const (
	Neutral        Direction = iota // neither way is better (a count of events, a size)
	LowerIsBetter                   // latency, pause, lost probes
	HigherIsBetter                  // throughput
)

func (d Direction) String() string {
	switch d {
	case LowerIsBetter:
		return "lower is better"
	case HigherIsBetter:
		return "higher is better"
	}
	return "—"
}

// Verdicts.
const (
	NoVerdict    = "no verdict"    // too few values on a side
	NoDifference = "no difference" // the noise covers the difference
	Unclear      = "unclear"       // the t interval and the rank test disagree
	Better       = "better"
	Worse        = "worse"
	Higher       = "higher" // a difference in a figure with no better direction
	Lower        = "lower"
)

// Comparison is a contender sample against a base sample of the same figure.
type Comparison struct {
	Base      Sample       `json:"base"`
	Contender Sample       `json:"contender"`
	Welch     *Welch       `json:"welch,omitempty"`
	U         *MannWhitney `json:"mann_whitney,omitempty"`
	// Change is mean(contender) / mean(base) - 1; absent when the base mean is 0.
	Change  *float64 `json:"change,omitempty"`
	Verdict string   `json:"verdict"`
	Why     string   `json:"why"` // one line: which test decided, and with what
	// Q is the verdict's p-value adjusted for the false discovery rate over the verdicts shown
	// with it (ControlFDR); Uncorrected is the verdict before that correction took it back; Weak:
	// it rests on fewer than MinValuesFirm values a side.
	Q           *float64 `json:"q,omitempty"`
	Uncorrected string   `json:"uncorrected,omitempty"`
	Weak        bool     `json:"weak,omitempty"`
}

// Significant reports whether the verdict is a difference (better, worse, higher, lower).
func (c Comparison) Significant() bool {
	switch c.Verdict {
	case Better, Worse, Higher, Lower:
		return true
	}
	return false
}

// Compare decides whether contender differs from base by more than their noise.
//
// The rule: where the Mann–Whitney U test can reach p < 0.05 with these sample sizes (4 against
// 4, or 3 against 5, and more), it decides, as benchstat does: ranks are not moved by one
// outlying round on a shared machine. A difference it finds takes the direction of the medians;
// where it finds none but Welch's 95 % interval for the difference of means excludes 0, the
// verdict is "unclear" (one value is carrying the mean). With fewer values (2 against 2: the
// exact test never goes below p = 1/3) Welch's interval decides alone. With fewer than 2 values
// on a side there is no estimate of the noise, so no verdict. Samples with no spread at all
// differ exactly when their values differ.
func Compare(base, contender []float64, dir Direction) Comparison {
	c := Comparison{Base: Describe(base), Contender: Describe(contender)}
	if c.Base.N > 0 && c.Base.Mean != 0 {
		ch := c.Contender.Mean/c.Base.Mean - 1
		c.Change = &ch
	}
	// U from the contender's side, so "greater" means the contender tends to be larger.
	if u, ok := MannWhitneyU(contender, base); ok {
		c.U = &u
	}
	if c.Base.N < 2 || c.Contender.N < 2 {
		c.Verdict = NoVerdict
		c.Why = fmt.Sprintf("n=%d against n=%d: no estimate of the noise", c.Base.N, c.Contender.N)
		return c
	}
	w, ok := WelchTest(base, contender)
	if !ok { // no spread on either side
		if c.Contender.Mean == c.Base.Mean {
			c.Verdict, c.Why = NoDifference, "every value equal"
			return c
		}
		c.Verdict = direction(dir, c.Contender.Mean-c.Base.Mean)
		c.Why = "no spread on either side; the values differ"
		return c
	}
	c.Welch = &w
	ci := fmt.Sprintf("95%% CI of the difference of means [%s, %s]", g(w.Lo), g(w.Hi))
	welchDiffers := w.Lo > 0 || w.Hi < 0
	if minP := MinP(c.Base.N, c.Contender.N); minP < Alpha {
		switch {
		case c.U.P < Alpha:
			c.Verdict = direction(dir, c.Contender.Median-c.Base.Median)
			c.Why = fmt.Sprintf("Mann–Whitney p=%.3g; %s", c.U.P, ci)
		case welchDiffers:
			c.Verdict = Unclear
			c.Why = fmt.Sprintf("%s excludes 0 but Mann–Whitney p=%.3g", ci, c.U.P)
		default:
			c.Verdict = NoDifference
			c.Why = fmt.Sprintf("Mann–Whitney p=%.3g; %s", c.U.P, ci)
		}
		return c
	}
	note := fmt.Sprintf(" (Mann–Whitney cannot go below p=%.2g at n=%d/%d)", MinP(c.Base.N, c.Contender.N), c.Base.N, c.Contender.N)
	if welchDiffers {
		c.Verdict = direction(dir, w.Diff)
		c.Why = ci + " excludes 0" + note
		return c
	}
	c.Verdict = NoDifference
	c.Why = ci + " includes 0" + note
	return c
}

func direction(dir Direction, diff float64) string {
	switch {
	case dir == LowerIsBetter && diff < 0, dir == HigherIsBetter && diff > 0:
		return Better
	case dir == LowerIsBetter, dir == HigherIsBetter:
		return Worse
	case diff > 0:
		return Higher
	}
	return Lower
}

// g formats a number compactly for the one-line reasons.
func g(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e9 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.4g", v)
}
