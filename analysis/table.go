package analysis

import (
	"fmt"
	"strings"

	"github.com/rig-dev/rig/stats"
)

// Column is one column of a report.md table over rows of R: its head and the cell of the i-th
// row (from 0).
type Column[R any] struct {
	Head string
	Cell func(i int, r R) string
}

// col is a column whose cell depends on the row alone.
func col[R any](head string, cell func(R) string) Column[R] {
	return Column[R]{Head: head, Cell: func(_ int, r R) string { return cell(r) }}
}

// numberCol is the "#" column: the row's place, from 1.
func numberCol[R any]() Column[R] {
	return Column[R]{Head: "#", Cell: func(i int, _ R) string { return fmt.Sprint(i + 1) }}
}

// figureCols are the declared figures as columns, in their declared order; a figure the table
// shows in another form (NoColumn) has none.
func figureCols[R any](figs []RowFigure[R]) []Column[R] {
	out := make([]Column[R], 0, len(figs))
	for _, f := range figs {
		if f.NoColumn {
			continue
		}
		out = append(out, Column[R]{Head: f.Label, Cell: func(_ int, r R) string { return f.Cell(r) }})
	}
	return out
}

// cols joins column lists: the row's own columns, its figures, more of its own.
func cols[R any](parts ...[]Column[R]) []Column[R] {
	var out []Column[R]
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// writeTable writes rows as a Markdown table of cs, head and rule first, and a blank line after.
func writeTable[R any](b *strings.Builder, cs []Column[R], rows []R) {
	b.WriteString("|")
	for _, c := range cs {
		b.WriteString(" " + c.Head + " |")
	}
	b.WriteString("\n|" + strings.Repeat("---|", len(cs)) + "\n")
	for i, r := range rows {
		b.WriteString("|")
		for _, c := range cs {
			b.WriteString(" " + c.Cell(i, r) + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// writePooled lists a run's pooled figures, one line each: mean ± stdev with its 95 % CI for a
// MeanCI figure, else median [min–max] (one value where all are equal); with n. A figure no row
// had is left out.
func writePooled(b *strings.Builder, p Pooled) {
	for _, x := range p {
		if x.N == 0 {
			continue
		}
		if !x.MeanCI && x.Min == x.Max {
			fmt.Fprintf(b, "* %s: %s, n = %d\n", x.Label, x.Format(x.Median), x.N)
			continue
		}
		if !x.MeanCI {
			fmt.Fprintf(b, "* %s: %s [%s – %s], n = %d\n", x.Label, x.Format(x.Median), x.Format(x.Min), x.Format(x.Max), x.N)
			continue
		}
		ci := fmt.Sprintf(" [no interval below n = %d]", stats.MinCI)
		if x.CILo != nil {
			ci = fmt.Sprintf(" [%s – %s]", x.Format(*x.CILo), x.Format(*x.CIHi))
		}
		fmt.Fprintf(b, "* %s: %s ± %s%s, n = %d\n", x.Label, x.Format(x.Mean), x.Format(x.Stdev), ci, x.N)
	}
}
