package analysis

import (
	"strings"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/internal/mdtext"
)

// KindRow is one row of a kind with rows of its own (actions.Rower): its window, from its start
// event (and node) to its end event, and its values by the kind's figure keys.
type KindRow struct {
	AtS    float64            `json:"at_s"`
	Node   string             `json:"node,omitempty"`
	ToS    *float64           `json:"to_s,omitempty"` // absent: no end event was recorded
	Values map[string]float64 `json:"values"`
}

// rowers are the registered kinds with rows of their own, in registration order.
func rowers() (names []string, rs []actions.Rower) {
	for _, name := range actions.Names() {
		s, _ := actions.New(name)
		if r, ok := s.(actions.Rower); ok {
			names, rs = append(names, name), append(rs, r)
		}
	}
	return names, rs
}

// rowerKinds are the row kinds of the kinds with rows of their own, for summary.json's pooled
// figures.
func rowerKinds() []rowKind {
	names, rs := rowers()
	out := make([]rowKind, len(names))
	for i, name := range names {
		figs := kindRowFigures(rs[i])
		out[i] = kind(name, name, "one value per "+name+" of every round", &figs, func(s *Summary) []KindRow { return s.KindRows[name] })
	}
	return out
}

// kindRowFigures are a Rower's declared figures as figures of its rows.
func kindRowFigures(r actions.Rower) []RowFigure[KindRow] {
	var out []RowFigure[KindRow]
	for _, f := range r.Figures() {
		out = append(out, RowFigure[KindRow]{
			Figure: Figure{Key: f.Key, Label: f.Label, Unit: f.Unit, Dir: f.Dir, Headline: f.Headline},
			Get: func(row KindRow) (float64, bool) {
				v, ok := row.Values[f.Key]
				return v, ok
			}})
	}
	return out
}

// kindRows builds every row of the kinds with rows of their own: one per window of their events.
func (d *runData) kindRows(s *Summary) {
	names, rs := rowers()
	for i, name := range names {
		for _, w := range actions.Windows(name, d.events) {
			row := KindRow{AtS: d.off(w.Start.T.UnixNano()), Node: w.Start.Node, Values: rs[i].Row(runView{d}, w)}
			if w.End != nil {
				row.ToS = valPtr(d.off(w.End.T.UnixNano()))
			}
			if row.Values == nil {
				row.Values = map[string]float64{}
			}
			if s.KindRows == nil {
				s.KindRows = map[string][]KindRow{}
			}
			s.KindRows[name] = append(s.KindRows[name], row)
		}
	}
}

// runView is the run as a kind's row builder reads it (actions.RunView).
type runView struct{ d *runData }

func (v runView) Offset(t time.Time) float64 { return v.d.off(t.UnixNano()) }
func (v runView) LoadEnd() time.Time         { return time.Unix(0, v.d.loadEnd) }

func (v runView) Probes(from, to time.Time) actions.ProbeFigures {
	st := v.d.windowStats(from.UnixNano(), to.UnixNano(), nil)
	ms := func(us *float64) *float64 {
		if us == nil {
			return nil
		}
		return valPtr(*us / 1e3)
	}
	return actions.ProbeFigures{N: st.N, Lost: st.Lost, P50Ms: ms(st.P50Us), P99Ms: ms(st.P99Us), MaxMs: ms(st.MaxUs)}
}

// kindRowsSection is a table per kind with rows of its own: its window and its declared figures,
// with the run's pooled figures under it.
func kindRowsSection(b *strings.Builder, s *Summary) {
	names, rs := rowers()
	for i, name := range names {
		rows := s.KindRows[name]
		if len(rows) == 0 {
			continue
		}
		b.WriteString("## " + mdtext.Inline(name) + "\n\n")
		writeTable(b, cols([]Column[KindRow]{
			numberCol[KindRow](),
			col("at", func(r KindRow) string { return fmtS(r.AtS) }),
			col("node", func(r KindRow) string { return orDash(r.Node) }),
			col("to", func(r KindRow) string {
				if r.ToS == nil {
					return "—"
				}
				return fmtS(*r.ToS)
			}),
		}, figureCols(kindRowFigures(rs[i]))), rows)
		writePooled(b, s.RowPooled[name])
		b.WriteString("\n")
	}
}
