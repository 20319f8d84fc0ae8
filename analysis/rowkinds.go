package analysis

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/stats"
)

// Row kinds of analysis's own: the name a row type's figures go by in summary.json's pooled
// figures, and the sweep table and metric-key prefix they make there; the listed excursions' is
// KindExcursion. The rows of the windows kinds declare their events to open are named by their
// shapes (actions.Shape: shapeKinds).
const (
	// The disk model's forces (and the engine's own) per snapshot window and node, and per node
	// over the load.
	KindForces     = "forces"
	KindNodeForces = "node_forces"
	// The load generator in each fault's window, each node's pressure stalls and GC pauses.
	KindClientFault  = "client_fault"
	KindHostPressure = "host_pressure"
	KindGC           = "gc"
)

// rowKind is a row type whose rows summary.json pools figure by figure (Summary.RowPooled) and
// the sweep tables (RowKinds).
type rowKind struct {
	name, title, note string
	figures           func() []Figure
	values            func(s *Summary, i int) []float64 // the i-th figure's values over s's rows
	pool              func(s *Summary) Pooled           // the figures the run's rows have; nil: none
}

// kind declares a row kind by its name, its sweep table's title and note, its figure list (read
// when used, so a list extended later counts) and its rows in a Summary.
func kind[R any](name, title, note string, figs *[]RowFigure[R], rows func(*Summary) []R) rowKind {
	return rowKind{
		name: name, title: title, note: note,
		figures: func() []Figure {
			out := make([]Figure, len(*figs))
			for i, f := range *figs {
				out[i] = f.Figure
			}
			return out
		},
		values: func(s *Summary, i int) []float64 { return (*figs)[i].Values(rows(s)) },
		pool: func(s *Summary) Pooled {
			var out Pooled
			for _, f := range pool(*figs, rows(s)) {
				if f.N > 0 {
					out = append(out, f)
				}
			}
			return out
		},
	}
}

// shapeKinds are the row kinds of the window shapes kinds declare their events to open
// (actions.Shape): what the analysis measures of each such window, whichever kind's event opened
// it, named by its shape.
var shapeKinds = map[actions.Shape]rowKind{
	actions.ShapeSnapshot: kind(string(actions.ShapeSnapshot), "Snapshots", "take, persisted and client pause over the warm snapshots of every round; normal p50 one value per run",
		&SnapshotFigures, func(s *Summary) []SnapshotRow { return s.Snapshots }),
	actions.ShapeRestart: kind(string(actions.ShapeRestart), "Restarts", "one value per restart of every round",
		&RestartFigures, func(s *Summary) []RestartRow { return s.Restarts }),
	actions.ShapeStepDown: kind(string(actions.ShapeStepDown), "Step-downs", "one value per step-down of every round: mean ± stdev [min–max] n, 95 % CI of the mean",
		&StepDownFigures, func(s *Summary) []StepDownRow { return s.StepDowns }),
	actions.ShapeFailover: kind(string(actions.ShapeFailover), "Failovers", "one value per step-down or kill of the leader of every round (detection, election, client gap, back to normal: analysis/failover.go): mean ± stdev [min–max] n, 95 % CI of the mean",
		&FailoverFigures, func(s *Summary) []FailoverRow { return s.Failovers }),
	actions.ShapeBurst: kind(string(actions.ShapeBurst), "Micro-bursts", "one value per burst of every round (absorption and worst message only for bursts with an answer; for UDP bursts they, the peak and p99 at the receiver, the NAKs and the verdict are the receiver's); UDP errors over the run one value per run",
		&BurstFigures, func(s *Summary) []BurstRow { return s.Bursts }),
}

// shapedKinds are shapeKinds in the shapes' order (actions.AllShapes).
func shapedKinds() []rowKind {
	out := make([]rowKind, len(actions.AllShapes))
	for i, sh := range actions.AllShapes {
		k, ok := shapeKinds[sh]
		if !ok {
			panic("analysis: no rows measured of the window shape " + string(sh))
		}
		out[i] = k
	}
	return out
}

