package analysis

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/rig-dev/rig/stats"
)

// Column is one column of a report.md table over rows of R: its head and the cell of the i-th
// row (from 0). Keys are the declared figures it shows (figCol, showing).
type Column[R any] struct {
	Head string
	Cell func(i int, r R) string
	Keys []string
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

// figCol is the declared figure key of figs as a column, headed head where the table names it
// otherwise than its label (the label names it across runs: in the sweep, rig compare).
func figCol[R any](figs []RowFigure[R], key, head string) Column[R] {
	f := figs[declared(figs, key)]
	return Column[R]{Head: cmp.Or(head, f.Label), Keys: []string{key}, Cell: func(_ int, r R) string { return f.Cell(r) }}
}

// declared is the index of key in figs. A table that names a figure its kind does not declare
// is a mistake in the code, found by any test that writes the table: it panics.
func declared[R any](figs []RowFigure[R], key string) int {
	i := slices.IndexFunc(figs, func(f RowFigure[R]) bool { return f.Key == key })
	if i < 0 {
		panic(fmt.Sprintf("analysis: a table names figure %q, which its row kind does not declare", key))
	}
	return i
}

// showing marks a column of the table's own as showing declared figures in a form of its own
// (several in one cell, a figure beside its context), so figureTable does not add them again.
func showing[R any](c Column[R], keys ...string) Column[R] {
	c.Keys = append(slices.Clone(c.Keys), keys...)
	return c
}

// figureTable is a table's columns over a row kind's declared figures: layout (the table's own
// columns, with figures placed among them by figCol and showing), then every other declared
// figure one of rows has, in declared order, so a figure declared later reaches the table with
// no edit to it. omit names the figures the table leaves to another (a sender's figure in a
// table of what the receiver saw).
func figureTable[R any](figs []RowFigure[R], rows []R, layout []Column[R], omit ...string) []Column[R] {
	placed := map[string]bool{}
	for _, c := range slices.Concat(layout, []Column[R]{{Keys: omit}}) {
		for _, k := range c.Keys {
			declared(figs, k)
			placed[k] = true
		}
	}
	out := slices.Clone(layout)
	for _, f := range figs {
		if placed[f.Key] || f.NoColumn || !slices.ContainsFunc(rows, func(r R) bool { _, ok := f.Get(r); return ok }) {
			continue
		}
		out = append(out, Column[R]{Head: f.Label, Keys: []string{f.Key}, Cell: func(_ int, r R) string { return f.Cell(r) }})
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
