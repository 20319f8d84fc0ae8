package sweep_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/history"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/stats"
	"github.com/rig-dev/rig/sweep"
)

// fakeFigure is the figure each row kind's test declares, a headline.
var fakeFigure = analysis.Figure{Key: "fake", Label: "fake figure", Unit: "ms", Dir: stats.LowerIsBetter, Headline: true}

// fakeValues are the fake figure's value on the baseline's rows (sync level 0, the run as
// analysed) and on the contender's (the second run, its rows marked): they differ, so a
// comparison or an index that swapped the runs fails.
var fakeValues = []float64{7.5, 9.5}

// markShift is what the test adds to a field of the second run's rows in its summary.json
// (moveMarks), which the sweep, rig compare and the history index read them from.
const markShift = 1e6

// declare appends the fake figure to a row kind's list for the test's length: fakeValues[1] on
// a row whose mark was moved, else fakeValues[0].
func declare[R any](t *testing.T, figs *[]analysis.RowFigure[R], mark func(R) float64) {
	saved := *figs
	t.Cleanup(func() { *figs = saved })
	*figs = append(slices.Clone(saved), analysis.RowFigure[R]{Figure: fakeFigure, Get: func(r R) (float64, bool) {
		if mark(r) >= markShift {
			return fakeValues[1], true
		}
		return fakeValues[0], true
	}})
}

