package analysis

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// Plot files, relative to the run folder.
const (
	PlotLatency  = rundir.PlotsDir + "/latency.png"  // probe latency over time, with action markers
	PlotRestarts = rundir.PlotsDir + "/restarts.png" // each restart's phases, from relaunch to ready
	PlotNodes    = rundir.PlotsDir + "/nodes.png"    // every server node's phase over the run
)

const (
	plotDPI    = 96
	plotWidth  = 12 * vg.Inch
	legendRowH = 0.3 * vg.Inch
	// maxBuckets bounds the points of the latency plot: a 300K-probe run is drawn from at most
	// this many (p50, max) pairs, so drawing cost does not grow with the probe count.
	maxBuckets  = 2400
	minBucketNs = int64(100 * time.Millisecond)
)

var (
	colP50  = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colMax  = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colLost = color.RGBA{R: 0x99, G: 0x00, B: 0x00, A: 0xff}

	// ownMarkers colour the vertical markers of what the analysis finds itself; an action's
	// marker is its kind's (actions.EventKind.Marker).
	ownMarkers = map[string]color.RGBA{
		"ready":     {R: 0x10, G: 0x90, B: 0x30, A: 0xff},
		"warmup":    {R: 0x70, G: 0x70, B: 0x70, A: 0xff},
		"unplanned": {R: 0xff, G: 0x00, B: 0x80, A: 0xff},
	}
	// handOffMarker marks the hand-off plot's action, at 0.
	handOffMarker = color.RGBA{R: 0x80, G: 0x30, B: 0xa0, A: 0xff}
	markerOther   = color.RGBA{R: 0x50, G: 0x50, B: 0x50, A: 0xff}

	phaseColors = map[string]color.RGBA{
		engine.PhaseStarting:   {R: 0x9e, G: 0xb4, B: 0xd8, A: 0xff},
		engine.PhaseRestoring:  {R: 0xf0, G: 0x8c, B: 0x28, A: 0xff},
		engine.PhaseReplaying:  {R: 0xf2, G: 0xd0, B: 0x3c, A: 0xff},
		engine.PhaseCatchingUp: {R: 0x9a, G: 0x5c, B: 0xc6, A: 0xff},
		engine.PhaseReady:      {R: 0xa8, G: 0xdc, B: 0xa0, A: 0xff},
		phaseDown:              {R: 0x50, G: 0x50, B: 0x50, A: 0xff},
	}
	phaseOther = color.RGBA{R: 0xd0, G: 0xd0, B: 0xd0, A: 0xff}
	phaseOrder = []string{engine.PhaseStarting, engine.PhaseRestoring, engine.PhaseJoining, engine.PhaseReplaying, engine.PhaseCatchingUp, engine.PhaseReady, phaseDown}
)

// writePlots draws every plot the run's data supports and returns their paths relative to the
// run folder. One plot failing does not stop the others. Every plot is written inside the run
// folder (rundir.Folder): a plots folder that is a symlink leading out is refused, not followed.
func writePlots(runDir string, d *runData, s *Summary) ([]string, error) {
	run := rundir.Folder{Dir: runDir}
	type job struct {
		rel  string
		make func() (*plot.Plot, []legendItem, vg.Length, error)
	}
	var jobs []job
	if len(d.probes) > 0 {
		jobs = append(jobs, job{PlotLatency, func() (*plot.Plot, []legendItem, vg.Length, error) { return latencyPlot(d, s) }})
	}
	if slices.ContainsFunc(s.Restarts, func(r RestartRow) bool { return r.RelaunchS != nil }) {
		jobs = append(jobs, job{PlotRestarts, func() (*plot.Plot, []legendItem, vg.Length, error) { return restartPlot(s) }})
	}
	if len(d.nodes) > 0 && d.hasPhaseEvents() {
		jobs = append(jobs, job{PlotNodes, func() (*plot.Plot, []legendItem, vg.Length, error) { return nodesPlot(d, s) }})
	}
	if len(s.HandOffs) > 0 {
		jobs = append(jobs, job{PlotHandOff, func() (*plot.Plot, []legendItem, vg.Length, error) { return handOffPlot(s) }})
	}
	if series := d.diskSeries(); len(series) > 0 {
		jobs = append(jobs, job{PlotDisk, func() (*plot.Plot, []legendItem, vg.Length, error) { return diskPlot(d, s, series) }})
	}
	// A plot this data no longer supports must not survive from an earlier analysis.
	for _, rel := range []string{PlotLatency, PlotRestarts, PlotNodes, PlotDisk, PlotHandOff} {
		if !slices.ContainsFunc(jobs, func(j job) bool { return j.rel == rel }) {
			run.Remove(rel)
		}
	}
	var out []string
	var errs []error
	for _, j := range jobs {
		if err := drawPlot(run, j.rel, j.make); errors.Is(err, rundir.ErrOutside) {
			errs = append(errs, err) // names the file already
			continue
		} else if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", j.rel, err))
			continue
		}
		out = append(out, j.rel)
	}
	return out, errors.Join(errs...)
}

