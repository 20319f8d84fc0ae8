package stats

import (
	"encoding/json"
	"os"
	"testing"
)

// TestEDivisiveMatchesOtava: on the series in testdata/otava_changepoints.json, E-divisive finds
// the change points Apache Otava's compute_change_points_orig (E-divisive with a permutation
// test, max_pvalue 0.05) found, at the same indexes with the same Q̂. The p-values are each
// side's own shuffles, so only their side of 0.05 is compared.
func TestEDivisiveMatchesOtava(t *testing.T) {
	b, err := os.ReadFile("testdata/otava_changepoints.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		MaxP   float64 `json:"max_pvalue"`
		Series map[string]struct {
			Values []float64
			Orig   []struct {
				Index int
				QHat  float64
				P     float64
			} `json:"edivisive_permutation"`
		}
	}
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatal(err)
	}
	if len(fx.Series) < 4 {
		t.Fatalf("fixture has %d series", len(fx.Series))
	}
	for name, s := range fx.Series {
		got := EDivisive(s.Values, EDivisiveOptions{MaxP: fx.MaxP, Seed: 1})
		if len(got) != len(s.Orig) {
			t.Errorf("%s: %d change points %+v, Otava %d %+v", name, len(got), got, len(s.Orig), s.Orig)
			continue
		}
		for i, want := range s.Orig {
			if got[i].Index != want.Index {
				t.Errorf("%s: change point %d at %d, Otava at %d", name, i, got[i].Index, want.Index)
			}
			near(t, name+" qhat", got[i].QHat, want.QHat, 1e-9*max(1, want.QHat))
			if got[i].P > fx.MaxP {
				t.Errorf("%s: p=%g", name, got[i].P)
			}
		}
	}
}

// TestEDivisiveSmallSegments: a series too short to split has no change point, and a flat one
// none either.
func TestEDivisiveSmallSegments(t *testing.T) {
	for _, x := range [][]float64{nil, {1}, {1, 2}, {5, 5, 5, 5, 5, 5, 5, 5}} {
		if cps := EDivisive(x, EDivisiveOptions{}); len(cps) != 0 {
			t.Errorf("%v: %+v", x, cps)
		}
	}
}

func BenchmarkEDivisive200(b *testing.B) {
	x := make([]float64, 200)
	for i := range x {
		x[i] = float64(i % 7)
		if i >= 120 {
			x[i] += 20
		}
	}
	for b.Loop() {
		EDivisive(x, EDivisiveOptions{Seed: 1})
	}
}