// A figure is one entry in its row kind's list: a fake figure added there, as each case does,
// reaches the run's report.md (its table, and the pooled lines of a kind that has them),
// summary.json's pooled figures, the sweep's table and plots (a headline), rig
// compare, the history index and the history log's default figures, with nothing else changed.
func TestEveryRowKindDeclaredOnce(t *testing.T) {
	for _, c := range []struct {
		kind    string
		declare func(t *testing.T)
		key     string                         // the sweep's metric key
		label   string                         // the sweep's label
		report  []string                       // in the run's report.md
		pooled  string                         // summary.json's pooled kind ("": none, the kind has its own figures there)
		mark    string                         // the field of summary.json the second run's rows are marked in (moveMarks)
		setup   func(t *testing.T, run string) // adds to the copy of the golden run what the kind needs
	}{
		{kind: "snapshot", declare: func(t *testing.T) {
			declare(t, &analysis.SnapshotFigures, func(r analysis.SnapshotRow) float64 { return r.AtS })
		}, mark: "snapshots.at_s", key: "snapshot.fake", label: "warm fake figure",
			report: []string{"| client pause | fake figure | pause window |", " | 7.50 ms | 6.0 s – 7.0 s |"}, pooled: string(actions.ShapeSnapshot)},
		{kind: "step_down", declare: func(t *testing.T) {
			declare(t, &analysis.StepDownFigures, func(r analysis.StepDownRow) float64 { return r.AtS })
		}, mark: "step_downs.at_s", key: "step_down.fake", label: "fake figure",
			report: []string{"| client learns | fake figure | probes |", " | -6.50 ms | 7.50 ms | 404 |"}, pooled: string(actions.ShapeStepDown)},
		{kind: "failover", declare: func(t *testing.T) {
			declare(t, &analysis.FailoverFigures, func(r analysis.FailoverRow) float64 { return r.AtS })
		}, mark: "failovers.at_s", key: "failover.fake", label: "fake figure",
			report: []string{"| back to normal | fake figure | lost |", " | 1.01 s | 7.50 ms | 0 |"}, pooled: string(actions.ShapeFailover)},
		{kind: "restart", declare: func(t *testing.T) {
			declare(t, &analysis.RestartFigures, func(r analysis.RestartRow) float64 { return r.KillS })
		}, mark: "restarts.kill_s", key: "restart.fake", label: "fake figure",
			report: []string{"| launch → ready | fake figure |", " | 585 ms | 7.50 ms |"}, pooled: string(actions.ShapeRestart)},
		{kind: "burst", declare: func(t *testing.T) {
			declare(t, &analysis.BurstFigures, func(r analysis.BurstRow) float64 { return r.AtS })
		}, mark: "bursts.at_s", key: "burst.fake", label: "fake figure",
			report: []string{"| max latency | fake figure |", " | 41.1 ms | 7.50 ms |", "* fake figure: 7.50 ms, n = 2"}, pooled: string(actions.ShapeBurst)},
		// Excursions: the listed ones, in the excursion table under Probes overall.
		{kind: "excursion", declare: func(t *testing.T) {
			declare(t, &analysis.ExcursionFigures, func(e analysis.Excursion) float64 { return e.StartS })
		}, mark: "excursions.list.start_s", key: "excursion.fake", label: "fake figure",
			report: []string{"| covered | cause | fake figure |", ": burst action | 7.50 ms |"}, pooled: analysis.KindExcursion},
		// Disk forces: the golden run had no disk model; each server is given a record of one.
		{kind: "forces", declare: func(t *testing.T) {
			declare(t, &analysis.SnapshotForceFigures, func(r analysis.SnapshotForces) float64 { return r.FromS })
		}, setup: diskModel, mark: "forces.snapshots.from_s", key: "forces.fake", label: "fake figure",
			report: []string{"| files (most bytes) | fake figure |", "| — | 7.50 ms |"}, pooled: analysis.KindForces},
		{kind: "node_forces", declare: func(t *testing.T) {
			declare(t, &analysis.NodeForceFigures, func(r analysis.NodeForceRow) float64 { return float64(r.Load.Syncs) })
		}, setup: diskModel, mark: "forces.nodes.*.load.syncs", key: "node_forces.fake", label: "fake figure",
			report: []string{"| the rest's files (most forces) | fake figure |", "| log (1, 4.0 KiB) | 7.50 ms |"}, pooled: analysis.KindNodeForces},
		// The load generator in each fault's window, given a timeline of its dials.
		{kind: "client_fault", declare: func(t *testing.T) {
			declare(t, &analysis.ClientFaultFigures, func(f analysis.ClientFault) float64 { return f.AtS })
		}, setup: connTimeline, mark: "client_conn.faults.at_s", key: "client_fault.fake", label: "fake figure",
			report: []string{"| late outside holds | fake figure |", " | 7.50 ms |"}, pooled: analysis.KindClientFault},
		// Each node's pressure stalls, given the agent's pressure samples.
		{kind: "host_pressure", declare: func(t *testing.T) {
			declare(t, &analysis.HostPressureFigures, func(h analysis.HostPressure) float64 { return h.MeasuredS })
		}, setup: pressure, mark: "host_pressure.measured_s", key: "host_pressure.fake", label: "fake figure",
			report: []string{"| memory full | fake figure |", " % | 7.50 ms |"}, pooled: analysis.KindHostPressure},
		// Each node's GC pauses, given a GC log.
		{kind: "gc", declare: func(t *testing.T) {
			declare(t, &analysis.GCFigures, func(r analysis.GCRow) float64 { return float64(r.Count) })
		}, setup: gcLog, mark: "gc_pauses.count", key: "gc.fake", label: "fake figure",
			report: []string{"| node | pauses | longest | total | fake figure |", " | 7.50 ms |"}, pooled: analysis.KindGC},
		// Latency: every probe's table and the restart windows'; the sweep's probes and window
		// figures. summary.json holds the Stats the figures are read from.
		{kind: "latency", declare: func(t *testing.T) {
			declare(t, &analysis.LatencyFigures, func(s analysis.Stats) float64 { return float64(s.N) })
		}, mark: "probes.n", key: "probes.fake", label: "fake figure",
			report: []string{"| n | p50 | p90 | p99 | p99.9 | max | lost | fake figure |", "| 3000 | 1.87 ms |", " | 39.2 ms | 0 | 7.50 ms |",
				"| window | span | n | p50 | p90 | p99 | p99.9 | max | lost | fake figure |", " | 4.58 ms | 0 | 7.50 ms |"}},
		// Overhead: one value per run, in the Stages section.
		{kind: "overhead", declare: func(t *testing.T) {
			declare(t, &analysis.OverheadFigures, func(s *analysis.Summary) float64 { return float64(s.WarmupProbes) })
		}, mark: "warmup_probes", key: "fake", label: "fake figure",
			report: []string{"## Stages", "fake figure: 7.50 ms (the timeline is"}},
	} {
		t.Run(c.kind, func(t *testing.T) {
			c.declare(t)
			dir := t.TempDir()
			runs := []string{"r01", "r02"}
			for i, r := range runs {
				run := filepath.Join(dir, r)
				if err := os.CopyFS(run, os.DirFS(filepath.Join("..", "analysis", "testdata", "golden-run"))); err != nil {
					t.Fatal(err)
				}
				renameRun(t, run, i)
				if c.setup != nil {
					c.setup(t, run)
				}
				s, err := analysis.Analyze(run)
				if err != nil {
					t.Fatal(err)
				}
				if err := analysis.WriteOutputs(run, s); err != nil {
					t.Fatal(err)
				}
				if i > 0 {
					moveMarks(t, run, c.mark)
					continue
				}
				report, _ := os.ReadFile(filepath.Join(run, rundir.ReportFile))
				for _, want := range c.report {
					if !strings.Contains(string(report), want) {
						t.Errorf("report.md lacks %q", want)
					}
				}
				if t.Failed() {
					t.Logf("report.md:\n%s", report)
				}
				if c.pooled != "" {
					var sum struct {
						Pooled map[string]map[string]stats.Sample `json:"pooled"`
					}
					b, _ := os.ReadFile(filepath.Join(run, rundir.SummaryFile))
					if err := json.Unmarshal(b, &sum); err != nil || sum.Pooled[c.pooled]["fake_ms"].Mean != fakeValues[0] {
						t.Errorf("summary.json pooled %s: %v (%v); want fake_ms of mean %g", c.pooled, sum.Pooled[c.pooled], err, fakeValues[0])
					}
				}
			}
			sw := &sweep.Sweep{ID: "S1", Playbook: "golden", Status: rundir.StatusOK, Started: time.Now(), Rounds: 1, WarmFrom: 2,
				Axes: []sweep.Axis{{Key: "engine.sync_level", Values: []string{"0", "2"}}}}
			for i, r := range runs {
				sw.Runs = append(sw.Runs, sweep.Run{Dir: r, Index: i + 1, Round: 1, Settings: map[string]string{"engine.sync_level": sw.Axes[0].Values[i]}, Status: rundir.StatusOK})
			}
			if err := sw.Write(dir); err != nil {
				t.Fatal(err)
			}
			set, err := sweep.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sweep.WriteReport(set, sweep.Options{}); err != nil {
				t.Fatal(err)
			}
			md, _ := os.ReadFile(filepath.Join(dir, sweep.ReportName))
			if !strings.Contains(string(md), "| "+c.label+" (ms) |") && !strings.Contains(string(md), " "+c.label+" (ms) |") {
				t.Errorf("the sweep report has no %q column:\n%s", c.label, md)
			}
			plot := filepath.Join(dir, sweep.PlotsDir, strings.ReplaceAll(c.key, ".", "_")+"-vs-engine_sync_level.png")
			if _, err := os.Stat(plot); err != nil {
				t.Errorf("no plot of the headline figure: %v", err)
			}
			cmp, err := sweep.Compare(set, set, sweep.CompareOptions{BaseWhere: "engine.sync_level=0", ContenderWhere: "engine.sync_level=2"})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, r := range cmp.Rows {
				if r.Metric.Key == c.key {
					found = r.C.Base.Mean == fakeValues[0] && r.C.Contender.Mean == fakeValues[1]
				}
			}
			var out bytes.Buffer
			cmp.Text(&out)
			if !found || !strings.Contains(out.String(), "| "+c.label+" | ms | lower |") {
				t.Errorf("rig compare has no %s of %g ms (baseline) against %g ms (contender):\n%s", c.key, fakeValues[0], fakeValues[1], out.String())
			}

			ctx := context.Background()
			x, err := history.Open(filepath.Join(t.TempDir(), history.DefaultFile))
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			if _, err := history.Import(ctx, x, dir, history.ImportOptions{}); err != nil {
				t.Fatal(err)
			}
			indexed, err := x.Runs(ctx, history.Filter{})
			if err != nil || len(indexed) != len(runs) {
				t.Fatalf("indexed %d runs (%v), want %d", len(indexed), err, len(runs))
			}
			for _, run := range indexed {
				figs, err := x.Figures(ctx, run.ID)
				if err != nil {
					t.Fatal(err)
				}
				want := fakeValues[slices.Index(runs, run.RunDir)]
				if i := slices.IndexFunc(figs, func(f history.Figure) bool { return f.Key == c.key }); i < 0 || figs[i].Label != c.label || figs[i].Sample.Mean != want {
					t.Errorf("the history index has no %s of %g ms for %s: %+v", c.key, want, run.RunDir, figs)
				}
			}
			if !slices.Contains(history.DefaultLogFigures(), c.key) {
				t.Errorf("the history log's default figures lack the headline %s: %v", c.key, history.DefaultLogFigures())
			}
		})
	}
}

