package stats

import (
	"encoding/json"
	"os"
	"testing"
)

// TestBenjaminiHochbergMatchesStatsmodels: the adjusted p-values and rejections are
// statsmodels' multipletests(method='fdr_bh') on the families in testdata/fdr_bh.json (its
// "command" made it).
func TestBenjaminiHochbergMatchesStatsmodels(t *testing.T) {
	b, err := os.ReadFile("testdata/fdr_bh.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Alpha    float64
		Families map[string]struct {
			P, Q   []float64
			Reject []bool
		}
	}
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatal(err)
	}
	if len(fx.Families) < 5 {
		t.Fatalf("fixture has %d families", len(fx.Families))
	}
	for name, f := range fx.Families {
		q := BenjaminiHochberg(f.P)
		for i := range f.P {
			near(t, name+" q", q[i], f.Q[i], 1e-12)
			if (q[i] <= fx.Alpha) != f.Reject[i] {
				t.Errorf("%s[%d]: p=%g q=%g: rejected %v, statsmodels %v", name, i, f.P[i], q[i], q[i] <= fx.Alpha, f.Reject[i])
			}
		}
	}
}

// TestControlFDR: of many verdicts shown together, one clear difference stays and differences
// that stand only uncorrected are taken back; a verdict from 2 values a side is weak.
func TestControlFDR(t *testing.T) {
	clear := Compare([]float64{10, 11, 10.5, 10.2, 10.8, 10.1, 10.6, 10.3}, []float64{20, 21, 20.5, 20.2, 20.8, 20.1, 20.6, 20.3}, LowerIsBetter)
	// Welch alone decides at 2 against 2: p = 0.014 here, not enough among 12 verdicts.
	borderline := Compare([]float64{10, 10.1}, []float64{10.6, 10.7}, LowerIsBetter)
	if borderline.Verdict != Worse {
		t.Fatalf("borderline verdict %q (%s), want worse before the correction", borderline.Verdict, borderline.Why)
	}
	cs := []*Comparison{&clear, &borderline}
	for range 10 {
		c := Compare([]float64{1, 2, 3, 4}, []float64{1.5, 2.5, 3.5, 4.5}, LowerIsBetter)
		cs = append(cs, &c)
	}
	before, after := ControlFDR(cs)
	if before != 2 || after != 1 {
		t.Errorf("differences before/after = %d/%d, want 2/1", before, after)
	}
	if clear.Verdict != Worse || clear.Q == nil || *clear.Q > Alpha || clear.Weak {
		t.Errorf("clear: %q q=%v weak=%v", clear.Verdict, clear.Q, clear.Weak)
	}
	if borderline.Verdict != NoDifference || borderline.Uncorrected != Worse || !borderline.Weak {
		t.Errorf("borderline: %q (uncorrected %q) weak=%v: %s", borderline.Verdict, borderline.Uncorrected, borderline.Weak, borderline.Why)
	}
	none := Compare([]float64{1}, []float64{2}, LowerIsBetter)
	ControlFDR([]*Comparison{&none})
	if none.Q != nil || none.Weak {
		t.Errorf("no verdict got q=%v weak=%v", none.Q, none.Weak)
	}
}
