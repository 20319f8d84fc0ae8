package sweep

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/stats"
)

// The cause figures (analysis.ShareFigure) are figures of the sweep report and of rig compare,
// one value per run: each cause's share of the run's windows of a kind, and of its excursions,
// with the unexplained share. A run whose windows lack a source (no recording) gives that
// source's causes no value, not zeros. They are a false-discovery family of their own: adding
// them leaves every other verdict's q as it was.
func TestCauseFiguresCompared(t *testing.T) {
	dir := sweepFixture(t)
	set, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	opts := CompareOptions{BaseWhere: "engine.sync_level=0", ContenderWhere: "engine.sync_level=2", Pool: true}
	plain, err := Compare(set, set, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range set.Runs {
		sources := []string{"jfr", analysis.SourceOSSamples}
		if i == 0 {
			sources = []string{analysis.SourceOSSamples} // this run had no recording
		}
		r.Summary.Windows = nil
		slow := r.Ref.Settings["engine.sync_level"] == "2"
		for k := 0; k < 3+i%2; k++ { // unequal window counts: pooled per run, they do not weigh
			force := 20 + float64(k+r.Ref.Round)
			if slow {
				force += 100
			}
			w := analysis.TimeWindow{Kind: analysis.WindowSnapshot, Index: k + 1, FromS: float64(10 * k), ToS: float64(10*k) + 0.2, WhereTime: analysis.WhereTime{Sources: sources,
				Totals: []analysis.CauseTotal{{Cause: "host_cpu", Source: analysis.SourceOSSamples, Count: 1, TotalMs: 50 + float64((i+k)%3)}}, UnexplainedMs: 200 - force}}
			if i != 0 {
				w.Totals = append(w.Totals, analysis.CauseTotal{Cause: "force", Source: "jfr", Count: 5, TotalMs: force})
			}
			r.Summary.Windows = append(r.Summary.Windows, w)
		}
		covered := 40.0 + float64(i)
		if slow {
			covered = 90
		}
		r.Summary.Excursions = &analysis.Excursions{Count: 1, List: []analysis.Excursion{{StartS: 5, EndS: 5.1, CoveredMs: covered,
			Where: &analysis.WhereTime{Sources: sources, Totals: []analysis.CauseTotal{{Cause: "sched_delay", Source: "schedstat", Count: 5, TotalMs: covered}}}}}}
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
	for _, want := range []string{"Where the time went (per window kind and excursions)", "snapshot: force (jfr)", "snapshot: unexplained", "excursion: unexplained"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("the sweep report has no %q:\n%s", want, md)
		}
	}
	c, err := Compare(set, set, opts)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]stats.Comparison{}
	for _, r := range c.Rows {
		got[r.Metric.Key] = r.C
	}
	force, ok := got["cause.snapshot.jfr.force"]
	if !ok || force.Base.N != 3 || force.Contender.N != 4 || force.Contender.Mean-force.Base.Mean < 40 {
		t.Errorf("forces compared: %+v (found %v); want 3 base values (one run had no recording) against 4, 50 points more", force, ok)
	}
	if h := got["cause.snapshot.os_samples.host_cpu"]; h.Significant() || h.Base.N != 4 {
		t.Errorf("host CPU compared: %+v; want no difference over 4 values a side", h)
	}
	if u := got["cause.excursion.unexplained"]; u.Base.N != 4 || u.Contender.N != 4 || u.Base.Mean < 40 || u.Contender.Mean != 10 {
		t.Errorf("excursions' unexplained share: %+v; want 4 values a side, about 55 %% against 10 %%", u)
	}
	if len(c.Families) != 2 || c.Families[1].Name != TableCauses || c.Families[0].Tested != plain.Families[0].Tested {
		t.Fatalf("families %+v; want the figures as before (%+v), then the causes", c.Families, plain.Families)
	}
	q := map[string]*float64{}
	for _, r := range plain.Rows {
		q[r.Metric.Key] = r.C.Q
	}
	for _, r := range c.Rows {
		if r.Metric.Family() == TableCauses {
			continue
		}
		if was := q[r.Metric.Key]; (was == nil) != (r.C.Q == nil) || (was != nil && *was != *r.C.Q) {
			t.Errorf("%s: q %v with the cause figures, %v without: they dilute the other verdicts", r.Metric.Key, fmtQ(r.C.Q), fmtQ(was))
		}
	}
	var out bytes.Buffer
	c.Text(&out)
	if !strings.Contains(out.String(), "snapshot: force (jfr)") || !strings.Contains(out.String(), "_causes:_") {
		t.Errorf("rig compare does not show the causes as a family:\n%s", out.String())
	}
}

func fmtQ(q *float64) string {
	if q == nil {
		return "none"
	}
	return strconv.FormatFloat(*q, 'g', 4, 64)
}
