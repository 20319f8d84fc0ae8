package sweep

import (
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/stats"
)

// Tables of the sweep report, one per experiment kind; a table is shown when any run has
// figures for it.
const (
	TableLatency  = "latency"
	TableSnapshot = "snapshot"
	TableRestart  = "restart"
	TableStepDown = "step_down"
	TableFailover = "failover"
	TableBurst    = "burst"
	TableOverhead = "overhead"
	TableCauses   = "causes"
)

// Metric is one figure read from every run's summary.json. A run can give several values (one
// per warm snapshot, per restart, per step-down): they pool with the other rounds' values, and
// n counts them all.
type Metric struct {
	Key   string // stable name, used in file names and `rig compare` output
	Table string
	Label string
	Unit  string
	Dir   stats.Direction
	// Headline metrics are tested against the baseline and plotted against each axis.
	Headline bool
	// MeanCI: the cell is mean ± stdev with its 95 % CI (for a gap that varies run to run around
	// a timeout); otherwise median [min–max].
	MeanCI bool
	Values func(r *RunData) []float64
}

func us2ms(p *float64) []float64 {
	if p == nil {
		return nil
	}
	return []float64{*p / 1e3}
}

func ptr(p *float64) []float64 {
	if p == nil {
		return nil
	}
	return []float64{*p}
}

// latencyMetrics gives p50 … max and lost of one Stats, chosen by get.
func latencyMetrics(table, prefix, label string, headline bool, get func(r *RunData) []analysis.Stats) []Metric {
	pct := func(key, name string, f func(analysis.Stats) *float64, hl bool) Metric {
		return Metric{Key: prefix + key, Table: table, Label: label + name, Unit: "ms", Dir: stats.LowerIsBetter, Headline: hl,
			Values: func(r *RunData) []float64 {
				var v []float64
				for _, st := range get(r) {
					v = append(v, us2ms(f(st))...)
				}
				return v
			}}
	}
	return []Metric{
		pct("p50", "p50", func(s analysis.Stats) *float64 { return s.P50Us }, headline),
		pct("p90", "p90", func(s analysis.Stats) *float64 { return s.P90Us }, false),
		pct("p99", "p99", func(s analysis.Stats) *float64 { return s.P99Us }, headline),
		pct("p999", "p99.9", func(s analysis.Stats) *float64 { return s.P999Us }, false),
		pct("max", "max", func(s analysis.Stats) *float64 { return s.MaxUs }, false),
		{Key: prefix + "lost", Table: table, Label: label + "lost", Unit: "probes", Dir: stats.LowerIsBetter,
			Values: func(r *RunData) []float64 {
				var v []float64
				for _, st := range get(r) {
					v = append(v, float64(st.Lost))
				}
				return v
			}},
	}
}

// warm returns the run's snapshots from its first warm one on.
func (r *RunData) warm() []analysis.SnapshotRow {
	if r.Summary == nil || len(r.Summary.Snapshots) < r.warmFrom {
		return nil
	}
	return r.Summary.Snapshots[r.warmFrom-1:]
}

// takeOf is the leader's take of a snapshot (the one that pauses the book clients write to), or
// the longest reported when the leader's is missing.
func takeOf(row analysis.SnapshotRow, m map[string]float64) []float64 {
	if v, ok := m[row.Leader]; ok {
		return []float64{v}
	}
	best, found := 0.0, false
	for _, v := range m {
		if !found || v > best {
			best, found = v, true
		}
	}
	if !found {
		return nil
	}
	return []float64{best}
}

