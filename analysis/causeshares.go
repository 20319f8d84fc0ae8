package analysis

import (
	"fmt"
	"slices"

	"github.com/rig-dev/rig/stats"
)

// The cause figures of sweeps and rig compare: per run, the time each cause took of every
// interval of a kind (the windows of a kind, or the listed latency excursions) and the time left
// unexplained, as shares of those intervals' total length. Pooled per run, so runs with more or
// longer windows or excursions weigh no more than the others.

// KindExcursion is the latency excursions among the kinds of the cause figures, beside the
// WindowKinds.
const KindExcursion = "excursion"

// CauseID is one cause of one source (CauseTotal's).
type CauseID struct{ Source, Cause string }

// IntervalTime is one run's time over every interval of one kind.
type IntervalTime struct {
	Kind     string
	Sources  []string // every source any of the intervals had
	LengthMs float64
	// UnexplainedMs: a window's time no row covers (WhereTime.UnexplainedMs); an excursion's
	// time its named causes do not cover (its length less CoveredMs).
	UnexplainedMs float64
	Totals        map[CauseID]float64 // ms, over every node and thread
}

// IntervalTimes pools the run's windows by kind, then its listed excursions, in that order; a
// kind the run has none of is left out.
func (s *Summary) IntervalTimes() []IntervalTime {
	byKind := map[string]*IntervalTime{}
	var order []string
	add := func(kind string, length, unexplained float64, w WhereTime) {
		t := byKind[kind]
		if t == nil {
			t = &IntervalTime{Kind: kind, Totals: map[CauseID]float64{}}
			byKind[kind] = t
			order = append(order, kind)
		}
		t.LengthMs += length
		t.UnexplainedMs += unexplained
		for _, src := range w.Sources {
			if !slices.Contains(t.Sources, src) {
				t.Sources = append(t.Sources, src)
			}
		}
		for _, c := range w.Totals {
			t.Totals[CauseID{c.Source, c.Cause}] += c.TotalMs
		}
	}
	for _, k := range WindowKinds {
		for _, w := range s.Windows {
			if w.Kind == k {
				add(string(k), w.LengthMs(), w.UnexplainedMs, w.WhereTime)
			}
		}
	}
	if s.Excursions != nil {
		for _, e := range s.Excursions.List {
			var w WhereTime
			if e.Where != nil {
				w = *e.Where
			}
			add(KindExcursion, e.LengthMs(), max(0, e.LengthMs()-e.CoveredMs), w)
		}
	}
	out := make([]IntervalTime, 0, len(order))
	for _, k := range order {
		out = append(out, *byKind[k])
	}
	return out
}

// Share is the figure of id (the zero CauseID: the unexplained time) over the intervals' length,
// in percent; false where the run did not measure the cause's source (not measured, not 0).
func (t IntervalTime) Share(id CauseID) (float64, bool) {
	if t.LengthMs <= 0 {
		return 0, false
	}
	if id == (CauseID{}) {
		return 100 * t.UnexplainedMs / t.LengthMs, true
	}
	if !slices.Contains(t.Sources, id.Source) {
		return 0, false
	}
	return 100 * t.Totals[id] / t.LengthMs, true
}

// CauseKeyPrefix begins every cause figure's key (ShareFigure), so a reader holding only keys
// (the results index) knows the cause figures' family.
const CauseKeyPrefix = "cause."

// ShareFigure declares the cause figure of id over kind: key cause.<kind>.<source>.<cause>, or
// cause.<kind>.unexplained for the zero CauseID.
func ShareFigure(kind string, id CauseID) Figure {
	if id == (CauseID{}) {
		return Figure{Key: CauseKeyPrefix + kind + ".unexplained", Label: kind + ": unexplained", Unit: "%", Dir: stats.LowerIsBetter}
	}
	return Figure{Key: CauseKeyPrefix + kind + "." + id.Source + "." + id.Cause, Label: fmt.Sprintf("%s: %s (%s)", kind, id.Cause, id.Source), Unit: "%", Dir: stats.LowerIsBetter}
}
