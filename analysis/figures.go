package analysis

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/rig-dev/rig/stats"
)

// Figure is one figure a row type declares, once: its stable key (summary.json's pooled
// figures, the sweep's metric keys and plot files, rig compare), its label (report.md's column,
// the sweep's row), its unit, which way is better, and whether it is a headline (tested against
// the baseline and plotted against each axis). MeanCI pools it as mean ± stdev with its 95 % CI
// (a gap that varies run to run around a timeout) rather than median [min–max].
type Figure struct {
	Key      string
	Label    string
	Unit     string
	Dir      stats.Direction
	Headline bool
	MeanCI   bool
}

// RowFigure is a Figure read from one row of type R; ok is false where the row has none.
type RowFigure[R any] struct {
	Figure
	Get func(R) (v float64, ok bool)
}

// Values reads f from every row that has it.
func (f RowFigure[R]) Values(rows []R) []float64 {
	var out []float64
	for _, r := range rows {
		if v, ok := f.Get(r); ok {
			out = append(out, v)
		}
	}
	return out
}

// ms reads an optional figure in milliseconds.
func ms[R any](get func(R) *float64) func(R) (float64, bool) {
	return func(r R) (float64, bool) {
		if p := get(r); p != nil {
			return *p, true
		}
		return 0, false
	}
}

// Pooled is one run's rows pooled, figure by figure, in the order the row type declares them:
// summary.json writes it as an object keyed "<key>_<unit>".
type Pooled []PooledFigure

// PooledFigure is one figure pooled over a run's rows.
type PooledFigure struct {
	Figure
	stats.Sample
}

// pool describes every figure of figs over rows.
func pool[R any](figs []RowFigure[R], rows []R) Pooled {
	out := make(Pooled, 0, len(figs))
	for _, f := range figs {
		out = append(out, PooledFigure{Figure: f.Figure, Sample: stats.Describe(f.Values(rows))})
	}
	return out
}

func (p PooledFigure) name() string {
	if p.Unit == "" {
		return p.Key
	}
	return p.Key + "_" + p.Unit
}

// MarshalJSON writes the figures in their declared order.
func (p Pooled) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range p {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.name())
		v, err := json.Marshal(f.Sample)
		if err != nil {
			return nil, fmt.Errorf("pooled %s: %w", f.Key, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads pooled figures back by name, against the declared figures of failovers
// (the one row type pooled in summary.json); a name it does not declare is kept as a figure of
// its own, in name order.
func (p *Pooled) UnmarshalJSON(b []byte) error {
	var m map[string]stats.Sample
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*p = (*p)[:0]
	for _, f := range FailoverFigures {
		pf := PooledFigure{Figure: f.Figure}
		if s, ok := m[pf.name()]; ok {
			pf.Sample = s
			*p = append(*p, pf)
			delete(m, pf.name())
		}
	}
	for _, k := range sortedKeys(m) {
		*p = append(*p, PooledFigure{Figure: Figure{Key: k}, Sample: m[k]})
	}
	return nil
}

// Get is the pooled figure of key.
func (p Pooled) Get(key string) (stats.Sample, bool) {
	for _, f := range p {
		if f.Key == key {
			return f.Sample, true
		}
	}
	return stats.Sample{}, false
}