func (d *runData) timeAxisLabel() string {
	if d.loadStarted {
		return "seconds from load start"
	}
	return "seconds (the load never started: from the first record)"
}

func (d *runData) hasPhaseEvents() bool {
	for _, e := range d.events {
		if e.Phase != nil {
			return true
		}
	}
	return false
}

// latencyBucket is one time slice of the probe stream: the p50 and max latency (ms) of the
// probes sent in it, and whether any was lost.
type latencyBucket struct {
	t        float64 // middle of the slice, seconds from load start
	p50, max float64
	answered int
	lost     bool
}

// bucketWidth picks the slice width: 100 ms, or wider so a long run stays under maxBuckets.
func bucketWidth(spanNs int64) int64 {
	w := minBucketNs
	if need := spanNs / maxBuckets; need > w {
		w = (need + minBucketNs - 1) / minBucketNs * minBucketNs
	}
	return w
}

// latencyBuckets downsamples probes (sorted by intended time) to per-slice p50 and max. It sorts
// each slice on its own, so the cost is O(n log(n/slices)) and one scratch slice.
func latencyBuckets(probes []rundir.Probe, origin, width int64) []latencyBucket {
	var out []latencyBucket
	var scratch []int64
	slot := func(p rundir.Probe) int64 { return floorDiv(p.IntendedNs-origin, width) }
	for i := 0; i < len(probes); {
		k := slot(probes[i])
		j := i
		scratch = scratch[:0]
		lost := false
		for ; j < len(probes) && slot(probes[j]) == k; j++ {
			if probes[j].Outcome == rundir.ProbeOK {
				scratch = append(scratch, probes[j].LatencyNs)
			} else {
				lost = true
			}
		}
		b := latencyBucket{t: (float64(k)*float64(width) + float64(width)/2) / 1e9, lost: lost, answered: len(scratch)}
		if len(scratch) > 0 {
			slices.Sort(scratch)
			b.p50 = float64(percentileNs(scratch, 50, 100)) / 1e6
			b.max = float64(scratch[len(scratch)-1]) / 1e6
		}
		out = append(out, b)
		i = j
	}
	return out
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// marker is a vertical line at an event, labelled.
type marker struct {
	x     float64
	label string
	color color.Color
	dash  bool
}

// eventMarkers are the actions, each restart's ready and the warm-up end, in time order.
func eventMarkers(s *Summary) []marker {
	var ms []marker
	if s.Settings.WarmupS > 0 {
		ms = append(ms, marker{x: s.Settings.WarmupS, label: "warm-up end", color: ownMarkers["warmup"], dash: true})
	}
	kinds := actions.Events()
	for _, a := range s.Actions {
		c, ok := kinds.Marker(a.Action)
		if !ok {
			c = markerOther
		}
		label := a.Action
		if a.Node != "" {
			label += " " + a.Node
		}
		ms = append(ms, marker{x: a.AtS, label: label, color: c})
	}
	for _, r := range s.Restarts {
		if r.ReadyS != nil {
			ms = append(ms, marker{x: *r.ReadyS, label: "ready " + r.Node, color: ownMarkers["ready"]})
		}
	}
	for _, l := range s.UnplannedLeaderChanges {
		ms = append(ms, marker{x: l.AtS, label: "unplanned leader " + l.Node, color: ownMarkers["unplanned"], dash: true})
	}
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].x < ms[j].x })
	return ms
}

// markersPlotter draws full-height marker lines with their labels along the top. It has no data
// range of its own, so it works on linear and log axes alike.
type markersPlotter struct{ ms []marker }

