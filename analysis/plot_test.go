package analysis

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// Probe streams a plot cannot take as they are: zero and negative latencies beside large ones
// (a log axis needs every value positive), a file of zeros (a padded probes.bin: every probe at
// the epoch, decades before load start), one probe, only lost probes, latencies at the int64
// extremes. Each plot is drawn without drawPlot's recover, so a panic fails the test, and the
// PNG must be written.
func TestPlotsTakeDegenerateProbes(t *testing.T) {
	ok := func(ms, latNs int64) rundir.Probe {
		return rundir.Probe{IntendedNs: at(ms).UnixNano(), LatencyNs: latNs, Outcome: rundir.ProbeOK}
	}
	many := func(n int, p func(i int) rundir.Probe) []rundir.Probe {
		out := make([]rundir.Probe, n)
		for i := range out {
			out[i] = p(i)
		}
		return out
	}
	cases := map[string][]rundir.Probe{
		"zero latencies beside large ones": many(400, func(i int) rundir.Probe {
			return ok(int64(i)*10, int64(i%2)*int64(500e6))
		}),
		"negative latencies beside large ones": many(400, func(i int) rundir.Probe {
			return ok(int64(i)*10, int64(1-2*(i%2))*int64(500e6))
		}),
		"zeros (a padded file)": make([]rundir.Probe, 500),
		"one probe":             {ok(100, 1e6)},
		"every probe lost": many(50, func(i int) rundir.Probe {
			return rundir.Probe{IntendedNs: at(int64(i) * 10).UnixNano(), LatencyNs: 1e9, Outcome: rundir.ProbeLost}
		}),
		"int64 extremes": {ok(0, math.MaxInt64), ok(10, math.MinInt64), ok(20, 1), {IntendedNs: math.MinInt64}, {IntendedNs: math.MaxInt64, LatencyNs: math.MaxInt64}},
	}
	for name, ps := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.role(-500, "node-0", "leader")
			f.run(0, "load_start")
			f.run(500, "warmup_end")
			f.action(1000, "kill", "node-1", map[string]any{"signal": "KILL"})
			f.action(1500, "relaunch", "node-1", nil)
			f.phase(1600, "node-1", "restoring")
			f.phase(2500, "node-1", "ready")
			f.run(4000, "load_end")
			f.status("node-0", engine.Status{Phase: "ready"})
			f.probes(ps)
			// OS samples a microsecond apart, 55 years before load start, writing less than nothing
			// and at the largest float.
			os.MkdirAll(filepath.Join(f.dir, "node-0", rundir.SamplesDir), 0o755)
			var lines []byte
			for i, mb := range []float64{-5, 1.7e308} {
				b, _ := json.Marshal(rundir.Sample{Time: time.Unix(1, int64(i)*1000), Disks: []rundir.SampleDisk{{WriteMBPer: mb}}})
				lines = append(append(lines, b...), '\n')
			}
			if err := os.WriteFile(filepath.Join(f.dir, "node-0", rundir.SamplesDir, "os"+rundir.SamplesExt), lines, 0o644); err != nil {
				t.Fatal(err)
			}
			dir := f.close()
			d, err := loadRun(dir)
			if err != nil {
				t.Fatal(err)
			}
			s := d.summarize()
			run := rundir.Folder{Dir: dir}
			for rel, build := range map[string]func() (*plotT, []legendItem, lengthT, error){
				PlotLatency:  func() (*plotT, []legendItem, lengthT, error) { return latencyPlot(d, s) },
				PlotRestarts: func() (*plotT, []legendItem, lengthT, error) { return restartPlot(s) },
				PlotNodes:    func() (*plotT, []legendItem, lengthT, error) { return nodesPlot(d, s) },
				PlotDisk:     func() (*plotT, []legendItem, lengthT, error) { return diskPlot(d, s, d.diskSeries()) },
			} {
				p, legend, h, err := build()
				if err != nil {
					t.Errorf("%s: %v", rel, err)
					continue
				}
				if err := savePNG(run, rel, plotWidth, h, p, legend); err != nil {
					t.Errorf("%s: %v", rel, err)
				}
				if st, err := os.Stat(filepath.Join(dir, rel)); err != nil || st.Size() == 0 {
					t.Errorf("%s not written: %v", rel, err)
				}
			}
		})
	}
}

type (
	plotT   = plot.Plot
	lengthT = vg.Length
)

// A time axis of a microsecond, 54 years before load start (OS samples from a damaged file),
// gets its ticks: it did not return, each step too small to move the tick's value.
func TestSecondsTicksNarrowSpanFarOut(t *testing.T) {
	done := make(chan []plot.Tick)
	go func() { done <- secondsTicks{}.Ticks(-1.7e9, -1.7e9+1e-6) }()
	select {
	case ts := <-done:
		if len(ts) == 0 || len(ts) > 30 {
			t.Errorf("%d ticks", len(ts))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("secondsTicks did not return in 10 s")
	}
	if n := len(secondsTicks{}.Ticks(0, 60)); n != 13 {
		t.Errorf("0–60 s: %d ticks, want 13 (every 10 s labelled, halves between)", n)
	}
}