// rowKinds are the pooled row kinds, in the sweep report's order of its tables: the shapes' and
// then analysis's own. A new row kind is its entry here, which summary.json's pooled figures, the
// sweep's table and its metrics ("<kind>.<figure>") take.
var rowKinds = append(shapedKinds(), []rowKind{
	kind(KindForces, "Disk forces per snapshot window", "one value per snapshot window and node with a disk model of every round: the model's fsyncs, the bytes they flushed and their time; the engine's own forces and the step from take to persisted where it recorded them",
		&SnapshotForceFigures, SnapshotForceRows),
	kind(KindNodeForces, "Disk forces per node", "one value per node with a disk model of every round: its fsyncs over the load, in snapshot windows and outside them",
		&NodeForceFigures, NodeForceRows),
	kind(KindClientFault, "Load generator through faults", "one value per fault window of every round: the load generator's dials, reconnects, resends and held probes from the fault to the next or the end of load",
		&ClientFaultFigures, ClientFaultRows),
	kind(KindHostPressure, "Host pressure", "one value per node (the machine once on the local target) of every round: the share of the measured window its CPUs, I/O and memory were stalled on",
		&HostPressureFigures, func(s *Summary) []HostPressure { return s.HostPressure }),
	kind(KindGC, "GC pauses", "one value per node of every round: its stop-the-world pauses from its GC log",
		&GCFigures, func(s *Summary) []GCRow { return s.GCPauses }),
	kind(KindExcursion, "Latency excursions", "one value per listed excursion of every round: its peak, its slow probes and lost ones, and the share of it the named causes cover",
		&ExcursionFigures, ExcursionRows),
}...)

// RowKind is a row kind as the sweep tables it: its name (the table's, and its metrics' key
// prefix "<name>."), its table's title and note, and its declared figures with their values.
type RowKind struct {
	Name, Title, Note string
	Figures           []Figure
	// Values are the i-th figure's values over the rows of s.
	Values func(s *Summary, i int) []float64
}

// RowKinds are every row kind, the declared list's then the kinds' with rows of their own
// (actions.Rower), with their figures as declared now.
func RowKinds() []RowKind {
	var out []RowKind
	for _, k := range allRowKinds() {
		out = append(out, RowKind{Name: k.name, Title: k.title, Note: k.note, Figures: k.figures(), Values: k.values})
	}
	return out
}

// allRowKinds are the declared row kinds and the Rower kinds'.
func allRowKinds() []rowKind { return slices.Concat(rowKinds, rowerKinds()) }

// ExcursionRows are the run's listed excursions, the rows of ExcursionFigures.
func ExcursionRows(s *Summary) []Excursion {
	if s.Excursions == nil {
		return nil
	}
	return s.Excursions.List
}

// kindFigures are the declared figures of the row kind named name (none for a name it does
// not know: its pooled figures are read back by name alone).
func kindFigures(name string) []Figure {
	for _, k := range allRowKinds() {
		if k.name == name {
			return k.figures()
		}
	}
	return nil
}

// RowPooled is each row kind's rows pooled figure by figure, by kind name (summary.json's
// "pooled"); a figure no row has (a UDP figure of TCP bursts), and a kind with none, are absent.
type RowPooled map[string]Pooled

