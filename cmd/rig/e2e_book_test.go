package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Two runs that differ only in the sync level: the first preloads through the log and stores
// its book, the second installs the stored book on every server, and both end with the same
// state hash on every node; each report says where its book came from and prints the stages'
// estimates against what they took, and the history records both runs' stage times.
const reuseBook = `
name: reuse-book
cluster: {servers: 3, clients: 1}
engine: {sync_level: 1}
preload: {orders: 20k}
load: {probe_rate: 500/s}
warmup: 1s
duration: 3s
timeline:
  - {at: 1500ms, snapshot: {}}
matrix:
  engine.sync_level: [1, 0]
`

func TestBookReusedAcrossSyncLevels(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	t.Parallel() // its own addresses and folders: it may run beside the other end-to-end runs
	res := t.TempDir()
	stdout := runRigOK(t, "run", "--results", res, "--first-address", "127.0.64.11", writePlaybook(t, reuseBook))
	var dirs []string
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] != "sweep" { // "sweep REPORT" names the sweep report
			dirs = append(dirs, f[1])
		}
	}
	if len(dirs) != 2 {
		t.Fatalf("run folders %v, want 2", dirs)
	}
	type runSummary struct {
		summary
		Book *struct {
			Key       string `json:"key"`
			Reused    bool   `json:"reused"`
			Stored    bool   `json:"stored"`
			NotStored string `json:"not_stored"`
			BuiltBy   string `json:"built_by"`
			StateHash string `json:"state_hash"`
		} `json:"book"`
		Stages []struct {
			Name      string   `json:"name"`
			EstimateS float64  `json:"estimate_s"`
			ActualS   *float64 `json:"actual_s"`
		} `json:"stages"`
		OverheadS *float64 `json:"overhead_s"`
	}
	var s [2]runSummary
	for i, d := range dirs {
		readJSON(t, filepath.Join(d, "summary.json"), &s[i])
		if s[i].Status != "ok" || s[i].Book == nil || len(s[i].Stages) != 5 || s[i].OverheadS == nil {
			t.Fatalf("run %d: status %q (%s%s), book %+v, %d stages, overhead %v", i+1, s[i].Status, s[i].StatusReason, s[i].Error, s[i].Book, len(s[i].Stages), s[i].OverheadS)
		}
		for _, st := range s[i].Stages[:4] {
			if st.ActualS == nil || st.EstimateS <= 0 {
				t.Errorf("run %d stage %s: estimate %v, actual %v", i+1, st.Name, st.EstimateS, st.ActualS)
			}
		}
		report, _ := os.ReadFile(filepath.Join(d, "report.md"))
		if !strings.Contains(string(report), "## Stages") || !strings.Contains(string(report), "| preload |") {
			t.Errorf("run %d report lacks the stages table:\n%s", i+1, report)
		}
	}
	first, second := s[0], s[1]
	var m1 struct {
		RunID string `json:"run_id"`
	}
	readJSON(t, filepath.Join(dirs[0], "manifest.json"), &m1)
	if !first.Book.Stored {
		t.Fatalf("the first run's book was not stored: %s", first.Book.NotStored)
	}
	if first.Book.Reused || !second.Book.Reused || second.Book.Key != first.Book.Key || second.Book.BuiltBy != m1.RunID {
		t.Fatalf("books: first %+v, second %+v; want the second to reuse the first's", first.Book, second.Book)
	}
	for _, sm := range s {
		for n, st := range sm.Nodes {
			if st.StateHash != second.Book.StateHash {
				t.Errorf("%s ended with state hash %s; the stored book's is %s (run 1 built it through the log)", n, st.StateHash, second.Book.StateHash)
			}
		}
	}
	report, _ := os.ReadFile(filepath.Join(dirs[1], "report.md"))
	if !strings.Contains(string(report), "**reused**") || !strings.Contains(string(report), m1.RunID) {
		t.Errorf("second report does not say which run's book it reused:\n%s", report)
	}
	hist, err := os.ReadFile(filepath.Join(res, "stage-times.jsonl"))
	if err != nil || strings.Count(string(hist), "\n") != 2 {
		t.Errorf("stage-time history: %v\n%s", err, hist)
	}
	assertNoProcessesUnder(t, res)
}
