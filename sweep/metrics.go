package sweep

import (
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/stats"
)

// The sweep report's tables of its own; every row kind's table is named as the kind
// (analysis.RowKinds).
const (
	TableLatency  = "latency"
	TableOverhead = "overhead"
	TableCauses   = "causes"
)

// The tables of the window shapes the sweep adds figures of its own to (ownMetrics), named as
// their shapes.
const (
	tableSnapshot = string(actions.ShapeSnapshot)
	tableRestart  = string(actions.ShapeRestart)
	tableBurst    = string(actions.ShapeBurst)
)

// Metric is one figure read from every run's summary.json: its declaration (analysis.Figure),
// its Key the figure's with its table's prefix (snapshot.take), stable in file names and `rig
// compare` output. A run can give several values (one per warm snapshot, per restart, per
// step-down): they pool with the other rounds' values, and n counts them all.
type Metric struct {
	analysis.Figure
	Table  string
	Values func(r *RunData) []float64
}

// warm returns the run's snapshots from its first warm one on.
func (r *RunData) warm() []analysis.SnapshotRow {
	if r.Summary == nil || len(r.Summary.Snapshots) < r.warmFrom {
		return nil
	}
	return r.Summary.Snapshots[r.warmFrom-1:]
}

// cold returns the run's snapshots before its first warm one.
func (r *RunData) cold() []analysis.SnapshotRow {
	if r.Summary == nil {
		return nil
	}
	return r.Summary.Snapshots[:min(max(r.warmFrom-1, 0), len(r.Summary.Snapshots))]
}

// Metrics lists every figure of the sweep report, table by table: the latency of every probe,
// the figures each row kind declares (analysis.RowKinds, with the sweep's own of a few kinds:
// ownMetrics), the cause shares, and what a run costs besides its timeline.
func Metrics(runs []*RunData) []Metric {
	probes := func(r *RunData) []analysis.Stats { return []analysis.Stats{r.Summary.Probes} }
	ms := rowMetrics(TableLatency, rowOpts{key: "probes."}, analysis.LatencyFigures, probes)
	ms = append(ms, Metric{Figure: analysis.Figure{Key: "leader.unplanned", Label: "unplanned leader changes", Unit: "count", Dir: stats.LowerIsBetter}, Table: TableLatency,
		Values: func(r *RunData) []float64 { return []float64{float64(len(r.Summary.UnplannedLeaderChanges))} }})
	ms = append(ms, Metric{Figure: analysis.Figure{Key: "probes.rate", Label: "probe rate", Unit: "/s", Dir: stats.HigherIsBetter}, Table: TableLatency,
		Values: func(r *RunData) []float64 {
			if r.Summary.Settings.ProbeRate == 0 {
				return nil
			}
			return []float64{r.Summary.Settings.ProbeRate}
		}})
	for _, k := range analysis.RowKinds() {
		declared := kindMetrics(k)
		if own := ownMetrics[k.Name]; own != nil {
			declared = own(runs, declared)
		}
		ms = append(ms, declared...)
	}
	ms = append(ms, causeMetrics(runs)...)
	// What a run costs besides its timeline, and where that went (the runner's stages).
	ms = append(ms, rowMetrics(TableOverhead, rowOpts{}, analysis.OverheadFigures, func(r *RunData) []*analysis.Summary { return []*analysis.Summary{r.Summary} })...)
	return ms
}

// kindMetrics are a row kind's declared figures as metrics of its table, keyed "<kind>.<figure>":
// one value per row of every round.
func kindMetrics(k analysis.RowKind) []Metric {
	out := make([]Metric, 0, len(k.Figures))
	for i, f := range k.Figures {
		f.Key = k.Name + "." + f.Key
		out = append(out, Metric{Figure: f, Table: k.Name, Values: func(r *RunData) []float64 { return k.Values(r.Summary, i) }})
	}
	return out
}

// ownMetrics are the sweep's figures of a row kind beside, or instead of, its declared ones
// (declared, as kindMetrics makes them).
var ownMetrics = map[string]func(runs []*RunData, declared []Metric) []Metric{
	tableSnapshot: snapshotMetrics,
	tableRestart:  restartMetrics,
	tableBurst:    burstMetrics,
}

