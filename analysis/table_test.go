package analysis

import (
	"encoding/json"
	"path/filepath"
	"reflect"
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
