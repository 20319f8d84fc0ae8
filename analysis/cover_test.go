package analysis

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// TestCoverNs: spans of weight 1 give their union; sampled spans count each moment at the
// largest weight under way then, never the sum of several.
func TestCoverNs(t *testing.T) {
	for _, c := range []struct {
		name string
		ss   []wspan
		want int64
	}{
		{"none", nil, 0},
		{"union of whole spans", []wspan{whole(span{0, 10}), whole(span{5, 20}), whole(span{30, 40})}, 30},
		{"a share spread over its span", []wspan{{span{0, 20}, 0.6}}, 12},
		{"the larger of two at once", []wspan{{span{0, 20}, 0.4}, {span{0, 20}, 0.4}, {span{10, 20}, 0.9}}, 4 + 9},
		{"a whole span inside a sampled one", []wspan{{span{0, 200}, 0.5}, whole(span{50, 100})}, 50 + 150/2},
		{"a span ended does not hold the next moment", []wspan{whole(span{0, 100}), {span{0, 300}, 0.1}, {span{120, 140}, 0.5}}, 100 + 2 + 10 + 16},
		{"empty and zero-weight spans", []wspan{{span{5, 5}, 1}, {span{0, 10}, 0}}, 0},
	} {
		if got := coverNs(c.ss); got != c.want {
			t.Errorf("%s: coverNs = %d, want %d", c.name, got, c.want)
		}
	}
}

// TestSchedWaitSpreadOverItsInterval: a scheduler sample knows how long a thread waited in its
// 20 ms, not when. Beside a steady hog (12 ms waited in every 20 ms) a short excursion early in
// an interval is covered at 60 % and named; a wait of 8 ms in an interval does not name a
// 10 ms excursion in that interval's second half (40 % expected there). Placing each wait at its
// interval's end got both wrong: the first uncovered, the second covered 73 %.
func TestSchedWaitSpreadOverItsInterval(t *testing.T) {
	for _, c := range []struct {
		name      string
		stallAt   int64 // a 10 ms stall: one probe 11 ms late, an excursion of [stallAt, stallAt+11] ms
		fromMs    int64 // the thread waited waitMs in every 20 ms sample of (fromMs, toMs]
		toMs      int64
		waitMs    int64
		named     bool
		coveredMs float64
		rowMs     float64 // the excursion's table: the wait expected inside it
	}{
		{"steady hog, excursion early in an interval", 8000, 7000, 9000, 12, true, 6.6, 6.6},
		{"one wait, excursion in the interval's second half", 8010, 8000, 8020, 8, false, 0, 4},
	} {
		f := newFixture(t)
		f.run(0, "load_start")
		f.run(1000, "warmup_end")
		f.probes(stallProbes(20_000, 10, c.stallAt))
		f.run(20_000, "load_end")
		f.status("node-0", engine.Status{Phase: "ready"})
		writeSched(t, f.dir, "node-0", "apply", c.fromMs, c.toMs, c.waitMs)
		_, ex := f.excursions(1, c.name)
		e := ex[0]
		named := len(e.Causes) == 1 && e.Causes[0].Kind == CauseKind(rundir.InsideSchedDelay)
		if named != c.named || e.CoveredMs != c.coveredMs {
			t.Errorf("%s: excursion %.3f–%.3f s: causes %+v, covered %v ms; want named %v, covered %v ms", c.name, e.StartS, e.EndS, e.Causes, e.CoveredMs, c.named, c.coveredMs)
		}
		if w := e.Where; w == nil || len(w.Rows) != 1 || w.Rows[0].TotalMs != c.rowMs {
			t.Errorf("%s: where %+v, want one row of %v ms", c.name, e.Where, c.rowMs)
		}
	}
}

// TestPlacedWaitNamesWhereItWas: the same 8 ms wait that, sampled, names no 10 ms excursion in
// its interval's second half (above) names it when the kernel placed it inside the excursion, and
// covers nothing of it when placed in the first half; the thread's reading keeps only the rest of
// its wait for the spread. A placed wait and a sample's spread rest that cover half of the
// excursion only together name it together: one wait, two sources.
func TestPlacedWaitNamesWhereItWas(t *testing.T) {
	for _, c := range []struct {
		name            string
		fromMs, placeMs int64 // the placed wait: [fromMs, fromMs+placeMs] ms
		waitMs          int64 // the thread's wait in the sample, the placed one included
		named           string
		coveredMs       float64
		rows            []string // sources
	}{
		{"placed inside the excursion", 8012, 8, 8, rundir.SourceSchedSwitch + ": 1 span(s) covering 8.000 ms (73 %)", 8, []string{rundir.SourceSchedSwitch}},
		{"placed before it", 8000, 8, 8, "", 0, nil},
		{"placed 36 %, the rest spread 27 %", 8012, 4, 10, rundir.SourceSchedstat + " and " + rundir.SourceSchedSwitch + ": 2 span(s) covering 5.800 ms (53 %) of it (the kernel's placed where they were, the samples' rest spread over their intervals)", 5.8, []string{rundir.SourceSchedSwitch, rundir.SourceSchedstat}},
	} {
		f := newFixture(t)
		f.run(0, "load_start")
		f.run(1000, "warmup_end")
		f.probes(stallProbes(20_000, 10, 8010)) // [8.010, 8.021] s
		f.run(20_000, "load_end")
		f.status("node-0", engine.Status{Phase: "ready"})
		writeSchedFile(t, f.dir, "node-0", "os", 8000, 8020, func(int64) rundir.SchedSample {
			ms := int64(time.Millisecond)
			return rundir.SchedSample{
				Threads: []rundir.SchedThread{{PID: 7, TID: 9, Comm: "apply", WaitNs: c.waitMs * ms, ExactNs: c.placeMs * ms}},
				Waits:   []rundir.SchedWait{{TID: 9, Comm: "apply", FromNs: at(c.fromMs).UnixNano(), DurNs: c.placeMs * ms}}}
		})
		_, ex := f.excursions(1, c.name)
		e := ex[0]
		named := len(e.Causes) == 1 && e.Causes[0].Kind == CauseKind(rundir.InsideSchedDelay)
		if named != (c.named != "") || (named && !strings.HasPrefix(e.Causes[0].Evidence, c.named)) || e.CoveredMs != c.coveredMs {
			t.Errorf("%s: excursion %.3f–%.3f s: causes %+v, covered %v ms; want named %q, covered %v ms", c.name, e.StartS, e.EndS, e.Causes, e.CoveredMs, c.named, c.coveredMs)
		}
		var rows []string
		if e.Where != nil {
			for _, r := range e.Where.Rows {
				rows = append(rows, r.Source)
			}
		}
		if !slices.Equal(rows, c.rows) {
			t.Errorf("%s: where %+v, want rows from %v", c.name, e.Where, c.rows)
		}
	}
}