// renameRun gives a copy of the golden run an id of its own, as a sweep's runs have.
func renameRun(t *testing.T, run string, i int) {
	t.Helper()
	p := filepath.Join(run, rundir.ManifestFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["run_id"] = m["run_id"].(string) + "-r0" + string(rune('1'+i))
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// moveMarks adds markShift to the field at path in a run's summary.json: dot-separated, from the
// summary down, a list standing for each of its elements and "*" for each value of an object
// ("bursts.at_s", "excursions.list.start_s", "forces.nodes.*.load.syncs").
func moveMarks(t *testing.T, run, path string) {
	t.Helper()
	p := filepath.Join(run, rundir.SummaryFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var sum map[string]any
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	moved := 0
	var walk func(v any, segs []string)
	walk = func(v any, segs []string) {
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				walk(e, segs)
			}
		case map[string]any:
			if segs[0] == "*" {
				for _, e := range v {
					walk(e, segs[1:])
				}
			} else if len(segs) > 1 {
				walk(v[segs[0]], segs[1:])
			} else if x, ok := v[segs[0]].(float64); ok {
				v[segs[0]] = x + markShift
				moved++
			}
		}
	}
	walk(sum, strings.Split(path, "."))
	if moved == 0 {
		t.Fatalf("summary.json has no %s to mark", path)
	}
	if b, err = json.Marshal(sum); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// loadStart is when a copy of the golden run's load started (its load_start event).
func loadStart(t *testing.T, run string) time.Time {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(run, rundir.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		var e struct {
			T     time.Time `json:"t"`
			Kind  string    `json:"kind"`
			Phase string    `json:"phase"`
		}
		if json.Unmarshal(line, &e) == nil && e.Kind == "run" && e.Phase == "load_start" {
			return e.T
		}
	}
	t.Fatal("the golden run has no load_start event")
	return time.Time{}
}

// diskModel gives each server of a copy of the golden run a disk model's record of its fsyncs:
// one, in the load, of the log.
func diskModel(t *testing.T, run string) {
	t.Helper()
	at := loadStart(t, run).Add(3 * time.Second)
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		w, err := rundir.CreateDiskSyncs(filepath.Join(run, n, rundir.DiskSyncsFile))
		if err != nil {
			t.Fatal(err)
		}
		w.Write(rundir.DiskSync{AtNs: at.UnixNano(), File: "log", Bytes: 4096, DurNs: 1e6})
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// connTimeline gives the load generator of a copy of the golden run a timeline of its dials:
// two in the second of the step-down.
func connTimeline(t *testing.T, run string) {
	t.Helper()
	p := filepath.Join(run, rundir.ManifestFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	conn := m["loadgen"].(map[string]any)["conn"].(map[string]any)
	conn["timeline"] = []rundir.ConnSecond{{At: loadStart(t, run).Add(9 * time.Second).Truncate(time.Second), Dials: 2, Reconnects: 1}}
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// gcLog gives a server of a copy of the golden run a HotSpot GC log (analysis/testdata/gc).
func gcLog(t *testing.T, run string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "analysis", "testdata", "gc", "g1.log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run, "node-0", "gc-1.log"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// pressure gives a server of a copy of the golden run the agent's pressure samples: its CPUs
// stalled a tenth of every 20 ms over the load.
func pressure(t *testing.T, run string) {
	t.Helper()
	p := filepath.Join(run, "node-0", rundir.SchedDir, "psi"+rundir.SchedExt)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := rundir.CreateSched(p)
	if err != nil {
		t.Fatal(err)
	}
	start := loadStart(t, run)
	for at := start.Add(time.Second); at.Before(start.Add(15 * time.Second)); at = at.Add(20 * time.Millisecond) {
		w.Write(rundir.SchedSample{AtNs: at.UnixNano(), IntervalNs: int64(20 * time.Millisecond), PSI: &rundir.SchedPSI{CPUSomeUs: 2000}})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