// snapshotMetrics: every declared figure over the warm snapshots; the take over the cold ones
// too; the run's normal p50 beside them.
func snapshotMetrics(_ []*RunData, _ []Metric) []Metric {
	ms := rowMetrics(tableSnapshot, rowOpts{key: tableSnapshot + ".", label: "warm "}, analysis.SnapshotFigures, (*RunData).warm)
	for _, f := range analysis.SnapshotFigures {
		if f.Key == "take" {
			first := f.Figure
			first.Key, first.Label, first.Headline = tableSnapshot+".first_take", "first take (cold)", false
			ms = append(ms, Metric{Figure: first, Table: tableSnapshot, Values: func(r *RunData) []float64 { return f.Values(r.cold()) }})
		}
	}
	return append(ms, Metric{Figure: analysis.Figure{Key: "normal.p50", Label: "normal p50", Unit: "ms", Dir: stats.LowerIsBetter, Headline: true}, Table: tableSnapshot,
		Values: func(r *RunData) []float64 {
			if len(r.Summary.Snapshots) == 0 || r.Summary.Normal.P50Us == nil {
				return nil
			}
			return []float64{*r.Summary.Normal.P50Us / 1e3}
		}})
}

// restartMetrics: the declared figures, then the phases the runs reported and the latency of
// each restart window.
func restartMetrics(runs []*RunData, declared []Metric) []Metric {
	ms := declared
	for _, ph := range phases(runs) {
		ms = append(ms, Metric{Figure: analysis.Figure{Key: tableRestart + ".phase." + ph, Label: "phase " + ph, Unit: "ms", Dir: stats.LowerIsBetter}, Table: tableRestart,
			Values: func(r *RunData) []float64 {
				var v []float64
				for _, rs := range r.Summary.Restarts {
					if d, ok := rs.PhasesMs[ph]; ok {
						v = append(v, d)
					}
				}
				return v
			}})
	}
	window := func(w func(rs analysis.RestartRow) *analysis.Window) func(r *RunData) []analysis.Stats {
		return func(r *RunData) []analysis.Stats {
			var out []analysis.Stats
			for _, rs := range r.Summary.Restarts {
				if win := w(rs); win != nil {
					out = append(out, win.Stats)
				}
			}
			return out
		}
	}
	for _, w := range []struct {
		key, label string
		get        func(rs analysis.RestartRow) *analysis.Window
	}{
		{"all_up", "all up", func(rs analysis.RestartRow) *analysis.Window { return &rs.Windows.AllUp }},
		{"one_down", "one down", func(rs analysis.RestartRow) *analysis.Window { return &rs.Windows.OneDown }},
		{"rejoining", "rejoining", func(rs analysis.RestartRow) *analysis.Window { return rs.Windows.Rejoining }},
	} {
		ms = append(ms, rowMetrics(tableRestart, rowOpts{key: tableRestart + "." + w.key + ".", label: w.label + " ", noHeadline: true}, analysis.LatencyFigures, window(w.get))...)
	}
	return ms
}

// burstMetrics: the declared figures, and the UDP receive-buffer errors over the run.
func burstMetrics(_ []*RunData, declared []Metric) []Metric {
	return append(declared,
		Metric{Figure: analysis.Figure{Key: tableBurst + ".rcvbuf_errors", Label: "UDP rcvbuf errors", Unit: "datagrams", Dir: stats.LowerIsBetter}, Table: tableBurst,
			Values: func(r *RunData) []float64 {
				if len(r.Summary.Bursts) == 0 {
					return nil
				}
				var n uint64
				for _, e := range r.Summary.UDPRcvbufErrors {
					n += e
				}
				return []float64{float64(n)}
			}},
	)
}

// HeadlineKeys are the keys of the headline metrics (tested against the baseline, plotted, and
// the history log's figures by default), those of the row kinds' declared figures among them.
func HeadlineKeys() []string {
	var out []string
	for _, m := range Metrics(nil) {
		if m.Headline {
			out = append(out, m.Key)
		}
	}
	return out
}

