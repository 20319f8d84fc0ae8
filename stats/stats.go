// Package stats holds the few statistics the rig quotes across runs: a sample's mean, standard
// deviation, range and 95 % confidence interval, and whether two samples differ by more than
// their noise (Welch's t interval for the difference of means, and the Mann–Whitney U test).
// Moments and distributions come from gonum; only what gonum lacks (Welch–Satterthwaite degrees
// of freedom, the U test) is written here.
package stats

import (
	"math"
	"math/rand/v2"
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
	// CILo, CIHi are the 95 % confidence interval of the mean; absent below MinCI values, where
	// an interval says more about the method than about the data.
	CILo *float64 `json:"ci_lo,omitempty"`
	CIHi *float64 `json:"ci_hi,omitempty"`
	// CIMethod says how the interval was made: CIStudent, or CIBootstrap where Student's t
	// reached below 0 for a sample with no negative value (a duration or a count, skewed or
	// few): a t interval there claims values the quantity cannot take.
	CIMethod string `json:"ci_method,omitempty"`
}

// MinCI is the fewest values an interval is given for. At n = 2 Student's t has one degree of
// freedom (quantile 12.7): two durations 10 s apart give an interval 127 s wide, reaching far below
// zero; and a bootstrap of two values has three outcomes.
const MinCI = 3

// The methods an interval is made with (Sample.CIMethod).
const (
	CIStudent   = "student-t"
	CIBootstrap = "bootstrap"
)

// bootstrapResamples is enough for the 2.5 and 97.5 percentiles to move by well under the
// interval's own width between seeds; the seed is fixed, so a report is reproducible.
const bootstrapResamples = 4000

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
	if s.N < MinCI {
		return s
	}
	h := tQuantile(float64(s.N-1)) * stat.StdErr(s.Stdev, float64(s.N))
	lo, hi := s.Mean-h, s.Mean+h
	s.CIMethod = CIStudent
	if lo < 0 && s.Min >= 0 {
		lo, hi = bootstrapMeanCI(x)
		s.CIMethod = CIBootstrap
	}
	s.CILo, s.CIHi = &lo, &hi
	return s
}

// bootstrapMeanCI is the percentile bootstrap interval of the mean of x: the 2.5th and 97.5th
// percentiles of the means of resamples drawn with replacement. Every resample's mean lies in
// [min(x), max(x)], so the interval never leaves the range the data can take.
func bootstrapMeanCI(x []float64) (lo, hi float64) {
	r := rand.New(rand.NewPCG(uint64(len(x)), 0x5eed))
	means := make([]float64, bootstrapResamples)
	for i := range means {
		var sum float64
		for range x {
			sum += x[r.IntN(len(x))]
		}
		means[i] = sum / float64(len(x))
	}
	slices.Sort(means)
	return stat.Quantile(Alpha/2, stat.Empirical, means, nil), stat.Quantile(1-Alpha/2, stat.Empirical, means, nil)
}

// Median of x in any order (mean of the two middle values for even n; 0 for none); x is not
// reordered.
func Median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	x = slices.Clone(x)
	slices.Sort(x)
	return median(x)
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