// Metrics lists every figure of the sweep report, table by table. Restart phases are listed
// for the phases the runs reported.
func Metrics(runs []*RunData) []Metric {
	one := func(f func(s *analysis.Summary) analysis.Stats) func(r *RunData) []analysis.Stats {
		return func(r *RunData) []analysis.Stats { return []analysis.Stats{f(r.Summary)} }
	}
	ms := latencyMetrics(TableLatency, "probes.", "", true, one(func(s *analysis.Summary) analysis.Stats { return s.Probes }))
	ms = append(ms, Metric{Key: "leader.unplanned", Table: TableLatency, Label: "unplanned leader changes", Unit: "count", Dir: stats.LowerIsBetter,
		Values: func(r *RunData) []float64 { return []float64{float64(len(r.Summary.UnplannedLeaderChanges))} }})
	ms = append(ms, Metric{Key: "probes.rate", Table: TableLatency, Label: "probe rate", Unit: "/s", Dir: stats.HigherIsBetter,
		Values: func(r *RunData) []float64 {
			if r.Summary.Settings.ProbeRate == 0 {
				return nil
			}
			return []float64{r.Summary.Settings.ProbeRate}
		}})

	ms = append(ms,
		Metric{Key: "snapshot.take", Table: TableSnapshot, Label: "warm take (leader)", Unit: "ms", Dir: stats.LowerIsBetter, Headline: true,
			Values: func(r *RunData) []float64 {
				var v []float64
				for _, s := range r.warm() {
					v = append(v, takeOf(s, s.TakeMs)...)
				}
				return v
			}},
		Metric{Key: "snapshot.persisted", Table: TableSnapshot, Label: "warm persisted (leader)", Unit: "ms", Dir: stats.LowerIsBetter,
			Values: func(r *RunData) []float64 {
				var v []float64
				for _, s := range r.warm() {
					v = append(v, takeOf(s, s.PersistedMs)...)
				}
				return v
			}},
		Metric{Key: "snapshot.client_pause", Table: TableSnapshot, Label: "warm client pause", Unit: "ms", Dir: stats.LowerIsBetter, Headline: true,
			Values: func(r *RunData) []float64 {
				var v []float64
				for _, s := range r.warm() {
					v = append(v, ptr(s.ClientPauseMs)...)
				}
				return v
			}},
		Metric{Key: "snapshot.first_take", Table: TableSnapshot, Label: "first take (cold)", Unit: "ms", Dir: stats.LowerIsBetter,
			Values: func(r *RunData) []float64 {
				var v []float64
				for i, s := range r.Summary.Snapshots {
					if i+1 < r.warmFrom {
						v = append(v, takeOf(s, s.TakeMs)...)
					}
				}
				return v
			}},
		Metric{Key: "normal.p50", Table: TableSnapshot, Label: "normal p50", Unit: "ms", Dir: stats.LowerIsBetter, Headline: true,
			Values: func(r *RunData) []float64 {
				if len(r.Summary.Snapshots) == 0 {
					return nil
				}
				return us2ms(r.Summary.Normal.P50Us)
			}},
	)

	ms = append(ms, rowMetrics(TableRestart, "restart.", analysis.RestartFigures, func(s *analysis.Summary) []analysis.RestartRow { return s.Restarts })...)
	for _, ph := range phases(runs) {
		ms = append(ms, Metric{Key: "restart.phase." + ph, Table: TableRestart, Label: "phase " + ph, Unit: "ms", Dir: stats.LowerIsBetter,
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
	ms = append(ms, latencyMetrics(TableRestart, "restart.all_up.", "all up ", false, window(func(rs analysis.RestartRow) *analysis.Window { return &rs.Windows.AllUp }))...)
	ms = append(ms, latencyMetrics(TableRestart, "restart.one_down.", "one down ", false, window(func(rs analysis.RestartRow) *analysis.Window { return &rs.Windows.OneDown }))...)
	ms = append(ms, latencyMetrics(TableRestart, "restart.rejoining.", "rejoining ", false, window(func(rs analysis.RestartRow) *analysis.Window { return rs.Windows.Rejoining }))...)

	ms = append(ms, rowMetrics(TableStepDown, "step_down.", analysis.StepDownFigures, func(s *analysis.Summary) []analysis.StepDownRow { return s.StepDowns })...)
	// Failovers (analysis/failover.go): every step_down and kill of the leader as an event, one
	// value per fault of every round.
	ms = append(ms, rowMetrics(TableFailover, "failover.", analysis.FailoverFigures, func(s *analysis.Summary) []analysis.FailoverRow { return s.Failovers })...)

	ms = append(ms, rowMetrics(TableBurst, "burst.", analysis.BurstFigures, func(s *analysis.Summary) []analysis.BurstRow { return s.Bursts })...)
	ms = append(ms,
		Metric{Key: "burst.rcvbuf_errors", Table: TableBurst, Label: "UDP rcvbuf errors", Unit: "datagrams", Dir: stats.LowerIsBetter,
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
	ms = append(ms, causeMetrics(runs)...)
	// What a run costs besides its timeline, and where that went (the runner's stages).
	ms = append(ms, Metric{Key: "overhead", Table: TableOverhead, Label: "overhead (all but the timeline)", Unit: "s", Dir: stats.LowerIsBetter,
		Values: func(r *RunData) []float64 { return ptr(r.Summary.OverheadS) }})
	for _, st := range []string{"start", "preload", "load", "finish"} {
		ms = append(ms, Metric{Key: "stage." + st, Table: TableOverhead, Label: "stage " + st, Unit: "s", Dir: stats.LowerIsBetter,
			Values: func(r *RunData) []float64 {
				for _, s := range r.Summary.Stages {
					if s.Name == st {
						return ptr(s.ActualS)
					}
				}
				return nil
			}})
	}
	return ms
}

// rowMetrics are the figures a row type declares (analysis.RowFigure), as metrics of table: one
// value per row of every round.
func rowMetrics[R any](table, prefix string, figs []analysis.RowFigure[R], rows func(*analysis.Summary) []R) []Metric {
	out := make([]Metric, 0, len(figs))
	for _, f := range figs {
		out = append(out, Metric{Key: prefix + f.Key, Table: table, Label: f.Label, Unit: f.Unit, Dir: f.Dir, Headline: f.Headline, MeanCI: f.MeanCI,
			Values: func(r *RunData) []float64 { return f.Values(rows(r.Summary)) }})
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
		out = append(out, Metric{Key: f.Key, Table: TableCauses, Label: f.Label, Unit: f.Unit, Dir: f.Dir,
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
// are one of their own, so their many verdicts do not dilute the others'.
func (m Metric) Family() string { return FamilyOf(m.Key) }

// FamilyOf is the false-discovery family of the figure of key (Metric.Family), for a reader holding
// only keys (the results index).
func FamilyOf(key string) string {
	if strings.HasPrefix(key, analysis.CauseKeyPrefix) {
		return TableCauses
	}
	return "figures"
}
