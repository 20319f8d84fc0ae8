package stats

import (
	"math"
	"testing"
)

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.6g, want %.6g (±%g)", what, got, want, tol)
	}
}

// Two-sided 95 % critical values of Student's t, as printed in every t table (e.g. Table A.2 of
// the NIST/SEMATECH e-Handbook of Statistical Methods, section 1.3.6.7.2).
func TestTQuantileAgainstTable(t *testing.T) {
	for _, c := range []struct {
		df   float64
		want float64
	}{{1, 12.706}, {2, 4.303}, {9, 2.262}, {30, 2.042}, {100, 1.984}} {
		near(t, "t(0.975, df)", tQuantile(c.df), c.want, 0.0006)
	}
}

// R's `t.test(ts1, ts2)` (Welch Two Sample t-test) as printed in the Cross Validated answer
// "Welch's t-test confidence interval" (stats.stackexchange.com): t = -1.8325, df = 17.9,
// p-value = 0.08356, 95 percent confidence interval -2.1469104 0.1469104, means 10.4 and 11.4.
func TestWelchAgainstR(t *testing.T) {
	ts1 := []float64{11, 9, 10, 11, 10, 12, 9, 11, 12, 9}
	ts2 := []float64{11, 13, 10, 13, 12, 9, 11, 12, 12, 11}
	// WelchTest reports b - a, so ts2 as a and ts1 as b gives R's mean(x) - mean(y).
	w, ok := WelchTest(ts2, ts1)
	if !ok {
		t.Fatal("WelchTest: not ok")
	}
	near(t, "diff", w.Diff, -1, 1e-12)
	near(t, "t", w.T, -1.8325, 0.00005)
	near(t, "df", w.DF, 17.9, 0.05)
	near(t, "p", w.P, 0.08356, 0.000005)
	near(t, "ci lo", w.Lo, -2.1469104, 0.0000005)
	near(t, "ci hi", w.Hi, 0.1469104, 0.0000005)

	c := Compare(ts2, ts1, LowerIsBetter)
	if c.Verdict != NoDifference {
		t.Errorf("verdict %q (%s), want %q: the interval includes 0", c.Verdict, c.Why, NoDifference)
	}
}

// The interval of one mean, with the same data: 10.4 ± t(0.975, 9) · s/√10.
func TestDescribe(t *testing.T) {
	x := []float64{11, 9, 10, 11, 10, 12, 9, 11, 12, 9}
	s := Describe(x)
	if s.N != 10 || s.Min != 9 || s.Max != 12 || s.Median != 10.5 {
		t.Errorf("Describe = %+v", s)
	}
	near(t, "mean", s.Mean, 10.4, 1e-12)
	near(t, "stdev", s.Stdev, math.Sqrt(12.4/9), 1e-12) // Σ(x-mean)² = 12.4
	h := 2.2622 * s.Stdev / math.Sqrt(10)
	near(t, "ci lo", *s.CILo, 10.4-h, 0.0005)
	near(t, "ci hi", *s.CIHi, 10.4+h, 0.0005)
	if x[0] != 11 {
		t.Error("Describe reordered its input")
	}
	if one := Describe([]float64{3}); one.N != 1 || one.Mean != 3 || one.CILo != nil {
		t.Errorf("Describe of one value = %+v, want no interval", one)
	}
	if none := Describe([]float64{math.NaN()}); none.N != 0 {
		t.Errorf("Describe of NaN = %+v, want n=0", none)
	}
}

