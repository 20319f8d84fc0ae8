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

// A cause's total in the runs' windows (analysis.TimeWindow.Totals) is a figure of the sweep
// report and of rig compare, under the same noise rule as the others: the archive's forces,
// 100 ms slower at sync level 2 in every snapshot window, are called worse; another process's
// CPU, the same noise on both sides, is not called. A run whose windows lack a source (no
// recording) gives that source's causes no value, not zeros.
func TestCauseTotalsCompared(t *testing.T) {
	dir := sweepFixture(t)
	set, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range set.Runs {
		sources := []string{"jfr", analysis.SourceOSSamples}
		if i == 0 {
			sources = []string{analysis.SourceOSSamples} // this run had no recording
		}
		r.Summary.Windows = nil
		for k := 0; k < 3; k++ {
			force := 20 + float64(k+r.Ref.Round)
			if r.Ref.Settings["engine.sync_level"] == "2" {
				force += 100
			}
			w := analysis.TimeWindow{Kind: analysis.WindowSnapshot, Index: k + 1, FromS: float64(10 * k), ToS: float64(10*k) + 0.2, WhereTime: analysis.WhereTime{Sources: sources,
				Totals: []analysis.CauseTotal{{Cause: "host_cpu", Source: analysis.SourceOSSamples, Count: 1, TotalMs: 50 + float64((i+k)%3)}}}}
			if i != 0 {
				w.Totals = append(w.Totals, analysis.CauseTotal{Cause: "force", Source: "jfr", Count: 5, TotalMs: force})
			}
			r.Summary.Windows = append(r.Summary.Windows, w)
		}
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
	if !strings.Contains(string(md), "Where the time went (per window)") || !strings.Contains(string(md), "snapshot: force (jfr)") {
		t.Errorf("the sweep report has no cause table:\n%s", md)
	}
	c, err := Compare(set, set, CompareOptions{BaseWhere: "engine.sync_level=0", ContenderWhere: "engine.sync_level=2", Pool: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]stats.Comparison{}
	for _, r := range c.Rows {
		got[r.Metric.Key] = r.C
	}
	force, ok := got["cause.snapshot.jfr.force"]
	if !ok || force.Verdict != stats.Worse || force.Base.N != 9 || force.Contender.N != 12 {
		t.Errorf("forces compared: %+v (found %v); want worse, 9 base values (one run had no recording) against 12", force, ok)
	}
	if h := got["cause.snapshot.os_samples.host_cpu"]; h.Significant() || h.Base.N != 12 {
		t.Errorf("host CPU compared: %+v; want no difference over 12 values a side", h)
	}
	var out bytes.Buffer
	c.Text(&out)
	if !strings.Contains(out.String(), "snapshot: force (jfr)") {
		t.Errorf("rig compare does not show the cause:\n%s", out.String())
	}
}