func (m markersPlotter) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	sty := text.Style{
		Font:     font.From(plot.DefaultFont, 8),
		Handler:  plot.DefaultTextHandler,
		Rotation: math.Pi / 2,
		XAlign:   draw.XRight,
		YAlign:   draw.YTop,
	}
	// Labels of markers closer than a line of text stack downwards instead of overprinting.
	prevX, prevEnd := vg.Length(math.Inf(-1)), vg.Length(0)
	for _, mk := range m.ms {
		x := trX(mk.x)
		if !c.ContainsX(x) {
			continue
		}
		ls := draw.LineStyle{Color: mk.color, Width: vg.Points(1)}
		if mk.dash {
			ls.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		c.StrokeLine2(ls, x, c.Min.Y, x, c.Max.Y)
		sty.Color = mk.color
		top := vg.Points(3)
		if x-prevX < sty.Height(mk.label)+vg.Points(1) && prevEnd+sty.Width(mk.label) < c.Max.Y-c.Min.Y {
			top = prevEnd + vg.Points(4)
		}
		c.FillText(sty, vg.Point{X: x + vg.Points(1.5), Y: c.Max.Y - top}, mk.label)
		prevX, prevEnd = x, top+sty.Width(mk.label)
	}
}

func latencyPlot(d *runData, s *Summary) (*plot.Plot, []legendItem, vg.Length, error) {
	probes := d.probes
	span := probes[len(probes)-1].IntendedNs - probes[0].IntendedNs
	width := bucketWidth(span)
	buckets := latencyBuckets(probes, d.origin, width)

	var p50, mx plotter.XYs
	var lost plotter.XYs
	ymin, ymax := math.Inf(1), 0.0
	for _, b := range buckets {
		if b.answered > 0 {
			p50 = append(p50, plotter.XY{X: b.t, Y: b.p50})
			mx = append(mx, plotter.XY{X: b.t, Y: b.max})
			if b.p50 > 0 { // a latency of 0 or less (a damaged file) sits on the axis floor
				ymin = min(ymin, b.p50)
			}
			ymax = max(ymax, b.max)
		}
	}
	if ymax <= 0 { // every probe lost (or none positive): still show when
		ymin, ymax = 1, 10
	}
	ymin = min(max(ymin, 0.001), ymax) // log axes need a positive floor: 1 µs
	logY := ymax/ymin > 20
	// Room above the data for the marker labels and the lost-probe marks.
	var top, lostY float64
	if logY {
		ymin = math.Pow(10, math.Floor(math.Log10(ymin)))
		top = math.Pow(10, math.Ceil(math.Log10(ymax))+1)
		lostY = ymax * 1.8 // under the marker labels, which hang from the top
	} else {
		ymin = 0
		top = ymax * 1.6
		lostY = ymax * 1.1
	}
	for _, b := range buckets {
		if b.lost {
			lost = append(lost, plotter.XY{X: b.t, Y: lostY})
		}
	}
	if logY { // gonum panics on a value that is not positive on a log axis
		for _, xy := range []plotter.XYs{p50, mx} {
			for i := range xy {
				xy[i].Y = max(xy[i].Y, ymin)
			}
		}
	}

	p := plot.New()
	p.Title.Text = fmt.Sprintf("Probe latency — %s (per %s: p50 and max, from intended send time)", s.RunID, time.Duration(width))
	p.X.Label.Text = d.timeAxisLabel()
	p.Y.Label.Text = "latency (ms)"
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Label.Text = "latency (ms, log scale)"
	}
	p.Add(plotter.NewGrid())
	var legend []legendItem
	if len(mx) > 0 {
		lmax, err := plotter.NewLine(mx)
		if err != nil {
			return nil, nil, 0, err
		}
		lmax.Color, lmax.Width = colMax, vg.Points(0.8)
		lp50, err := plotter.NewLine(p50)
		if err != nil {
			return nil, nil, 0, err
		}
		lp50.Color, lp50.Width = colP50, vg.Points(1.2)
		p.Add(lmax, lp50)
		legend = append(legend, legendItem{"max", lmax}, legendItem{"p50", lp50})
	}
	if len(lost) > 0 {
		sc, err := plotter.NewScatter(lost)
		if err != nil {
			return nil, nil, 0, err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: colLost, Radius: vg.Points(3), Shape: draw.CrossGlyph{}}
		p.Add(sc)
		legend = append(legend, legendItem{"lost probe(s)", sc})
	}
	ms := eventMarkers(s)
	p.Add(markersPlotter{ms})
	legend = append(legend, markerLegend(ms)...)
	p.X.Min = math.Min(buckets[0].t-float64(width)/2e9, 0)
	p.X.Max = math.Max(buckets[len(buckets)-1].t+float64(width)/2e9, d.off(d.runEnd))
	p.X.Tick.Marker = secondsTicks{}
	p.Y.Min, p.Y.Max = ymin, top
	return p, legend, 5.5 * vg.Inch, nil
}

