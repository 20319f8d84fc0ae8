package sweep

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/stats"
)

// A figure is one entry in its row type's list: a fake failover figure added there shows in the
// run's report.md (a column and a pooled line) and summary.json (failover_pooled), and in the
// sweep's table, its plots (a headline) and rig compare, with nothing else changed.
func TestFigureDeclaredOnce(t *testing.T) {
	saved := analysis.FailoverFigures
	t.Cleanup(func() { analysis.FailoverFigures = saved })
	analysis.FailoverFigures = append(append([]analysis.RowFigure[analysis.FailoverRow]{}, saved...), analysis.RowFigure[analysis.FailoverRow]{
		Figure: analysis.Figure{Key: "fake_span", Label: "fake span", Unit: "ms", Dir: stats.LowerIsBetter, Headline: true, MeanCI: true},
		Get:    func(r analysis.FailoverRow) (float64, bool) { return 7.5 + float64(r.Lost), true },
	})

	// One run: report.md and summary.json, from the golden run folder (it has failovers).
	run := t.TempDir()
	if err := os.CopyFS(run, os.DirFS(filepath.Join("..", "analysis", "testdata", "golden-run"))); err != nil {
		t.Fatal(err)
	}
	s, err := analysis.Analyze(run)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Failovers) == 0 {
		t.Fatal("the golden run has no failover")
	}
	if err := analysis.WriteOutputs(run, s); err != nil {
		t.Fatal(err)
	}
	report, _ := os.ReadFile(filepath.Join(run, "report.md"))
	for _, want := range []string{"| back to normal | fake span | lost |", " | 7.50 ms | 0 |"} {
		if !strings.Contains(string(report), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	var sum struct {
		FailoverPooled map[string]stats.Sample `json:"failover_pooled"`
	}
	b, _ := os.ReadFile(filepath.Join(run, "summary.json"))
	if err := json.Unmarshal(b, &sum); err != nil || sum.FailoverPooled["fake_span_ms"].N != len(s.Failovers) {
		t.Errorf("summary.json failover_pooled: %v (%v); want fake_span_ms over %d faults", sum.FailoverPooled, err, len(s.Failovers))
	}

	// A sweep: its table, its plots, and rig compare.
	dir := sweepFixture(t)
	set, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range set.Runs {
		lost := 0
		if r.Ref.Settings["engine.sync_level"] == "2" {
			lost = 100 + r.Ref.Round
		}
		r.Summary.Failovers = []analysis.FailoverRow{{AtS: 10, Action: "kill", From: "node-0", Lost: lost}, {AtS: 20, Action: "kill", From: "node-1", Lost: lost}}
		b, _ := json.Marshal(r.Summary)
		if err := os.WriteFile(filepath.Join(dir, r.Ref.Dir, "summary.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if set, err = Load(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteReport(set, Options{}); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, ReportName))
	if !strings.Contains(string(md), " fake span (ms) |") {
		t.Errorf("the sweep report has no fake span column:\n%s", md)
	}
	for _, ext := range []string{"png", "svg"} {
		p := filepath.Join(dir, PlotsDir, "failover_fake_span-vs-engine_sync_level."+ext)
		if _, err := os.Stat(p); err != nil {
			t.Errorf("no plot of the headline figure: %v", err)
		}
	}
	c, err := Compare(set, set, CompareOptions{BaseWhere: "engine.sync_level=0", ContenderWhere: "engine.sync_level=2"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range c.Rows {
		if r.Metric.Key == "failover.fake_span" {
			found = true
			if r.C.Base.Mean != 7.5 || r.C.Contender.Mean < 100 {
				t.Errorf("fake span compared: base %v, contender %v; want 7.5 ms against about 108 ms", r.C.Base.Mean, r.C.Contender.Mean)
			}
		}
	}
	var out bytes.Buffer
	c.Text(&out)
	if !found || !strings.Contains(out.String(), "| fake span | ms | lower |") {
		t.Errorf("rig compare has no fake span (row %v):\n%s", found, out.String())
	}
}
