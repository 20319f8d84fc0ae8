package history

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/stats"
)

// addCauses gives the run folder's summary.json one snapshot window of 100 ms, forceMs of it a
// JFR force and unexplainedMs unexplained, and one excursion of 10 ms, 4 ms covered.
func addCauses(t testing.TB, dir string, forceMs, unexplainedMs float64) {
	t.Helper()
	p := filepath.Join(dir, rundir.SummaryFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	s["windows"] = []any{map[string]any{"kind": "snapshot", "index": 1, "from_s": 10.0, "to_s": 10.1,
		"sources": []string{"jfr", "os_samples"}, "rows": []any{},
		"totals":         []any{map[string]any{"cause": "force", "source": "jfr", "count": 1, "total_ms": forceMs}},
		"unexplained_ms": unexplainedMs}}
	s["excursions"] = map[string]any{"threshold_ms": 1.0, "count": 1, "unexplained": 0,
		"list": []any{map[string]any{"start_s": 5.0, "end_s": 5.01, "peak_at_s": 5.0, "peak_ms": 9.0, "probes": 3, "lost": 0,
			"causes": []any{}, "covered_ms": 4.0}}}
	if b, err = json.Marshal(s); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCauseFiguresIndexed: a run's cause figures (each cause's share of its windows of a kind and
// of its excursions, and the unexplained share) are in the index by the sweep's keys, so a cause
// is tracked across engine versions like any figure: v7 on leaves 60 % of the snapshot window
// unexplained instead of 10 %, and the trend says so at v7.
func TestCauseFiguresIndexed(t *testing.T) {
	root := t.TempDir()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for v := 1; v <= 10; v++ {
		for run := range 3 {
			id := fmt.Sprintf("20261201-%02d%02d00-snapshots", v, run)
			dir := filepath.Join(root, id)
			writeRun(t, dir, id, engineVersion(fmt.Sprintf("v%d", v), start.Add(time.Duration(v*10+run)*time.Minute)), nil)
			unexplained := 10.0 + float64((v+run)%3) // the first run's: 11
			if v >= 7 {
				unexplained += 50
			}
			addCauses(t, dir, 80-unexplained, unexplained)
		}
	}
	x := openTemp(t)
	ctx := context.Background()
	if _, err := Import(ctx, x, root, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	runs, err := x.Runs(ctx, Filter{})
	if err != nil || len(runs) != 30 {
		t.Fatalf("%d runs, %v", len(runs), err)
	}
	fs, err := x.Figures(ctx, runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Figure{}
	for _, f := range fs {
		got[f.Key] = f
	}
	for key, want := range map[string]float64{"cause.snapshot.jfr.force": 69, "cause.snapshot.unexplained": 11,
		"cause.excursion.unexplained": 60} {
		f, ok := got[key]
		if !ok {
			t.Errorf("%s is not in the index (figures: %d)", key, len(fs))
			continue
		}
		if f.Sample.N != 1 || f.Values[0] != want || f.Unit != "%" || f.Dir != stats.LowerIsBetter {
			t.Errorf("%s: %+v, want one value %v %%", key, f, want)
		}
	}
	tr, err := x.Trend(ctx, TrendOptions{Figure: "cause.snapshot.unexplained", Order: OrderVersion, EDivisiveOptions: stats.EDivisiveOptions{Seed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Changes) != 1 || tr.Changes[0].Label != "v7" || tr.Changes[0].Verdict != stats.Worse {
		t.Errorf("changes %+v", tr.Changes)
	}
}

// TestLogCausesFamilyOfTheirOwn: the log's verdicts against the last entry correct the cause
// figures as a family of their own. The second sweep's warm takes are worse (Mann–Whitney p
// 0.026 over 6 values a side); asked for beside three cause figures that did not move, the take
// is still called worse, as it would be alone (one family of four would make its q 0.104).
func TestLogCausesFamilyOfTheirOwn(t *testing.T) {
	root := t.TempDir()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	takes := map[string][][]float64{
		"20261201-100000-snapshots": {{10, 11, 12}, {13, 14, 15}},
		"20261201-110000-snapshots": {{12.5, 14.5, 20}, {21, 22, 23}},
	}
	for i, sw := range []string{"20261201-100000-snapshots", "20261201-110000-snapshots"} {
		for r, tk := range takes[sw] {
			id := fmt.Sprintf("%s-r%02d", sw, r+1)
			dir := filepath.Join(root, id)
			writeRun(t, dir, id, func(m map[string]any) {
				m["settings"] = map[string]string{"engine.snapshot_block": "16MiB"}
				m["started"] = start.Add(time.Duration(i*60+r) * time.Minute).Format(time.RFC3339Nano)
			}, tk)
			addCauses(t, dir, 70, 10)
		}
	}
	x := openTemp(t)
	ctx := context.Background()
	if _, err := Import(ctx, x, root, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, figs := range [][]string{{"snapshot.take"},
		{"snapshot.take", "cause.snapshot.jfr.force", "cause.snapshot.unexplained", "cause.excursion.unexplained"}} {
		md, err := x.Log(ctx, LogOptions{Figures: figs, Trend: TrendOptions{EDivisiveOptions: stats.EDivisiveOptions{Seed: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("Against the last entry (%d verdict(s)):", len(figs)); !strings.Contains(md, want) ||
			!strings.Contains(md, "warm take (leader): **worse**") {
			t.Errorf("figures %v: the take is not called worse:\n%s", figs, md)
		}
	}
}
