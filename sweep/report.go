package sweep

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/internal/mdtext"
	"github.com/rig-dev/rig/stats"
)

// Options are the sweep report's choices.
type Options struct {
	// Baseline selects the combination every other is tested against, as key=value pairs
	// ("engine.sync_level=2" or "preload.orders=1M,engine.sync_level=0"): the first combination
	// with all of them. Empty: the first combination of the plan.
	Baseline string
}

// ErrBadBaseline: Options.Baseline matches no combination, or is not key=value pairs.
var ErrBadBaseline = errors.New("baseline")

// verdictRule says how stats.Compare decides, under every table of verdicts.
const verdictRule = "Verdicts: where the Mann–Whitney U test can reach p < 0.05 with the values at hand (4 against 4 and more) it decides, " +
	"in the direction of the medians; where it cannot (2 against 2 never goes below p = 1/3), a difference is called only when " +
	"Welch's 95 % interval for the difference of means excludes 0. \"unclear\": the interval excludes 0 but the ranks do not differ. " +
	"\"no verdict\": fewer than 2 values a side (use rounds). The verdicts shown together are then held to a false discovery rate of " +
	"5 % (Benjamini–Hochberg over the deciding test's p: Mann–Whitney's, or Welch's where the rank test cannot decide): a difference " +
	"whose adjusted q is above 0.05 is not called, and says what it was before the correction. \"weak\": fewer than 3 values a side."

// Report is a sweep's pooled figures, ready to render.
type Report struct {
	Set      *Set
	Groups   []*Group
	Baseline *Group
	Metrics  []Metric
	Plots    []string // relative to the sweep folder
}

// Build pools the set's runs by combination and picks the baseline.
func Build(set *Set, opts Options) (*Report, error) {
	r := &Report{Set: set, Groups: set.Groups(), Metrics: Metrics(set.Runs)}
	if len(r.Groups) == 0 {
		return nil, fmt.Errorf("%s: no runs", set.Dir)
	}
	r.Baseline = r.Groups[0]
	if opts.Baseline != "" {
		sel, err := ParseSelector(opts.Baseline)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadBaseline, err)
		}
		r.Baseline = nil
		for _, g := range r.Groups {
			if sel.Match(g.Settings) {
				r.Baseline = g
				break
			}
		}
		if r.Baseline == nil {
			var labels []string
			for _, g := range r.Groups {
				labels = append(labels, g.Label)
			}
			return nil, fmt.Errorf("%w: %q matches no combination; the sweep has: %s", ErrBadBaseline, opts.Baseline, strings.Join(labels, "; "))
		}
	}
	return r, nil
}

// Selector is key=value pairs that a run's settings must all have.
type Selector map[string]string

// ParseSelector reads "k=v,k2=v2".
func ParseSelector(s string) (Selector, error) {
	sel := Selector{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%q: want key=value pairs separated by commas, e.g. engine.sync_level=2", s)
		}
		sel[k] = v
	}
	return sel, nil
}

// Match reports whether settings have every pair of the selector.
func (s Selector) Match(settings map[string]string) bool {
	for k, v := range s {
		if settings[k] != v {
			return false
		}
	}
	return true
}

// WriteReport builds the sweep's report.md and plots in its folder.
func WriteReport(set *Set, opts Options) (*Report, error) {
	r, err := Build(set, opts)
	if err != nil {
		return nil, err
	}
	plots, plotErr := writePlots(set.Dir, r)
	r.Plots = plots
	md := r.Markdown()
	if plotErr != nil {
		md += "\n_Plots: " + plotErr.Error() + "_\n"
	}
	if err := atomicfile.WriteFile(filepath.Join(set.Dir, ReportName), []byte(md), 0o644); err != nil {
		return r, fmt.Errorf("write sweep report: %w", err)
	}
	return r, plotErr
}

// num prints a figure with the precision its size deserves.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case v == math.Trunc(v) && a < 1e15:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 0.1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// Cell writes a pooled sample: median [min–max] n=N, or for MeanCI metrics mean ± stdev
// [min–max] n=N with the 95 % CI of the mean.
func Cell(m Metric, s stats.Sample) string {
	switch {
	case s.N == 0:
		return "—"
	case s.N == 1:
		return num(s.Mean) + " (n=1)"
	case m.MeanCI:
		c := fmt.Sprintf("%s ± %s [%s–%s] n=%d", num(s.Mean), num(s.Stdev), num(s.Min), num(s.Max), s.N)
		if s.CILo != nil {
			c += fmt.Sprintf(", CI [%s, %s]", num(*s.CILo), num(*s.CIHi))
		} else {
			c += fmt.Sprintf(", no CI below n=%d", stats.MinCI)
		}
		return c
	}
	return fmt.Sprintf("%s [%s–%s] n=%d", num(s.Median), num(s.Min), num(s.Max), s.N)
}