// markerColors are every marker's colour by name: the kinds' and the analysis's own.
func markerColors() map[string]color.RGBA {
	out := actions.Events().Markers()
	maps.Copy(out, ownMarkers)
	return out
}

// markerLegend has one entry per kind of marker present.
func markerLegend(ms []marker) []legendItem {
	var out []legendItem
	seen := map[color.Color]bool{}
	for _, m := range ms {
		if seen[m.color] {
			continue
		}
		seen[m.color] = true
		name := m.label
		for k, c := range markerColors() {
			if c == m.color {
				name = k
			}
		}
		if name == "warmup" {
			name = "warm-up end"
		}
		out = append(out, legendItem{name, lineSwatch{m.color, m.dash}})
	}
	return out
}

// bar is one horizontal interval on a row.
type bar struct {
	y, x0, x1 float64
	color     color.Color
}

// barsPlotter draws horizontal bars of height 0.6 rows.
type barsPlotter struct{ bars []bar }

func (b barsPlotter) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for _, r := range b.bars {
		x0, x1 := trX(r.x0), trX(r.x1)
		if x1-x0 < vg.Points(1) { // keep a very short phase visible
			x1 = x0 + vg.Points(1)
		}
		y0, y1 := trY(r.y-0.3), trY(r.y+0.3)
		pts := c.ClipPolygonXY([]vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}})
		if len(pts) > 0 {
			c.FillPolygon(r.color, pts)
		}
	}
}

func (b barsPlotter) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	ymin, ymax = math.Inf(1), math.Inf(-1)
	for _, r := range b.bars {
		xmin, xmax = min(xmin, r.x0), max(xmax, r.x1)
		ymin, ymax = min(ymin, r.y-0.5), max(ymax, r.y+0.5)
	}
	return
}

func phaseColor(ph string) color.Color {
	if c, ok := phaseColors[ph]; ok {
		return c
	}
	return phaseOther
}

// restartPlot draws one row per restart: its phases from relaunch (x = 0) to ready.
func restartPlot(s *Summary) (*plot.Plot, []legendItem, vg.Length, error) {
	var bars []bar
	var ticks []plot.Tick
	var notes []rowNote
	n := len(s.Restarts)
	xmax := 0.0
	present := map[string]bool{}
	for i, r := range s.Restarts {
		y := float64(n - 1 - i) // first restart on top
		ticks = append(ticks, plot.Tick{Value: y, Label: fmt.Sprintf("#%d %s (kill %.1f s)", i+1, r.Node, r.KillS)})
		if r.RelaunchS == nil {
			continue
		}
		x := 0.0
		order := append([]string{}, phaseOrder...)
		for ph := range r.PhasesMs { // phases outside the usual order go last
			if !slices.Contains(order, ph) {
				order = append(order, ph)
			}
		}
		for _, ph := range order {
			ms, ok := r.PhasesMs[ph]
			if !ok {
				continue
			}
			bars = append(bars, bar{y: y, x0: x, x1: x + ms/1e3, color: phaseColor(ph)})
			present[ph] = true
			x += ms / 1e3
		}
		xmax = max(xmax, x)
		label := "never ready"
		if r.LaunchToReadyMs != nil {
			label = "ready " + fmtMs(*r.LaunchToReadyMs)
		}
		notes = append(notes, rowNote{x: x, y: y, label: label})
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Restart phases from relaunch — %s", s.RunID)
	p.X.Label.Text = "seconds since relaunch"
	p.Add(plotter.NewGrid())
	if len(bars) > 0 {
		p.Add(barsPlotter{bars})
	}
	p.Add(rowNotes(notes))
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Min, p.Y.Max = -0.6, float64(n)-0.4
	p.X.Min, p.X.Max = 0, math.Max(xmax*1.25, 0.1)
	p.X.Tick.Marker = secondsTicks{}
	var legend []legendItem
	for _, ph := range phaseOrder {
		if present[ph] {
			legend = append(legend, legendItem{ph, boxSwatch{phaseColor(ph)}})
		}
	}
	return p, legend, vg.Length(1.4+0.45*float64(n)) * vg.Inch, nil
}

// rowNote is a label just right of the end of a row's bars.
type rowNote struct {
	x, y  float64
	label string
}

type rowNotes []rowNote

func (r rowNotes) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	sty := text.Style{Font: font.From(plot.DefaultFont, 9), Handler: plot.DefaultTextHandler, YAlign: draw.YCenter, Color: color.Black}
	for _, n := range r {
		c.FillText(sty, vg.Point{X: trX(n.x) + vg.Points(4), Y: trY(n.y)}, n.label)
	}
}