// NAG Library example programs for the Mann–Whitney U test, group 1 (16 values) against group 2
// (23 values). Without ties (G08AJF example results): U = 86, normal statistic -2.7838, tail
// probability 0.0027, exact tail probability 0.0022. With ties (g08amc / G08AHF example
// results): U = 86, normal statistic -2.8039, approximate tail probability 0.0025, exact tail
// probability 0.0020.
func TestMannWhitneyAgainstNAG(t *testing.T) {
	for _, c := range []struct {
		name         string
		g1, g2       []float64
		z, pz, exact float64
		ties         bool
	}{
		{
			name: "no ties (G08AJF)",
			g1:   []float64{13.0, 5.8, 11.7, 6.5, 12.3, 6.7, 9.2, 6.9, 10.0, 7.3, 16.0, 7.0, 10.5, 8.5, 9.0, 7.5},
			g2: []float64{17.0, 6.2, 10.1, 8.0, 15.3, 8.2, 15.0, 9.6, 14.9, 10.4, 14.2, 9.8, 13.8, 11.0, 14.0, 11.1,
				12.9, 11.6, 12.8, 12.0, 13.1, 12.4, 11.9},
			z: -2.7838, pz: 0.0027, exact: 0.0022,
		},
		{
			name: "ties (g08amc)",
			g1:   []float64{13, 6, 12, 7, 12, 7, 10, 7, 10, 7, 16, 7, 10, 8, 9, 8},
			g2: []float64{17, 6, 10, 8, 15, 8, 15, 10, 15, 10, 14, 10, 14, 11, 14, 11,
				13, 12, 13, 12, 13, 12, 12},
			z: -2.8039, pz: 0.0025, exact: 0.0020, ties: true,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, ok := MannWhitneyU(c.g1, c.g2)
			if !ok {
				t.Fatal("not ok")
			}
			near(t, "U", m.U, 86, 0)
			near(t, "z", m.Z, c.z, 0.00005)
			if m.Ties != c.ties {
				t.Errorf("ties = %v, want %v", m.Ties, c.ties)
			}
			if !m.Exact {
				t.Fatal("39 values: want the exact distribution")
			}
			near(t, "exact lower tail", m.PLess, c.exact, 0.00005)
			near(t, "two-sided p", m.P, 2*m.PLess, 1e-12)

			// Past the exact limit the same data give the normal tail NAG prints.
			big1 := append(append([]float64(nil), c.g1...), c.g1...)
			big2 := append(append([]float64(nil), c.g2...), c.g2...)
			if mb, _ := MannWhitneyU(big1, big2); mb.Exact || mb.U != 4*86 {
				t.Errorf("doubled samples: exact=%v U=%v, want the approximation and U=344", mb.Exact, mb.U)
			}
		})
	}
}

// The normal approximation alone, on the NAG data (forced by computing it the same way the
// large-sample branch does).
func TestMannWhitneyNormalTail(t *testing.T) {
	g1 := []float64{13.0, 5.8, 11.7, 6.5, 12.3, 6.7, 9.2, 6.9, 10.0, 7.3, 16.0, 7.0, 10.5, 8.5, 9.0, 7.5}
	g2 := []float64{17.0, 6.2, 10.1, 8.0, 15.3, 8.2, 15.0, 9.6, 14.9, 10.4, 14.2, 9.8, 13.8, 11.0, 14.0, 11.1,
		12.9, 11.6, 12.8, 12.0, 13.1, 12.4, 11.9}
	m, _ := MannWhitneyU(g1, g2)
	mu, sigma := 16.0*23/2, math.Sqrt(16.0*23*40/12)
	near(t, "normal lower tail", normalCDF((m.U+0.5-mu)/sigma), 0.0027, 0.00005)
}

// TestRunsToReach: alone, 4 a side (2/70 ≤ 0.05); in a family of 14, 6 (2/924 ≤ 0.05/14 <
// 2/252).
func TestRunsToReach(t *testing.T) {
	for _, c := range []struct{ family, n int }{{1, 4}, {0, 4}, {2, 5}, {14, 6}, {28, 7}} {
		if got := RunsToReach(c.family); got != c.n {
			t.Errorf("RunsToReach(%d) = %d, want %d", c.family, got, c.n)
		}
	}
}

func TestMinP(t *testing.T) {
	near(t, "MinP(2,2)", MinP(2, 2), 1.0/3, 1e-12)
	near(t, "MinP(3,3)", MinP(3, 3), 0.1, 1e-12)
	near(t, "MinP(4,4)", MinP(4, 4), 2.0/70, 1e-12)
	// 2 against 2 completely separated: the exact test gives its floor, 1/3.
	m, _ := MannWhitneyU([]float64{1, 2}, []float64{3, 4})
	near(t, "p(1,2 vs 3,4)", m.P, 1.0/3, 1e-12)
}