// table is one of the sweep report's tables: its metrics' Table, its title and note.
type table struct{ key, title, note string }

// reportTables are the sweep report's tables: every probe's latency, one per row kind
// (analysis.RowKinds), the cause shares and the overhead.
func reportTables() []table {
	out := []table{{TableLatency, "Latency (every post-warm-up probe)", "one value per run"}}
	for _, k := range analysis.RowKinds() {
		out = append(out, table{k.Name, k.Title, k.Note})
	}
	return append(out,
		table{TableCauses, "Where the time went (per window kind and excursions)", "one value per run whose run had the source: the cause's time over every node and thread, or the time left unexplained, as a share of the run's windows of that kind (or of its excursions) together (analysis/causeshares.go; a run with the source and not the cause counts 0)"},
		table{TableOverhead, "Overhead", "one value per run: its wall time minus the playbook's duration, and the time of each stage (a reused book makes preload short)"})
}

// present lists the table's metrics that any group has values for.
func (r *Report) present(table string) []Metric {
	var out []Metric
	for _, m := range r.Metrics {
		if m.Table != table {
			continue
		}
		for _, g := range r.Groups {
			if len(g.Values(m)) > 0 {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

// md is text from a sweep.json, a run folder or a playbook, as Markdown inline text.
func md(s string) string { return mdtext.Inline(s) }

// Markdown renders report.md.
func (r *Report) Markdown() string {
	var b strings.Builder
	pf := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	sw := r.Set.Sweep
	if sw != nil {
		pf("# Sweep %s: %s\n\n", md(sw.ID), md(sw.Playbook))
		ended := "not ended"
		if !sw.Ended.IsZero() {
			ended = sw.Ended.Format("2006-01-02 15:04:05Z") + fmt.Sprintf(" (%s)", sw.Ended.Sub(sw.Started).Round(1e9))
		}
		pf("Status **%s** · started %s · %s · %d run(s) planned, %d with figures · %d round(s) · warm snapshots from #%d\n\n",
			md(sw.Status), sw.Started.Format("2006-01-02 15:04:05Z"), ended, len(sw.Runs), r.ran(), sw.Rounds, sw.WarmFrom)
		if len(sw.Axes) > 0 {
			pf("Matrix:")
			for _, ax := range sw.Axes {
				vals := make([]string, len(ax.Values))
				for i, v := range ax.Values {
					vals[i] = md(v)
				}
				pf(" %s ∈ {%s}", mdtext.Code(ax.Key), strings.Join(vals, ", "))
			}
			pf(". Rows are the combinations that ran, in plan order; nothing is estimated.\n\n")
			for _, ax := range sw.Axes {
				if n, reason := notApplied(r.Set, ax.Key); n > 0 {
					pf("**%s had no effect: not applied** in %d of %d run(s) with figures (%s); its rows differ only by chance.\n\n", mdtext.Code(ax.Key), n, r.ran(), md(reason))
				}
			}
		}
		if line := spentLine(sw); line != "" {
			pf("%s\n\n", line)
		}
		if n := len(sw.Attempts); n > 1 {
			pf("Resumed: %d attempts (sweep.json `attempts`).", n)
			for _, a := range sw.Attempts {
				pf(" Attempt %d: started %s, %s, %s.", a.N, a.Started.Format("2006-01-02 15:04:05Z"), md(a.Status), md(rigName(a.Rig)))
			}
			pf(" A combination marked %s has rounds from more than one attempt: its spread may include a change of machine state between them.\n\n", spansMark)
		}
	} else {
		pf("# Run %s\n\n", md(r.Set.Dir))
	}
	pf("Baseline for the differences: **%s**.\n\n", md(r.Baseline.Label))

	for _, t := range reportTables() {
		ms := r.present(t.key)
		if len(ms) == 0 {
			continue
		}
		pf("## %s\n\n_%s._\n\n", t.title, t.note)
		// Restarts have many columns: phases apart from the latency windows.
		for _, chunk := range chunks(ms, 7) {
			pf("| combination | runs |")
			for _, m := range chunk {
				pf(" %s (%s) |", m.Label, m.Unit)
			}
			pf("\n|---|---|%s\n", strings.Repeat("---|", len(chunk)))
			for _, g := range r.Groups {
				pf("| %s | %d/%d |", md(g.marked()), g.Ran(), len(g.Runs))
				for _, m := range chunk {
					pf(" %s |", Cell(m, stats.Describe(g.Values(m))))
				}
				pf("\n")
			}
			pf("\n")
		}
	}

	r.bufferChain(&b)
	r.differences(&b)
	if len(r.Plots) > 0 {
		pf("## Plots\n\n")
		for _, p := range r.Plots {
			if strings.HasSuffix(p, ".png") {
				pf("![%s](%s)\n", md(strings.TrimSuffix(filepath.Base(p), ".png")), mdtext.Path(p))
			}
		}
		pf("\nEach plot also as SVG beside the PNG. Points are medians, bars the [min–max] of the pooled values.\n\n")
	}
	r.runList(&b)
	pf("## How to read this\n\n")
	pf("- Each cell pools every round of a combination: median [min–max] n=values, or where noted mean ± stdev with the 95 %% confidence interval of the mean (Student's t).\n")
	pf("- %s\n", verdictRule)
	pf("- Per-run figures, warnings and plots are in each run's own report.md.\n")
	return b.String()
}

// spentLine says how long the sweep's attempts ran and, at a known price per hour, what that cost.
// An attempt whose controller died has no end: it counts to the last time one of its runs was seen.
func spentLine(sw *Sweep) string {
	if len(sw.Attempts) == 0 {
		return ""
	}
	var total time.Duration
	var parts []string
	for _, a := range sw.Attempts {
		end := a.Ended
		if end.IsZero() {
			for _, r := range sw.Runs {
				if r.Attempt == a.N {
					end = later(end, later(r.Started, r.Ended))
				}
				for _, e := range r.Earlier {
					if e.Attempt == a.N {
						end = later(end, e.Started)
					}
				}
			}
		}
		d := time.Duration(0)
		if end.After(a.Started) {
			d = end.Sub(a.Started)
		}
		total += d
		p := fmt.Sprintf("attempt %d: %s", a.N, d.Round(time.Second))
		if a.Ended.IsZero() {
			p += " or more"
		}
		if a.Stopped != "" {
			p += ", stopped before the end: " + a.Stopped
		}
		parts = append(parts, p)
	}
	line := fmt.Sprintf("Time spent: %s over %d attempt(s) (%s)", total.Round(time.Second), len(sw.Attempts), strings.Join(parts, "; "))
	if sw.PricePerHour > 0 {
		line += fmt.Sprintf(", ~$%.2f at $%.2f/h", total.Hours()*sw.PricePerHour, sw.PricePerHour)
	}
	return line + "."
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// spansMark follows the label of a combination whose rounds come from more than one attempt.
const spansMark = "‡"

// Attempts are the attempts the group's runs with figures came from, in order.
func (g *Group) Attempts() []int {
	seen := map[int]bool{}
	var out []int
	for _, r := range g.Runs {
		if r.Summary != nil && r.Ref.Attempt > 0 && !seen[r.Ref.Attempt] {
			seen[r.Ref.Attempt] = true
			out = append(out, r.Ref.Attempt)
		}
	}
	sort.Ints(out)
	return out
}

// marked is the group's label, with spansMark and its attempts when its rounds span attempts.
func (g *Group) marked() string {
	a := g.Attempts()
	if len(a) < 2 {
		return g.Label
	}
	s := make([]string, len(a))
	for i, n := range a {
		s[i] = fmt.Sprint(n)
	}
	return fmt.Sprintf("%s %s (attempts %s)", g.Label, spansMark, strings.Join(s, ", "))
}

// notApplied counts the runs in which setting had no effect because it was never applied, and
// gives the first reason.
func notApplied(set *Set, setting string) (int, string) {
	n, reason := 0, ""
	for _, run := range set.Runs {
		if run.Summary == nil {
			continue
		}
		for _, na := range run.Summary.NotApplied {
			if na.Setting == setting {
				n++
				if reason == "" {
					reason = na.Reason
				}
			}
		}
	}
	return n, reason
}

func (r *Report) ran() int {
	n := 0
	for _, run := range r.Set.Runs {
		if run.Summary != nil {
			n++
		}
	}
	return n
}

func chunks(ms []Metric, n int) [][]Metric {
	var out [][]Metric
	for len(ms) > n {
		out = append(out, ms[:n])
		ms = ms[n:]
	}
	return append(out, ms)
}

// differences writes each combination's headline figures against the baseline.
func (r *Report) differences(b *strings.Builder) {
	if len(r.Groups) < 2 {
		return
	}
	pf := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	pf("## Differences from the baseline\n\n")
	type row struct {
		g *Group
		m Metric
		c *stats.Comparison
	}
	var rows []row
	var cs []*stats.Comparison
	for _, g := range r.Groups {
		if g == r.Baseline {
			continue
		}
		for _, m := range r.Metrics {
			if !m.Headline {
				continue
			}
			bv, gv := r.Baseline.Values(m), g.Values(m)
			if len(bv) == 0 && len(gv) == 0 {
				continue
			}
			c := stats.Compare(bv, gv, m.Dir)
			rows, cs = append(rows, row{g, m, &c}), append(cs, &c)
		}
	}
	before, after := stats.ControlFDR(cs)
	pf("| combination | figure | baseline | this | difference of means (95 %% CI) | Mann–Whitney p | q (BH) | verdict |\n|---|---|---|---|---|---|---|---|\n")
	for _, rw := range rows {
		pf("| %s | %s (%s) | %s | %s | %s | %s | %s | %s |\n", md(rw.g.Label), rw.m.Label, rw.m.Unit,
			Cell(rw.m, rw.c.Base), Cell(rw.m, rw.c.Contender), DiffCell(*rw.c), mwCell(*rw.c), qCell(*rw.c), VerdictCell(*rw.c))
	}
	pf("\n%s\n\n", fdrLine(len(cs), before, after))
}

// qCell is a verdict's p-value adjusted over the verdicts shown with it (stats.ControlFDR).
func qCell(c stats.Comparison) string {
	if c.Q == nil {
		return "—"
	}
	return fmt.Sprintf("%.3g", *c.Q)
}

// VerdictCell is the verdict after the false-discovery-rate correction, with the one it took
// back and whether it rests on fewer than stats.MinValuesFirm values a side.
func VerdictCell(c stats.Comparison) string {
	v := c.Verdict
	if v == stats.NoVerdict {
		v = fmt.Sprintf("n=%d/%d, no verdict", c.Base.N, c.Contender.N)
	}
	if c.Uncorrected != "" {
		v += " (" + c.Uncorrected + " before the correction)"
	}
	if c.Weak {
		v += fmt.Sprintf(" · weak: n=%d/%d", c.Base.N, c.Contender.N)
	}
	return v
}

// fdrLine says how many verdicts were tested together and how many differences the correction
// kept.
func fdrLine(n, before, after int) string {
	return fmt.Sprintf("_%d verdict(s) shown together: %d difference(s) before the Benjamini–Hochberg correction, %d after (q ≤ %.2g); "+
		"\"weak\": fewer than %d values a side._", n, before, after, stats.Alpha, stats.MinValuesFirm)
}

// DiffCell writes mean(contender) - mean(base) with its interval and relative change.
func DiffCell(c stats.Comparison) string {
	if c.Base.N == 0 || c.Contender.N == 0 {
		return "—"
	}
	d := c.Contender.Mean - c.Base.Mean
	s := signed(d)
	if c.Welch != nil {
		s += fmt.Sprintf(" [%s, %s]", signed(c.Welch.Lo), signed(c.Welch.Hi))
	}
	if c.Change != nil {
		s += fmt.Sprintf(" (%+.1f %%)", *c.Change*100)
	}
	return s
}

func signed(v float64) string {
	if v >= 0 {
		return "+" + num(v)
	}
	return num(v)
}

func mwCell(c stats.Comparison) string {
	if c.U == nil || c.Base.N < 2 || c.Contender.N < 2 {
		return "—"
	}
	return fmt.Sprintf("%.3g", c.U.P)
}

// runList lists every planned run with its state and warnings.
func (r *Report) runList(b *strings.Builder) {
	if r.Set.Sweep == nil {
		return
	}
	pf := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	pf("## Runs\n\n| run | round | settings | attempt | status | warnings |\n|---|---|---|---|---|---|\n")
	for _, run := range r.Set.Runs {
		status, warn := run.Ref.Status, ""
		if run.Summary != nil {
			status = run.Summary.Status
			if n := len(run.Summary.Warnings); n > 0 {
				warn = fmt.Sprintf("%d: %s", n, run.Summary.Warnings[0])
				if n > 1 {
					warn += " …"
				}
			}
		} else if run.Missing != "" {
			warn = run.Missing
		}
		if status == "" {
			status = "not run"
		}
		link := run.Ref.Dir
		if run.Summary != nil {
			link = fmt.Sprintf("[%s](%s)", md(run.Ref.Dir), mdtext.Path(run.Ref.Dir+"/report.md"))
		} else {
			link = md(link)
		}
		att := "—"
		if run.Ref.Attempt > 0 {
			att = fmt.Sprint(run.Ref.Attempt)
		}
		for _, e := range run.Ref.Earlier {
			att += fmt.Sprintf(" (attempt %d: %s", e.Attempt, md(e.Status))
			if e.Dir != "" {
				att += ", " + md(e.Dir)
			}
			att += ")"
		}
		pf("| %s | %d | %s | %s | %s | %s |\n", link, run.Ref.Round, md(Label(r.Set.Sweep.Axes, run.Ref.Settings)), att, md(status), md(warn))
	}
	pf("\n")
}