// poolRows pools every kind's rows of s.
func poolRows(s *Summary) RowPooled {
	out := RowPooled{}
	for _, k := range allRowKinds() {
		if p := k.pool(s); p != nil {
			out[k.name] = p
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// UnmarshalJSON reads each kind's pooled figures back against its declared figures.
func (rp *RowPooled) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*rp = RowPooled{}
	for name, r := range raw {
		var p Pooled
		if err := p.decode(r, kindFigures(name)); err != nil {
			return fmt.Errorf("pooled %s: %w", name, err)
		}
		(*rp)[name] = p
	}
	return nil
}

// SnapshotFigures are a snapshot's figures. The takes are the leader's (the book clients write
// to), the longest reported where the leader's is missing; report.md shows every node's take
// instead, and persisted is in summary.json per node.
var SnapshotFigures = []RowFigure[SnapshotRow]{
	{Figure: Figure{Key: "take", Label: "take (leader)", Unit: "ms", Dir: stats.LowerIsBetter, Headline: true}, NoColumn: true,
		Get: func(r SnapshotRow) (float64, bool) { return leaderTake(r.TakeMs, r.Leader) }},
	{Figure: Figure{Key: "persisted", Label: "persisted (leader)", Unit: "ms", Dir: stats.LowerIsBetter}, NoColumn: true,
		Get: func(r SnapshotRow) (float64, bool) { return leaderTake(r.PersistedMs, r.Leader) }},
	{Figure: Figure{Key: "client_pause", Label: "client pause", Unit: "ms", Dir: stats.LowerIsBetter, Headline: true},
		Get: ms(func(r SnapshotRow) *float64 { return r.ClientPauseMs }),
		Marks: func(r SnapshotRow) (before, after string) {
			if r.PauseLowerBound {
				before = "≥ "
			}
			if r.PauseLowerBound || r.WindowLost > 0 {
				after = fmt.Sprintf(" (%d lost)", r.WindowLost)
			}
			if r.UnplannedLeaderChange {
				after += " ⚠ unplanned leader change"
			}
			return before, after
		},
		None: func(SnapshotRow) string { return "— (no probe)" }},
}

// leaderTake is the leader's time of a snapshot, or the longest reported where the leader's
// is missing.
func leaderTake(m map[string]float64, leader string) (float64, bool) {
	if v, ok := m[leader]; ok {
		return v, true
	}
	best, found := 0.0, false
	for _, v := range m {
		if !found || v > best {
			best, found = v, true
		}
	}
	return best, found
}

// LatencyFigures are the figures of a window's probes (Stats): report.md's latency tables (every
// probe, the windows around restarts) and the sweep's. The tail percentiles need their n.
var LatencyFigures = []RowFigure[Stats]{
	{Figure: Figure{Key: "p50", Label: "p50", Unit: "ms", Dir: stats.LowerIsBetter, Headline: true}, Get: usFig(func(s Stats) *float64 { return s.P50Us })},
	{Figure: Figure{Key: "p90", Label: "p90", Unit: "ms", Dir: stats.LowerIsBetter}, Get: usFig(func(s Stats) *float64 { return s.P90Us }), None: tailNone(minNForP90)},
	{Figure: Figure{Key: "p99", Label: "p99", Unit: "ms", Dir: stats.LowerIsBetter, Headline: true}, Get: usFig(func(s Stats) *float64 { return s.P99Us }), None: tailNone(minNForP99)},
	{Figure: Figure{Key: "p999", Label: "p99.9", Unit: "ms", Dir: stats.LowerIsBetter}, Get: usFig(func(s Stats) *float64 { return s.P999Us }), None: tailNone(minNForP999)},
	{Figure: Figure{Key: "max", Label: "max", Unit: "ms", Dir: stats.LowerIsBetter}, Get: usFig(func(s Stats) *float64 { return s.MaxUs })},
	{Figure: Figure{Key: "lost", Label: "lost", Unit: "probes", Dir: stats.LowerIsBetter}, Plain: true, Get: func(s Stats) (float64, bool) { return float64(s.Lost), true }},
}

// usFig reads an optional latency in µs as milliseconds.
func usFig(get func(Stats) *float64) func(Stats) (float64, bool) {
	f := ms(get)
	return func(s Stats) (float64, bool) {
		v, ok := f(s)
		return v / 1e3, ok
	}
}

// tailNone says why a tail percentile is not shown: no probe, or too few for it.
func tailNone(minN int) func(Stats) string {
	return func(s Stats) string {
		if s.N == 0 {
			return "—"
		}
		return fmt.Sprintf("n/a (n<%d)", minN)
	}
}

// OverheadFigures are what a run costs besides its timeline, one value per run: its wall time
// beyond the playbook's duration, and each stage's (report.md's stages table shows those).
var OverheadFigures = append([]RowFigure[*Summary]{
	{Figure: Figure{Key: "overhead", Label: "overhead (all but the timeline)", Unit: "s", Dir: stats.LowerIsBetter}, Get: ms(func(s *Summary) *float64 { return s.OverheadS })},
}, stageFigures("start", "preload", "load", "finish")...)

func stageFigures(names ...string) []RowFigure[*Summary] {
	out := make([]RowFigure[*Summary], 0, len(names))
	for _, st := range names {
		out = append(out, RowFigure[*Summary]{Figure: Figure{Key: "stage." + st, Label: "stage " + st, Unit: "s", Dir: stats.LowerIsBetter}, NoColumn: true,
			Get: func(s *Summary) (float64, bool) {
				for _, x := range s.Stages {
					if x.Name == st && x.ActualS != nil {
						return *x.ActualS, true
					}
				}
				return 0, false
			}})
	}
	return out
}
