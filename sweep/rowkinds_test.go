package sweep

import (
	"testing"

	"github.com/rig-dev/rig/analysis"
)

// Each row kind analysis declares is a table of the sweep report, titled as declared, with a
// metric "<kind>.<figure>" in that table for each of its figures: the sweep lists none by hand.
func TestEveryRowKindIsATable(t *testing.T) {
	tables := map[string]table{}
	for _, tb := range reportTables() {
		if _, dup := tables[tb.key]; dup {
			t.Errorf("table %q listed twice", tb.key)
		}
		tables[tb.key] = tb
	}
	metrics := map[string]Metric{}
	for _, m := range Metrics(nil) {
		metrics[m.Key] = m
	}
	kinds := analysis.RowKinds()
	if len(kinds) < 11 {
		t.Fatalf("%d row kinds, want at least the 11 analysis declares", len(kinds))
	}
	for _, k := range kinds {
		if tb, ok := tables[k.Name]; !ok || tb.title != k.Title || tb.note != k.Note || k.Title == "" {
			t.Errorf("row kind %s: table %+v, want its declared title %q", k.Name, tb, k.Title)
		}
		for _, f := range k.Figures {
			if m, ok := metrics[k.Name+"."+f.Key]; !ok || m.Table != k.Name {
				t.Errorf("row kind %s: no metric %s.%s in its table (got %+v)", k.Name, k.Name, f.Key, m)
			}
		}
	}
}
