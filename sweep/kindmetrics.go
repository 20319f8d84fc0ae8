package sweep

import (
	"slices"

	"github.com/rig-dev/rig/analysis"
)

// kindMetrics are the figures of the kinds with rows of their own (analysis.RowerKinds): each
// kind's table is named as the kind, its keys "<kind>.<figure>", one value per row of every round.
func kindMetrics() []Metric {
	var ms []Metric
	for _, name := range analysis.RowerKinds() {
		ms = append(ms, rowMetrics(name, rowOpts{key: name + "."}, analysis.KindFigures(name),
			func(r *RunData) []analysis.KindRow { return r.Summary.KindRows[name] })...)
	}
	return ms
}

// reportTables are the sweep report's tables: the experiment tables, then one per kind with
// rows of its own.
func reportTables() []struct{ key, title, note string } {
	out := slices.Clone(tableTitles)
	for _, name := range analysis.RowerKinds() {
		out = append(out, struct{ key, title, note string }{name, name, "one value per " + name + " of every round"})
	}
	return out
}
