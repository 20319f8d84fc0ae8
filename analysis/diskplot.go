package analysis

import (
	"cmp"
	"fmt"
	"image/color"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/rig-dev/rig/rundir"
)

// PlotDisk is every server's disk write throughput over the run, from the agents' OS samples:
// where a snapshot's bytes (or the kernel's writeback of them) actually hit the disk.
const PlotDisk = "plots/disk.png"

var nodeColors = []color.RGBA{
	{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, {R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}, {R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
}

// diskSeries reads each server node's samples: write MB/s summed over its disks, per sample.
func (d *runData) diskSeries() map[string]plotter.XYs {
	out := map[string]plotter.XYs{}
	for _, node := range d.nodes {
		for _, f := range d.glob(node + "/" + rundir.SamplesDir + "/*" + rundir.SamplesExt) {
			samples := d.samples(f)
			for _, s := range samples {
				if s.Time.IsZero() {
					continue
				}
				var mb float64
				for _, dk := range s.Disks {
					mb += dk.WriteMBPer
				}
				out[node] = append(out[node], plotter.XY{X: d.off(s.Time.UnixNano()), Y: mb})
			}
		}
		slices.SortFunc(out[node], func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
	}
	return out
}

func diskPlot(d *runData, s *Summary, series map[string]plotter.XYs) (*plot.Plot, []legendItem, vg.Length, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Disk writes — %s (MiB/s per server, all its disks, from the agents' samples)", s.RunID)
	if d.man.Target == "local" {
		p.Title.Text += "; local target: every node shares this machine's disks"
	}
	p.X.Label.Text = d.timeAxisLabel()
	p.Y.Label.Text = "write MiB/s"
	p.Add(plotter.NewGrid())
	var legend []legendItem
	ymax := 1.0
	for i, node := range d.nodes {
		xy := series[node]
		if len(xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, nil, 0, err
		}
		l.Color, l.Width = nodeColors[i%len(nodeColors)], vg.Points(1)
		p.Add(l)
		legend = append(legend, legendItem{node, l})
		for _, pt := range xy {
			ymax = max(ymax, pt.Y)
		}
	}
	ms := eventMarkers(s)
	p.Add(markersPlotter{ms})
	legend = append(legend, markerLegend(ms)...)
	p.X.Tick.Marker = secondsTicks{}
	p.Y.Min, p.Y.Max = 0, ymax*1.6 // room for the marker labels
	return p, legend, 4.5 * vg.Inch, nil
}