// nodesPlot draws every server node's phase over the run, on the latency plot's time axis.
func nodesPlot(d *runData, s *Summary) (*plot.Plot, []legendItem, vg.Length, error) {
	per := d.nodeStates()
	xmin := 0.0
	xmax := d.off(d.runEnd)
	var bars []bar
	var ticks []plot.Tick
	present := map[string]bool{}
	n := len(d.nodes)
	for i, node := range d.nodes {
		y := float64(n - 1 - i)
		ticks = append(ticks, plot.Tick{Value: y, Label: node})
		cs := per[node] // already in time order: events are sorted
		for j, c := range cs {
			x0 := d.off(c.t)
			x1 := xmax
			if j+1 < len(cs) {
				x1 = d.off(cs[j+1].t)
			}
			if x1 <= xmin || x1 <= x0 {
				continue
			}
			bars = append(bars, bar{y: y, x0: max(x0, xmin), x1: x1, color: phaseColor(c.phase)})
			present[c.phase] = true
		}
	}
	// The leader lane, above the nodes: who led when, so an unplanned election shows.
	leaderY := float64(n)
	leaders := leaderSpans(s, xmax)
	if len(leaders) > 0 {
		ticks = append(ticks, plot.Tick{Value: leaderY, Label: "leader"})
		for _, l := range leaders {
			bars = append(bars, bar{y: leaderY, x0: l.x0, x1: l.x1, color: leaderColor(d.nodes, l.node)})
		}
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Engine phase per node — %s", s.RunID)
	p.X.Label.Text = d.timeAxisLabel()
	if len(bars) > 0 {
		p.Add(barsPlotter{bars})
	}
	ms := eventMarkers(s)
	p.Add(markersPlotter{ms})
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Min, p.Y.Max = -0.6, float64(n)-0.4+0.8 // headroom for the marker labels
	if len(leaders) > 0 {
		p.Y.Max += 1.6 // the lane, and its own headroom under the stacked labels
	}
	p.X.Min, p.X.Max = xmin, math.Max(xmax, 1)
	p.X.Tick.Marker = secondsTicks{}
	var legend []legendItem
	for _, ph := range phaseOrder {
		if present[ph] {
			legend = append(legend, legendItem{ph, boxSwatch{phaseColor(ph)}})
		}
	}
	seen := map[string]bool{}
	for _, l := range leaders {
		if !seen[l.node] {
			seen[l.node] = true
			legend = append(legend, legendItem{"leader " + l.node, boxSwatch{leaderColor(d.nodes, l.node)}})
		}
	}
	legend = append(legend, markerLegend(ms)...)
	return p, legend, vg.Length(2.2+0.45*float64(n+1)) * vg.Inch, nil
}

type leaderSpan struct {
	node   string
	x0, x1 float64
}

// leaderSpans is who led from load start to end: the leader at load start, then each change.
func leaderSpans(s *Summary, end float64) []leaderSpan {
	var out []leaderSpan
	cur, from := s.LeaderAtLoadStart, 0.0
	for _, c := range s.LeaderChanges {
		if c.Node == cur {
			continue
		}
		if cur != "" && c.AtS > from {
			out = append(out, leaderSpan{cur, from, c.AtS})
		}
		cur, from = c.Node, max(c.AtS, 0)
	}
	if cur != "" && end > from {
		out = append(out, leaderSpan{cur, from, end})
	}
	return out
}

// leaderColors tell the nodes apart in the leader lane.
var leaderColors = []color.RGBA{
	{R: 0x1b, G: 0x9e, B: 0x77, A: 0xff}, {R: 0xd9, G: 0x5f, B: 0x02, A: 0xff}, {R: 0x75, G: 0x70, B: 0xb3, A: 0xff},
	{R: 0xe7, G: 0x29, B: 0x8a, A: 0xff}, {R: 0x66, G: 0xa6, B: 0x1e, A: 0xff}, {R: 0xe6, G: 0xab, B: 0x02, A: 0xff},
}

func leaderColor(nodes []string, node string) color.Color {
	i := slices.Index(nodes, node)
	if i < 0 {
		return phaseOther
	}
	return leaderColors[i%len(leaderColors)]
}

// secondsTicks labels a time axis every 1, 2 or 5 × 10^k seconds, about ten labels across,
// with an unlabelled tick halfway between: gonum's default gives three labels to a minute.
type secondsTicks struct{}

func (secondsTicks) Ticks(lo, hi float64) []plot.Tick {
	span := hi - lo
	if !(span > 0) {
		return nil
	}
	raw := span / 10
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	decimals := max(0, int(-math.Floor(math.Log10(step))))
	first := math.Ceil(lo / step * 2)
	if math.IsInf(first, 0) || math.Abs(first) > 1<<52 { // a span too narrow for its offset: i++ would not move
		return []plot.Tick{{Value: lo, Label: strconv.FormatFloat(lo, 'g', -1, 64)}}
	}
	var ts []plot.Tick
	for i := first; i/2*step <= hi; i++ {
		v := i / 2 * step
		if math.Mod(i, 2) == 0 {
			ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', decimals, 64)})
		} else {
			ts = append(ts, plot.Tick{Value: v})
		}
	}
	return ts
}

// legendItem is one entry of the legend row under a plot.
type legendItem struct {
	name  string
	thumb plot.Thumbnailer
}

type boxSwatch struct{ c color.Color }

func (b boxSwatch) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(b.c, []vg.Point{c.Min, {X: c.Max.X, Y: c.Min.Y}, c.Max, {X: c.Min.X, Y: c.Max.Y}})
}

