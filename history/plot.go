package history

import (
	"bytes"
	"fmt"
	"image/color"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/internal/mdtext"
)

// Plot draws the trend to path (.png or .svg): every value of every version as a dot, each
// version's median joined by a line, and a dashed red line before each change point.
func (t *Trend) Plot(path string) error {
	ext := strings.TrimPrefix(filepath.Ext(path), ".")
	if ext != "png" && ext != "svg" {
		return fmt.Errorf("plot %s: want a .png or .svg file", path)
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s across engine versions (%s order)", mdtext.Plain(t.Label), mdtext.Plain(t.Order))
	p.Y.Label.Text = fmt.Sprintf("%s (%s)", mdtext.Plain(t.Label), mdtext.Plain(t.Unit))
	p.X.Label.Text = "engine version"
	var dots, meds plotter.XYs
	labels := make([]string, len(t.Versions))
	for i, v := range t.Versions {
		labels[i] = mdtext.Plain(v.Label)
		for _, y := range v.Values {
			dots = append(dots, plotter.XY{X: float64(i), Y: y})
		}
		if v.Sample.N > 0 {
			meds = append(meds, plotter.XY{X: float64(i), Y: v.Sample.Median})
		}
	}
	sc, err := plotter.NewScatter(dots)
	if err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	sc.GlyphStyle.Color = color.NRGBA{R: 60, G: 90, B: 200, A: 150}
	sc.GlyphStyle.Radius = vg.Points(2)
	sc.GlyphStyle.Shape = draw.CircleGlyph{}
	line, pts, err := plotter.NewLinePoints(meds)
	if err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	line.Color, pts.Color = color.Black, color.Black
	p.Add(plotter.NewGrid(), sc, line, pts)
	p.Legend.Add("each value", sc)
	p.Legend.Add("version median", line, pts)
	lo, hi := 0.0, 1.0
	if len(dots) > 0 {
		lo, hi = dots[0].Y, dots[0].Y
		for _, d := range dots {
			lo, hi = min(lo, d.Y), max(hi, d.Y)
		}
	}
	for i, c := range t.Changes {
		x := float64(c.Version) - 0.5
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: lo}, {X: x, Y: hi}})
		if err != nil {
			return err
		}
		l.Color, l.Dashes = color.RGBA{R: 200, A: 255}, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		if i == 0 {
			p.Legend.Add(fmt.Sprintf("change point (p ≤ %.2g)", maxP(t.Changes)), l)
		}
	}
	// A few slow outliers (a loaded machine) would flatten the rest: a log scale when they span
	// more than a factor of ten.
	if lo > 0 && hi/lo > 10 {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		p.Y.Label.Text += ", log scale"
	}
	p.Legend.Top = true
	p.NominalX(labels...)
	w := max(6*vg.Inch, vg.Length(len(labels))*0.6*vg.Inch)
	wt, err := p.WriterTo(min(w, 16*vg.Inch), 4.5*vg.Inch, ext)
	if err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return atomicfile.WriteFile(path, buf.Bytes(), 0o644)
}

func maxP(cs []Change) float64 {
	m := 0.0
	for _, c := range cs {
		m = max(m, c.P)
	}
	return m
}
