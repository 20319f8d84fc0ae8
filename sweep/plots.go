package sweep

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/stats"
)

// axisNumber reads a matrix value as a number for the x axis: plain numbers, counts (1M),
// sizes (16MiB), durations (in seconds). ok is false for anything else (then the axis is
// nominal, one tick per value in matrix order).
func axisNumber(s string) (float64, bool) {
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		return v, true
	}
	if v, err := units.ParseCount(s); err == nil {
		return float64(v), true
	}
	if v, err := units.ParseSize(s); err == nil {
		return float64(v), true
	}
	if v, err := units.ParseDuration(s); err == nil {
		return v.Seconds(), true
	}
	return 0, false
}

type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

// writePlots draws every headline figure against every axis with more than one value, one line
// per combination of the other axes, as PNG and SVG under plots/.
func writePlots(dir string, r *Report) ([]string, error) {
	sw := r.Set.Sweep
	if sw == nil {
		return nil, nil
	}
	var out []string
	var errs []error
	for _, m := range r.Metrics {
		if !m.Headline {
			continue
		}
		for ai, ax := range sw.Axes {
			if len(ax.Values) < 2 {
				continue
			}
			p, ok, err := r.plotAgainst(m, ai)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s against %s: %w", m.Key, ax.Key, err))
				continue
			}
			if !ok {
				continue
			}
			base := filepath.Join(PlotsDir, strings.ReplaceAll(m.Key, ".", "_")+"-vs-"+strings.ReplaceAll(ax.Key, ".", "_"))
			for _, ext := range []string{"png", "svg"} {
				rel := base + "." + ext
				if err := save(p, filepath.Join(dir, rel), ext); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", rel, err))
					continue
				}
				out = append(out, rel)
			}
		}
	}
	return out, errors.Join(errs...)
}

// plotAgainst draws metric m against axis ai; ok is false when no combination has a value.
func (r *Report) plotAgainst(m Metric, ai int) (*plot.Plot, bool, error) {
	sw := r.Set.Sweep
	ax := sw.Axes[ai]
	numeric := true
	xs := make([]float64, len(ax.Values))
	for i, v := range ax.Values {
		x, ok := axisNumber(v)
		xs[i], numeric = x, numeric && ok
	}
	if !numeric {
		for i := range xs {
			xs[i] = float64(i)
		}
	}
	// Lines: the other axes' values, in the order the plan met them.
	type line struct {
		label string
		pts   map[int]stats.Sample // by value index of the axis
	}
	var lines []*line
	byLabel := map[string]*line{}
	any := false
	for _, g := range r.Groups {
		vi := indexOf(ax.Values, g.Settings[ax.Key])
		if vi < 0 {
			continue
		}
		others := map[string]string{}
		for k, v := range g.Settings {
			if k != ax.Key {
				others[k] = v
			}
		}
		var rest []Axis
		for j, a := range sw.Axes {
			if j != ai {
				rest = append(rest, a)
			}
		}
		l := Label(rest, others)
		ln := byLabel[l]
		if ln == nil {
			ln = &line{label: l, pts: map[int]stats.Sample{}}
			byLabel[l] = ln
			lines = append(lines, ln)
		}
		if s := stats.Describe(g.Values(m)); s.N > 0 {
			ln.pts[vi] = s
			any = true
		}
	}
	if !any {
		return nil, false, nil
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: %s against %s", sw.Playbook, m.Label, ax.Key)
	p.X.Label.Text = ax.Key
	p.Y.Label.Text = fmt.Sprintf("%s (%s)", m.Label, m.Unit)
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = true, true
	if numeric && logScale(xs) {
		p.X.Scale = plot.LogScale{}
	}
	var ticks []plot.Tick
	for i, v := range ax.Values {
		ticks = append(ticks, plot.Tick{Value: xs[i], Label: v})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	for li, ln := range lines {
		idx := make([]int, 0, len(ln.pts))
		for i := range ln.pts {
			idx = append(idx, i)
		}
		sort.Ints(idx)
		var ep errPoints
		for _, i := range idx {
			s := ln.pts[i]
			ep.XYs = append(ep.XYs, plotter.XY{X: xs[i], Y: s.Median})
			ep.YErrors = append(ep.YErrors, struct{ Low, High float64 }{s.Median - s.Min, s.Max - s.Median})
		}
		lp, sp, err := plotter.NewLinePoints(ep.XYs)
		if err != nil {
			return nil, false, err
		}
		c := plotutil.Color(li)
		lp.Color, sp.Color = c, c
		sp.Shape = plotutil.Shape(li)
		eb, err := plotter.NewYErrorBars(ep)
		if err != nil {
			return nil, false, err
		}
		eb.Color = c
		p.Add(lp, sp, eb)
		p.Legend.Add(ln.label, lp, sp)
	}
	// Keep the end points off the frame, where the legend and the axes would hide them.
	if _, isLog := p.X.Scale.(plot.LogScale); isLog {
		p.X.Min, p.X.Max = p.X.Min/1.3, p.X.Max*1.3
	} else {
		pad := (p.X.Max - p.X.Min) * 0.06
		p.X.Min, p.X.Max = p.X.Min-pad, p.X.Max+pad
	}
	p.Y.Max *= 1.15
	return p, true, nil
}

// logScale: positive values spanning two decades or more (book sizes) read better on a log axis.
func logScale(xs []float64) bool {
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		if x <= 0 {
			return false
		}
		lo, hi = min(lo, x), max(hi, x)
	}
	return hi/lo >= 100
}

func indexOf(vals []string, v string) int {
	for i, x := range vals {
		if x == v {
			return i
		}
	}
	return -1
}

func save(p *plot.Plot, path, format string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	wt, err := p.WriterTo(8*vg.Inch, 5*vg.Inch, format)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, buf.Bytes(), 0o644)
}