type lineSwatch struct {
	c    color.Color
	dash bool
}

func (l lineSwatch) Thumbnail(c *draw.Canvas) {
	ls := draw.LineStyle{Color: l.c, Width: vg.Points(1.5)}
	if l.dash {
		ls.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	y := (c.Min.Y + c.Max.Y) / 2
	c.StrokeLine2(ls, c.Min.X, y, c.Max.X, y)
}

// drawPlot makes one plot and writes it to rel in the run folder. gonum panics on some data it
// cannot draw (a log axis over a value that is not positive, say): the plots guard their data
// against every such case known, and a panic left is this plot's error, not the report's end.
func drawPlot(run rundir.Folder, rel string, build func() (*plot.Plot, []legendItem, vg.Length, error)) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("could not be drawn: %v", r)
		}
	}()
	p, legend, h, err := build()
	if err != nil {
		return err
	}
	return savePNG(run, rel, plotWidth, h, p, legend)
}

// savePNG draws p above a one-line legend and writes a PNG to rel in the run folder. The legend
// sits outside the data area so it never hides a spike.
func savePNG(run rundir.Folder, rel string, w, h vg.Length, p *plot.Plot, legend []legendItem) error {
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(plotDPI))
	dc := draw.New(img)
	area := dc
	if len(legend) > 0 {
		area = draw.Crop(dc, 0, 0, legendRowH, 0)
		drawLegendRow(dc, legend)
	}
	p.Draw(area)
	return run.WriteFile(rel, func(w io.Writer) error {
		_, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w)
		return err
	})
}

func drawLegendRow(c draw.Canvas, items []legendItem) {
	sty := text.Style{Font: font.From(plot.DefaultFont, 10), Handler: plot.DefaultTextHandler, YAlign: draw.YCenter, Color: color.Black}
	thumbW, thumbH := vg.Points(18), vg.Points(9)
	y := c.Min.Y + legendRowH/2
	x := c.Min.X + vg.Points(40)
	for _, it := range items {
		tc := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: x, Y: y - thumbH/2}, Max: vg.Point{X: x + thumbW, Y: y + thumbH/2}}}
		it.thumb.Thumbnail(&tc)
		x += thumbW + vg.Points(4)
		c.FillText(sty, vg.Point{X: x, Y: y}, it.name)
		x += sty.Width(it.name) + vg.Points(14)
	}
}
