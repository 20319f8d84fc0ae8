package analysis

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// PlotHandOff is the hand-off timeline as the step-down guide draws it: per hand-off, one lane
// for the client and one per server on one clock (ms from the action), spans coloured by state,
// the service gap marked.
const PlotHandOff = rundir.PlotsDir + "/handoff.png"

// maxHandOffsPlotted bounds the plot's height: the first ones are drawn, the title says so.
const maxHandOffsPlotted = 8

// Client lane states.
const (
	clientOld = "old leader answering"
	clientGap = "service gap"
	clientNew = "new leader answering"
)

var (
	stateColors = map[string]color.RGBA{
		engine.RoleLeader:    {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
		engine.RoleFollower:  {R: 0xae, G: 0xc7, B: 0xe8, A: 0xff},
		engine.RoleCandidate: {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
		stateDown:            {R: 0x50, G: 0x50, B: 0x50, A: 0xff},
		stateStarting:        {R: 0xd0, G: 0xd0, B: 0xd0, A: 0xff},
		clientOld:            {R: 0x9e, G: 0xb4, B: 0xd8, A: 0xff},
		clientGap:            {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
		clientNew:            {R: 0x98, G: 0xdf, B: 0x8a, A: 0xff},
		// Aeron Cluster's election states: the search for a leader warm, the new leader's
		// road green, a follower's blue.
		"INIT":                     {R: 0xff, G: 0xe0, B: 0x80, A: 0xff},
		"CANVASS":                  {R: 0xff, G: 0xbb, B: 0x33, A: 0xff},
		"NOMINATE":                 {R: 0xff, G: 0x8c, B: 0x1a, A: 0xff},
		"CANDIDATE_BALLOT":         {R: 0xe0, G: 0x55, B: 0x10, A: 0xff},
		"FOLLOWER_BALLOT":          {R: 0x9a, G: 0x5c, B: 0xc6, A: 0xff},
		"LEADER_LOG_REPLICATION":   {R: 0x1b, G: 0x5e, B: 0x20, A: 0xff},
		"LEADER_REPLAY":            {R: 0x38, G: 0x8e, B: 0x3c, A: 0xff},
		"LEADER_INIT":              {R: 0x66, G: 0xbb, B: 0x6a, A: 0xff},
		"LEADER_READY":             {R: 0xa5, G: 0xd6, B: 0xa7, A: 0xff},
		"FOLLOWER_LOG_REPLICATION": {R: 0x0d, G: 0x47, B: 0xa1, A: 0xff},
		"FOLLOWER_REPLAY":          {R: 0x19, G: 0x76, B: 0xd2, A: 0xff},
		"FOLLOWER_CATCHUP_INIT":    {R: 0x42, G: 0xa5, B: 0xf5, A: 0xff},
		"FOLLOWER_CATCHUP_AWAIT":   {R: 0x64, G: 0xb5, B: 0xf6, A: 0xff},
		"FOLLOWER_CATCHUP":         {R: 0x90, G: 0xca, B: 0xf9, A: 0xff},
		"FOLLOWER_LOG_INIT":        {R: 0x00, G: 0x83, B: 0x8f, A: 0xff},
		"FOLLOWER_LOG_AWAIT":       {R: 0x26, G: 0xa6, B: 0x9a, A: 0xff},
		"FOLLOWER_READY":           {R: 0x80, G: 0xcb, B: 0xc4, A: 0xff},
	}
	// stateOthers colour, in turn, the states of an engine this list does not know.
	stateOthers = []color.RGBA{{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff}, {R: 0xbc, G: 0xbd, B: 0x22, A: 0xff}, {R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}, {R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}}
)

// handOffColors gives every state in order a colour: its own, or the next of stateOthers.
func handOffColors(states []string) map[string]color.Color {
	out := map[string]color.Color{}
	k := 0
	for _, s := range states {
		if c, ok := stateColors[s]; ok {
			out[s] = c
			continue
		}
		out[s] = stateOthers[k%len(stateOthers)]
		k++
	}
	for _, s := range []string{clientOld, clientGap, clientNew} {
		out[s] = stateColors[s]
	}
	return out
}

// handOffPlot draws the first maxHandOffsPlotted hand-offs, top to bottom: a client lane (the
// old leader answering until its last reply, the service gap, the new leader answering) and a
// lane per server.
func handOffPlot(s *Summary) (*plot.Plot, []legendItem, vg.Length, error) {
	hs := s.HandOffs
	title := fmt.Sprintf("Leader hand-offs — %s", s.RunID)
	if len(hs) > maxHandOffsPlotted {
		title += fmt.Sprintf(" (the first %d of %d)", maxHandOffsPlotted, len(hs))
		hs = hs[:maxHandOffsPlotted]
	}
	colors := handOffColors(handOffStates(hs))
	rows := 0
	for _, h := range hs {
		rows += 1 + len(h.Lanes)
	}
	var bars []bar
	var ticks []plot.Tick
	var notes []rowNote
	var gapLines []marker
	present := map[string]bool{}
	// The view: the hand-offs' events (the latest of each's detection, election and first new
	// reply) with a third of that before the action and after them, so a 12 ms hand-off is not
	// a sliver of the lanes' second either side.
	span := 10.0
	for _, h := range hs {
		for _, v := range []*float64{h.DetectMs, h.ElectMs, h.FirstNewReplyMs} {
			if v != nil {
				span = max(span, *v)
			}
		}
	}
	xmin, xmax := -span/3, span*4/3
	y := float64(rows) // counts down: the first hand-off on top
	for i, h := range hs {
		lo, hi := 0.0, 0.0
		for _, l := range h.Lanes {
			for _, sp := range l.Spans {
				lo, hi = min(lo, sp.FromMs), max(hi, sp.ToMs)
			}
		}
		y--
		ticks = append(ticks, plot.Tick{Value: y, Label: fmt.Sprintf("#%d %s %s: client", i+1, h.Action, h.From)})
		if h.LastOldReplyMs != nil && h.FirstNewReplyMs != nil {
			old, nw := *h.LastOldReplyMs, *h.FirstNewReplyMs
			hi = max(hi, nw)
			bars = append(bars, bar{y: y, x0: lo, x1: old, color: colors[clientOld]},
				bar{y: y, x0: old, x1: nw, color: colors[clientGap]}, bar{y: y, x0: nw, x1: hi, color: colors[clientNew]})
			present[clientOld], present[clientGap], present[clientNew] = true, true, true
			notes = append(notes, rowNote{x: nw, y: y, label: "service gap " + HandOffFigures[0].Cell(h.HandOffTimes)})
			gapLines = append(gapLines, marker{x: old, color: colors[clientGap], dash: true}, marker{x: nw, color: colors[clientGap], dash: true})
		} else {
			notes = append(notes, rowNote{x: xmin, y: y, label: "no reply from a new leader"})
		}
		for _, l := range h.Lanes {
			y--
			ticks = append(ticks, plot.Tick{Value: y, Label: l.Node})
			for _, sp := range l.Spans {
				bars = append(bars, bar{y: y, x0: sp.FromMs, x1: sp.ToMs, color: colors[sp.State]})
				present[sp.State] = true
			}
		}
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "ms from the action (the close), one clock; dashed: the service gap"
	p.Add(plotter.NewGrid())
	if len(bars) > 0 {
		p.Add(barsPlotter{bars})
	}
	// The action at 0, and the gap's ends.
	p.Add(msMarkers(append([]marker{{x: 0, color: handOffMarker}}, gapLines...)))
	p.Add(rowNotes(notes))
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Min, p.Y.Max = -0.6, float64(rows)-0.4
	p.X.Min, p.X.Max = xmin, xmax+0.25*(xmax-xmin) // room for the notes
	p.X.Tick.Marker = secondsTicks{}
	var legend []legendItem
	for _, st := range append([]string{clientOld, clientGap, clientNew}, handOffStates(hs)...) {
		if present[st] {
			legend = append(legend, legendItem{st, boxSwatch{colors[st]}})
		}
	}
	return p, legend, vg.Length(1.4+0.3*float64(rows)) * vg.Inch, nil
}

// msMarkers draws vertical lines across the plot at each marker's x, unlabelled.
type msMarkers []marker

func (m msMarkers) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	for _, mk := range m {
		x := trX(mk.x)
		if x < c.Min.X || x > c.Max.X || math.IsNaN(float64(x)) {
			continue
		}
		ls := draw.LineStyle{Color: mk.color, Width: vg.Points(1)}
		if mk.dash {
			ls.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		c.StrokeLine2(ls, x, c.Min.Y, x, c.Max.Y)
	}
}
