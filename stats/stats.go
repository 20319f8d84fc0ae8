// Package stats holds the few statistics the rig quotes across runs: a sample's mean, standard
// deviation, range and 95 % confidence interval, and whether two samples differ by more than
// their noise (Welch's t interval for the difference of means, and the Mann–Whitney U test).
// Moments and distributions come from gonum; only what gonum lacks (Welch–Satterthwaite degrees
// of freedom, the U test) is written here.
package stats

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Level is the confidence level of every interval the rig prints.
const Level = 0.95

// Alpha is the significance level that goes with Level.
const Alpha = 1 - Level

// Sample describes one set of repeated measurements of a figure.
type Sample struct {
	N      int     `json:"n"`
	Mean   float64 `json:"mean"`
	Stdev  float64 `json:"stdev"` // sample standard deviation (n-1); 0 for n < 2
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
	// CILo, CIHi are the 95 % confidence interval of the mean (Student's t with n-1 degrees of
	// freedom); absent for n < 2.
	CILo *float64 `json:"ci_lo,omitempty"`
	CIHi *float64 `json:"ci_hi,omitempty"`
}

// Describe summarises x. NaNs are dropped first; an empty sample gives N = 0 and zeros.
func Describe(x []float64) Sample {
	x = clean(x)
	s := Sample{N: len(x)}
	if s.N == 0 {
		return s
	}
	slices.Sort(x)
	s.Min, s.Max = x[0], x[len(x)-1]
	s.Median = median(x)
	if s.N == 1 {
		s.Mean = x[0]
		return s
	}
	s.Mean, s.Stdev = stat.MeanStdDev(x, nil)
	h := tQuantile(float64(s.N-1)) * stat.StdErr(s.Stdev, float64(s.N))
	lo, hi := s.Mean-h, s.Mean+h
	s.CILo, s.CIHi = &lo, &hi
	return s
}

// median of sorted x (mean of the two middle values for even n).
func median(x []float64) float64 {
	n := len(x)
	if n%2 == 1 {
		return x[n/2]
	}
	return (x[n/2-1] + x[n/2]) / 2
}

// clean copies x without NaNs, so callers' slices are never reordered.
func clean(x []float64) []float64 {
	out := make([]float64, 0, len(x))
	for _, v := range x {
		if !math.IsNaN(v) {
			out = append(out, v)
		}
	}
	return out
}

// tQuantile is the two-sided Level quantile of Student's t with df degrees of freedom.
func tQuantile(df float64) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(1 - Alpha/2)
}

// Welch is Welch's unequal-variances t test of mean(b) - mean(a), with its confidence interval.
type Welch struct {
	Diff float64 `json:"diff"` // mean(b) - mean(a)
	SE   float64 `json:"se"`   // standard error of Diff
	DF   float64 `json:"df"`   // Welch–Satterthwaite degrees of freedom
	T    float64 `json:"t"`
	P    float64 `json:"p"` // two-sided
	Lo   float64 `json:"ci_lo"`
	Hi   float64 `json:"ci_hi"`
}

// WelchTest compares the means of a and b (b minus a). ok is false when either sample has
// fewer than 2 values, or both have no spread (the t statistic is then undefined).
func WelchTest(a, b []float64) (w Welch, ok bool) {
	a, b = clean(a), clean(b)
	if len(a) < 2 || len(b) < 2 {
		return w, false
	}
	ma, va := stat.MeanVariance(a, nil)
	mb, vb := stat.MeanVariance(b, nil)
	na, nb := float64(len(a)), float64(len(b))
	qa, qb := va/na, vb/nb
	w.Diff = mb - ma
	w.SE = math.Sqrt(qa + qb)
	if w.SE == 0 {
		return w, false
	}
	w.DF = (qa + qb) * (qa + qb) / (qa*qa/(na-1) + qb*qb/(nb-1))
	w.T = w.Diff / w.SE
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: w.DF}
	w.P = math.Min(1, 2*t.CDF(-math.Abs(w.T)))
	h := tQuantile(w.DF) * w.SE
	w.Lo, w.Hi = w.Diff-h, w.Diff+h
	return w, true
}