// rowOpts shape a row kind's figures as metrics: key and label prefixes; noHeadline drops the
// headline flag (a window's figures beside the run's own).
type rowOpts struct {
	key, label string
	noHeadline bool
}

// rowMetrics are the figures a row type declares (analysis.RowFigure), as metrics of table: one
// value per row of every round.
func rowMetrics[R any](table string, o rowOpts, figs []analysis.RowFigure[R], rows func(*RunData) []R) []Metric {
	out := make([]Metric, 0, len(figs))
	for _, f := range figs {
		fig := f.Figure
		fig.Key, fig.Label = o.key+fig.Key, o.label+fig.Label
		if o.noHeadline {
			fig.Headline = false
		}
		out = append(out, Metric{Figure: fig, Table: table, Values: func(r *RunData) []float64 { return f.Values(rows(r)) }})
	}
	return out
}

// phases lists the restart phases any run reported, in the engine's order where known.
func phases(runs []*RunData) []string {
	seen := map[string]bool{}
	for _, r := range runs {
		if r.Summary == nil {
			continue
		}
		for _, rs := range r.Summary.Restarts {
			for ph := range rs.PhasesMs {
				seen[ph] = true
			}
		}
	}
	order := []string{engine.PhaseStarting, engine.PhaseRestoring, engine.PhaseJoining, engine.PhaseReplaying, engine.PhaseCatchingUp}
	var out []string
	for _, ph := range order {
		if seen[ph] {
			out = append(out, ph)
			delete(seen, ph)
		}
	}
	var rest []string
	for ph := range seen {
		rest = append(rest, ph)
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// causeMetrics are the cause figures (analysis.ShareFigure) every run has: per kind of interval
// (windows by kind, then excursions), the unexplained share and each cause's share, one value
// per run (analysis.Summary.IntervalTimes: a run without the kind, or without the cause's
// source, gives none; with the source and not the cause, 0).
func causeMetrics(runs []*RunData) []Metric {
	type id struct {
		kind string
		c    analysis.CauseID
	}
	seen := map[id]bool{}
	var ids []id
	for _, r := range runs {
		if r.Summary == nil {
			continue
		}
		for _, t := range r.Summary.IntervalTimes() {
			for _, c := range append([]analysis.CauseID{{}}, slices.Collect(maps.Keys(t.Totals))...) {
				if k := (id{t.Kind, c}); !seen[k] {
					seen[k] = true
					ids = append(ids, k)
				}
			}
		}
	}
	order := func(k string) int {
		if i := slices.Index(analysis.WindowKinds, analysis.WindowKind(k)); i >= 0 {
			return i
		}
		return len(analysis.WindowKinds)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := ids[i], ids[j]
		if order(a.kind) != order(b.kind) {
			return order(a.kind) < order(b.kind)
		}
		if a.c.Source != b.c.Source {
			return a.c.Source < b.c.Source
		}
		return a.c.Cause < b.c.Cause
	})
	out := make([]Metric, 0, len(ids))
	for _, k := range ids {
		f := analysis.ShareFigure(k.kind, k.c)
		out = append(out, Metric{Figure: f, Table: TableCauses,
			Values: func(r *RunData) []float64 {
				if r.Summary == nil {
					return nil
				}
				for _, t := range r.Summary.IntervalTimes() {
					if t.Kind == k.kind {
						if v, ok := t.Share(k.c); ok {
							return []float64{v}
						}
					}
				}
				return nil
			}})
	}
	return out
}

// Family is the false-discovery family a metric's verdicts are corrected in: the cause figures
// and the excursions' own (what a run's slow stretches were, beside what they were made of) are
// one of their own, so their many verdicts do not dilute the others'.
func (m Metric) Family() string { return FamilyOf(m.Key) }

// FamilyOf is the false-discovery family of the figure of key (Metric.Family), for a reader holding
// only keys (the results index).
func FamilyOf(key string) string {
	if strings.HasPrefix(key, analysis.CauseKeyPrefix) || strings.HasPrefix(key, analysis.KindExcursion+".") {
		return TableCauses
	}
	return "figures"
}