func TestCompareVerdicts(t *testing.T) {
	fast := []float64{0.31, 0.29, 0.30, 0.32}
	slow := []float64{4.3, 4.1, 4.4, 4.2}
	if c := Compare(slow, fast, LowerIsBetter); c.Verdict != Better || !c.Significant() {
		t.Errorf("slow→fast latency: %q (%s), want better", c.Verdict, c.Why)
	}
	if c := Compare(slow, fast, HigherIsBetter); c.Verdict != Worse {
		t.Errorf("slow→fast throughput: %q, want worse", c.Verdict)
	}
	if c := Compare(fast, slow, Neutral); c.Verdict != Higher {
		t.Errorf("neutral: %q, want higher", c.Verdict)
	}
	if c := Compare([]float64{4.3}, []float64{0.3}, LowerIsBetter); c.Verdict != NoVerdict || c.Significant() {
		t.Errorf("n=1: %q, want no verdict", c.Verdict)
	}
	if c := Compare([]float64{0, 0}, []float64{0, 0}, LowerIsBetter); c.Verdict != NoDifference {
		t.Errorf("all zero: %q, want no difference", c.Verdict)
	}
	if c := Compare([]float64{0, 0}, []float64{2, 2}, LowerIsBetter); c.Verdict != Worse {
		t.Errorf("no spread, differ: %q, want worse", c.Verdict)
	}
	// Interleaved values: the noise covers the difference.
	a := []float64{10, 11, 10, 11, 10, 11, 10, 11}
	b := []float64{10.5, 11.5, 10, 11, 10.5, 10, 11, 11}
	if c := Compare(a, b, LowerIsBetter); c.Verdict != NoDifference {
		t.Errorf("overlapping: %q (%s), want no difference", c.Verdict, c.Why)
	}
	if c := Compare(slow, fast, LowerIsBetter); c.Change == nil || math.Abs(*c.Change+0.929) > 0.001 {
		t.Errorf("change = %v, want about -92.9 %%", c.Change)
	}
}

func normalCDF(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }

func TestCompareRankTestDecides(t *testing.T) {
	// One wild round (40) on a shared machine: the interval of the means includes 0, the ranks
	// separate completely (4 against 4: p = 2/70), and the ranks decide.
	base := []float64{1.0, 1.05, 1.1, 1.07}
	cont := []float64{5, 6, 5.5, 40}
	c := Compare(base, cont, LowerIsBetter)
	if c.Welch == nil || c.Welch.Lo > 0 || c.Verdict != Worse {
		t.Errorf("outlier: verdict %q (%s), want worse from the ranks with a Welch CI including 0", c.Verdict, c.Why)
	}
	// Most values equal, four of ten higher: the mean moves, the ranks mostly tie.
	base = []float64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0.01}
	cont = []float64{0, 0, 0, 0, 0, 0, 1, 1, 1, 1}
	if c := Compare(base, cont, LowerIsBetter); c.Verdict != Unclear {
		t.Errorf("tied ranks, moved mean: %q (%s), want unclear", c.Verdict, c.Why)
	}
}

// Durations cannot be negative, and two of them give no interval worth printing: the pooled
// failover detections of two faults, 1 s and 10 s, gave [−51.9 s, 62.9 s] under Student's t.
func TestDescribeIntervalNeverBelowWhatTheDataCanTake(t *testing.T) {
	if two := Describe([]float64{1000, 10000}); two.CILo != nil || two.CIMethod != "" {
		t.Errorf("Describe of two values = %+v, want no interval (n < %d)", two, MinCI)
	}
	// Skewed and few: Student's t reaches below 0 here (mean 3,367, t(0.975, 2) · s/√3 ≈ 14,300).
	skewed := []float64{50, 50, 10000}
	s := Describe(skewed)
	if s.CILo == nil || s.CIMethod != CIBootstrap {
		t.Fatalf("Describe(%v) = %+v, want a bootstrap interval", skewed, s)
	}
	if *s.CILo < s.Min || *s.CIHi > s.Max || *s.CILo > s.Mean || *s.CIHi < s.Mean {
		t.Errorf("bootstrap interval [%g, %g] for mean %g, want within [%g, %g] around the mean", *s.CILo, *s.CIHi, s.Mean, s.Min, s.Max)
	}
	if again := Describe(skewed); *again.CILo != *s.CILo || *again.CIHi != *s.CIHi {
		t.Errorf("bootstrap interval not reproducible: [%g, %g] then [%g, %g]", *s.CILo, *s.CIHi, *again.CILo, *again.CIHi)
	}
	// A figure that can be negative keeps Student's interval, below zero where it reaches.
	if d := Describe([]float64{-5, 1, 2}); d.CIMethod != CIStudent || *d.CILo >= -5 {
		t.Errorf("Describe of a signed sample = %+v, want Student's t reaching below its minimum", d)
	}
	// A tight non-negative sample keeps Student's interval.
	if d := Describe([]float64{10, 11, 12}); d.CIMethod != CIStudent {
		t.Errorf("Describe of a tight sample = %+v, want Student's t", d)
	}
}
