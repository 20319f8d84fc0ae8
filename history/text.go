package history

import (
	"fmt"
	"io"
	"strings"

	"github.com/rig-dev/rig/internal/mdtext"
	"github.com/rig-dev/rig/stats"
	"github.com/rig-dev/rig/sweep"
)

// cell writes a sample as the sweep report does: median [min–max] n=N.
func cell(s stats.Sample) string { return sweep.Cell(sweep.Metric{}, s) }

// Markdown writes the trend: its versions, then its change points.
func (t *Trend) Markdown(w io.Writer, o TrendOptions) {
	runs := 0
	for _, v := range t.Versions {
		runs += len(v.Runs)
	}
	fmt.Fprintf(w, "**%s** (%s, %s, %s): %d engine version(s), %d run(s), %s order; each version's median is one point of the series",
		md(t.Label), mdtext.Code(t.Figure), md(t.Unit), t.Dir, len(t.Versions), runs, md(t.Order))
	if o.PerRun {
		fmt.Fprint(w, " (one point per run: --per-run)")
	}
	fmt.Fprint(w, ".\n\n| # | engine version | commit | binary sha256 | first run | runs | value |\n|---|---|---|---|---|---|---|\n")
	for i, v := range t.Versions {
		mark := ""
		for _, c := range t.Changes {
			if c.Version == i {
				mark = " ◀ change"
			}
		}
		fmt.Fprintf(w, "| %d | %s%s | %s | %s | %s | %d | %s |\n", i+1, md(v.Label), mark, md(orDash(short(v.Commit))), md(orDash(short(v.SHA256))),
			v.First.Format("2006-01-02 15:04"), len(v.Runs), cell(v.Sample))
	}
	perms := o.Permutations
	if perms == 0 {
		perms = 199
	}
	maxp := o.MaxP
	if maxp == 0 {
		maxp = stats.Alpha
	}
	fmt.Fprintf(w, "\nChange points: E-divisive means over the series, each kept when a permutation test (%d shuffles within segments, seed %d) gives p ≤ %.2g.\n\n",
		perms, o.Seed, maxp)
	if len(t.Changes) == 0 {
		fmt.Fprintln(w, "No change point.")
		return
	}
	fmt.Fprint(w, "| at version | commit | before | after | difference of means [95 % CI] (change) | p | verdict |\n|---|---|---|---|---|---|---|\n")
	for _, c := range t.Changes {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %.3g | %s |\n", md(c.Label), md(orDash(short(c.Commit))), cell(c.Size.Base), cell(c.Size.Contender),
			sweep.DiffCell(c.Size), c.P, c.Verdict)
	}
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "—"
	}
	return s
}
