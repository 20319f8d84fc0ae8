package history

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rig-dev/rig/stats"
)

// TestTrendMatchesOtava: docs/results.md's ten sweeps (the warm snapshot takes of 30 real runs,
// one sweep per engine version label, v7 on the build with a 60 ms delay per snapshot block),
// indexed and trended: exactly one change point, at v7, p < 0.05; per run, the same three points
// as Apache Otava's E-divisive (2,000 shuffles) on the same series, from
// testdata/otava_versions.json (its "command" made it).
func TestTrendMatchesOtava(t *testing.T) {
	b, err := os.ReadFile("testdata/otava_versions.json")
	if err != nil {
		t.Fatal(err)
	}
	type cp struct {
		Index int
		QHat  float64
		P     float64
	}
	type otava struct {
		Series []float64
		Many   []cp `json:"edivisive_permutation_2000"`
	}
	var fx struct {
		Versions []struct {
			Label  string
			Values []float64
		}
		PerVersion otava `json:"per_version"`
		PerRun     otava `json:"per_run"`
	}
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	start := time.Date(2026, 12, 6, 15, 0, 0, 0, time.UTC)
	n := 0
	for _, v := range fx.Versions {
		for i := 0; i < len(v.Values); i += 3 {
			n++
			id := fmt.Sprintf("20261206-1500%02d-snapshots", n)
			writeRun(t, filepath.Join(root, id), id, engineVersion(v.Label, start.Add(time.Duration(n)*time.Minute)), v.Values[i:i+3])
		}
	}
	x := openTemp(t)
	ctx := context.Background()
	if _, err := Import(ctx, x, root, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		perRun bool
		otava  otava
	}{{"per version", false, fx.PerVersion}, {"per run", true, fx.PerRun}} {
		tr, err := x.Trend(ctx, TrendOptions{Figure: "snapshot.take", Order: OrderVersion, PerRun: c.perRun,
			EDivisiveOptions: stats.EDivisiveOptions{Seed: 1, Permutations: 999}})
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Series) != len(c.otava.Series) {
			t.Fatalf("%s: %d points, Otava's series %d", c.name, len(tr.Series), len(c.otava.Series))
		}
		for i := range tr.Series {
			if d := tr.Series[i] - c.otava.Series[i]; d > 1e-9 || d < -1e-9 {
				t.Fatalf("%s: point %d is %g, Otava's %g", c.name, i, tr.Series[i], c.otava.Series[i])
			}
		}
		if len(tr.Changes) != len(c.otava.Many) {
			t.Fatalf("%s: change points %+v, Otava %+v", c.name, tr.Changes, c.otava.Many)
		}
		for i, want := range c.otava.Many {
			got := tr.Changes[i]
			if got.Index != want.Index || got.P > 0.05 || got.QHat-want.QHat > 1e-9*want.QHat || want.QHat-got.QHat > 1e-9*want.QHat {
				t.Errorf("%s: change point %d at %d (%s) q̂ %g p %g; Otava at %d q̂ %g p %g", c.name, i, got.Index, got.Label, got.QHat, got.P,
					want.Index, want.QHat, want.P)
			}
		}
		if !c.perRun && (len(tr.Changes) != 1 || tr.Changes[0].Label != "v7" || tr.Changes[0].Verdict != stats.Worse) {
			t.Errorf("per version: %+v, want one change point, worse at v7", tr.Changes)
		}
	}
}
