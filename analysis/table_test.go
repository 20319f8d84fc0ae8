package analysis

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rig-dev/rig/rundir"
)

// The stages table and the overhead line: each stage against its estimate, their total, and
// the run's overhead figures (OverheadFigures) under them.
func TestStagesSection(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	s := &Summary{RunID: "r", Status: "ok", OverheadS: f(42.25), Stages: []rundir.StageTime{
		{Name: "start", EstimateS: 10, ActualS: f(12), From: "history"},
		{Name: "load", EstimateS: 60, ActualS: f(60.5)},
		{Name: "finish", EstimateS: 5},
	}}
	md := renderReport(s)
	for _, want := range []string{
		"## Stages\n\n| stage | estimate | actual | actual / estimate | estimate from |\n|---|---|---|---|---|\n",
		"| start | 10.0 s | 12.0 s | 1.20 | history |\n",
		"| load | 60.0 s | 60.5 s | 1.01 | — |\n",
		"| finish | 5.0 s | — | — | — |\n",
		"| **total** | 75.0 s | 72.5 s |  |  |\n\n",
		"overhead (all but the timeline): 42.2 s (the timeline is",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "stage start:") {
		t.Error("the stage figures are in the stages table, not on the overhead line")
	}
	if md := renderReport(&Summary{RunID: "r", Status: "ok"}); strings.Contains(md, "## Stages") {
		t.Error("a run without stages, book or overhead has a Stages section")
	}
}

// summary.json's pooled figures read back as declared (label, unit, how they pool), so a report
// rewritten from summary.json shows them as the first did.
func TestRowPooledReadBack(t *testing.T) {
	s, err := Analyze(copyTree(t, filepath.Join("testdata", "golden-run")))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Summary
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(s.RowPooled) == 0 || !reflect.DeepEqual(back.RowPooled, s.RowPooled) {
		t.Errorf("pooled read back:\n%+v\nwant\n%+v", back.RowPooled, s.RowPooled)
	}
	if got, want := renderReport(&back), renderReport(s); got != want {
		t.Errorf("report from summary.json differs:\n%s", lineDiff(want, got))
	}
}

// Each transport's burst table shows the declared burst figures its bursts have: one declared
// later reaches every table whose bursts have it, after the table's own columns, and a figure a
// table places among its columns (or shows otherwise) is not added again.
func TestBurstTablesShowDeclaredFigures(t *testing.T) {
	saved := BurstFigures
	t.Cleanup(func() { BurstFigures = saved })
	BurstFigures = append(slices.Clone(saved),
		RowFigure[BurstRow]{Figure: Figure{Key: "every", Label: "on every burst", Unit: "ms"}, Get: func(BurstRow) (float64, bool) { return 7.5, true }},
		RowFigure[BurstRow]{Figure: Figure{Key: "udp_only", Label: "at a receiver", Unit: "ms"}, Get: func(b BurstRow) (float64, bool) { return 2.5, b.UDP != nil }})
	s := &Summary{Bursts: []BurstRow{
		{AtS: 1, Sent: 10, Answered: 10, Planned: 10, PeakPerMs: 10},
		{AtS: 2, Sent: 10, Answered: 10, UDP: &BurstUDP{Burst: 1, Received: 10, Pass: true}},
		{AtS: 3, Sent: 10, Answered: 10, UDP: &BurstUDP{Transport: TransportAeron, Burst: 2, Pass: true, Aeron: &BurstAeron{Sum: map[string]int64{}}}},
	}}
	var b strings.Builder
	writeBursts(&b, s)
	md := b.String()
	for _, want := range []string{
		"| max latency | on every burst |\n", " | 7.50 ms |\n", // TCP: no receiver
		"| rcvbuf errors | result | on every burst | at a receiver |\n", "| pass | 7.50 ms | 2.50 ms |\n", // UDP
		"| FC under / over | result | on every burst | at a receiver |\n", "| 0 / 0 | pass | 7.50 ms | 2.50 ms |\n", // Aeron
	} {
		if !strings.Contains(md, want) {
			t.Errorf("burst tables lack %q:\n%s", want, md)
		}
	}
	if n := strings.Count(md, "| at a receiver |"); n != 2 {
		t.Errorf("a receiver's figure heads %d tables, want the UDP and the Aeron one:\n%s", n, md)
	}
	for _, label := range []string{"peak at receiver", "worst message", "passed", "Aeron ", "per burst"} {
		if strings.Contains(md, label) {
			t.Errorf("a figure a table places or shows otherwise is added again (%q):\n%s", label, md)
		}
	}
}

// The tables of where an interval's time went, of every window and excursion, show the declared
// cause-row figures: one declared later reaches each of them after the table's own columns.
func TestCauseRowTablesShowDeclaredFigures(t *testing.T) {
	saved := CauseRowFigures
	t.Cleanup(func() { CauseRowFigures = saved })
	CauseRowFigures = append(slices.Clone(saved),
		RowFigure[CauseRow]{Figure: Figure{Key: "fake", Label: "fake figure", Unit: "ms"}, Get: func(CauseRow) (float64, bool) { return 7.5, true }})
	s, err := Analyze(copyTree(t, filepath.Join("testdata", "golden-run")))
	if err != nil {
		t.Fatal(err)
	}
	md := renderReport(s)
	tables := 0
	for _, w := range s.Windows {
		if len(w.Rows) > 0 {
			tables++
		}
	}
	for _, e := range s.Excursions.List {
		if e.Where != nil && len(e.Where.Rows) > 0 {
			tables++
		}
	}
	head := "| node | thread | cause | source | count | total | share | detail | fake figure |\n"
	if n := strings.Count(md, head); tables == 0 || n != tables {
		t.Errorf("%d of %d tables of where the time went have the declared figure:\n%s", n, tables, md)
	}
	if !strings.Contains(md, "| agent_cpu | os_samples | 0 | 1.57 ms | 4.0 % | — | 7.50 ms |\n") {
		t.Errorf("a row lacks the declared figure:\n%s", md)
	}
}
