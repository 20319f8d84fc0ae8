package analysis

import (
	"fmt"
	"strings"

	"github.com/rig-dev/rig/stats"
)

// ExcursionFigures are a latency excursion's figures: report.md's excursion table, summary.json's
// pooled excursion figures (over the listed excursions), the sweep's excursion table and rig
// compare. Covered is the share of the excursion the named causes' spans cover.
var ExcursionFigures = []RowFigure[Excursion]{
	{Figure: Figure{Key: "peak", Label: "peak", Unit: "ms", Dir: stats.LowerIsBetter}, Get: func(e Excursion) (float64, bool) { return e.PeakMs, true }},
	{Figure: Figure{Key: "slow", Label: "slow probes", Unit: "probes", Dir: stats.LowerIsBetter}, Plain: true, Get: func(e Excursion) (float64, bool) { return float64(e.Probes), true }},
	{Figure: Figure{Key: "lost", Label: "lost", Unit: "probes", Dir: stats.LowerIsBetter}, Plain: true, Get: func(e Excursion) (float64, bool) { return float64(e.Lost), true }},
	{Figure: Figure{Key: "covered", Label: "covered", Unit: "%", Dir: stats.HigherIsBetter},
		Get: func(e Excursion) (float64, bool) {
			length := e.LengthMs()
			return 100 * min(e.CoveredMs, length) / length, length > 0
		},
		Show: func(v float64) string { return fmt.Sprintf("%.0f %%", v) },
		Marks: func(e Excursion) (before, after string) {
			if length := e.LengthMs(); e.CoveredMs < length {
				after = fmt.Sprintf(" (%s unexplained)", fmtMs(length-e.CoveredMs))
			}
			return "", after
		},
		None: func(Excursion) string { return "–" }},
}

// writeExcursions is report.md's table of the listed excursions: their own columns with the
// declared figures (ExcursionFigures) placed among them, and any other declared after them.
func writeExcursions(b *strings.Builder, list []Excursion) {
	writeTable(b, figureTable(ExcursionFigures, list, []Column[Excursion]{
		col("start", func(e Excursion) string { return fmtS3(e.StartS) }),
		col("end", func(e Excursion) string { return fmtS3(e.EndS) }),
		figCol(ExcursionFigures, "peak", ""),
		showing(col("probes (lost)", func(e Excursion) string { return fmt.Sprintf("%d (%d)", e.Probes, e.Lost) }), "slow", "lost"),
		figCol(ExcursionFigures, "covered", ""),
		col("cause", func(e Excursion) string { return strings.ReplaceAll(excursionCause(e), "|", "\\|") }),
	}), list)
}

// excursionCause names what was under way in an excursion, and its period if it repeats.
func excursionCause(e Excursion) string {
	var cs []string
	for _, c := range e.Causes {
		who := ""
		if c.Node != "" {
			who = " " + c.Node
		}
		line := fmt.Sprintf("%s%s at %s: %s", c.Kind, who, fmtS3(c.AtS), c.Evidence)
		if c.PeriodS > 0 {
			line += fmt.Sprintf(" (a periodic cause, every %s)", fmtS3(c.PeriodS))
		}
		cs = append(cs, line)
	}
	cause := "**unexplained**"
	if len(cs) > 0 {
		cause = strings.Join(cs, "; ")
	}
	if e.PeriodS > 0 {
		cause += fmt.Sprintf(" (periodic, every %s)", fmtS3(e.PeriodS))
	}
	return cause
}

// CauseRowFigures are the figures of one row of a table of where an interval's time went (a
// window's, an excursion's): report.md's columns. Rows of different causes do not pool; the
// sweep and rig compare read each cause's share of a kind of interval (ShareFigure) instead.
var CauseRowFigures = []RowFigure[CauseRow]{
	{Figure: Figure{Key: "count", Label: "count", Dir: stats.Neutral}, Plain: true, Get: func(r CauseRow) (float64, bool) { return float64(r.Count), true }},
	{Figure: Figure{Key: "total", Label: "total", Unit: "ms", Dir: stats.LowerIsBetter}, Get: func(r CauseRow) (float64, bool) { return r.TotalMs, true }},
	{Figure: Figure{Key: "share", Label: "share", Unit: "%", Dir: stats.LowerIsBetter}, Get: func(r CauseRow) (float64, bool) { return r.SharePct, true },
		Show: func(v float64) string { return fmt.Sprintf("%.1f %%", v) }},
}

// writeCauseRows is report.md's table of where an interval's time went, row by row: its own
// columns with the declared figures (CauseRowFigures) placed among them, any other after them.
func writeCauseRows(b *strings.Builder, rows []CauseRow) {
	writeTable(b, figureTable(CauseRowFigures, rows, []Column[CauseRow]{
		col("node", func(r CauseRow) string { return r.Node }),
		col("thread", func(r CauseRow) string { return orDash(r.Thread) }),
		col("cause", func(r CauseRow) string {
			if r.Role != "" {
				return r.Cause + " (" + r.Role + ")"
			}
			return r.Cause
		}),
		col("source", func(r CauseRow) string { return r.Source }),
		figCol(CauseRowFigures, "count", ""),
		figCol(CauseRowFigures, "total", ""),
		figCol(CauseRowFigures, "share", ""),
		col("detail", func(r CauseRow) string { return strings.ReplaceAll(orDash(r.Detail), "|", "\\|") }),
	}), rows)
}
