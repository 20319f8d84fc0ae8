package analysis

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// stallProbes is one probe every 10 ms over [0, endMs) at 1 ms, with a stall of stallMs at each
// of stalls: a probe sent during it waits until it ends, as an open-loop client sees it.
func stallProbes(endMs int64, stallMs int64, stalls ...int64) []rundir.Probe {
	var ps []rundir.Probe
	for ms := int64(0); ms < endMs; ms += 10 {
		lat := int64(time.Millisecond)
		for _, s := range stalls {
			if ms >= s && ms < s+stallMs {
				lat = (s+stallMs-ms)*int64(time.Millisecond) + lat
			}
		}
		ps = append(ps, rundir.Probe{IntendedNs: at(ms).UnixNano(), LatencyNs: lat, Outcome: rundir.ProbeOK})
	}
	return ps
}

// writeSamples writes node's OS samples, one a second over [1 s, endMs], from mk.
func writeSamples(t *testing.T, dir, node string, endMs int64, mk func(ms int64) rundir.Sample) {
	t.Helper()
	p := filepath.Join(dir, node, rundir.SamplesDir, "os"+rundir.SamplesExt)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for ms := int64(1000); ms <= endMs; ms += 1000 {
		s := mk(ms)
		s.Time, s.Interval, s.CPUs = at(ms), 1, 2
		j, _ := json.Marshal(s)
		b.Write(append(j, '\n'))
	}
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestExcursionsMergedAndAttributed: every excursion is found, the probes of one stall are one
// excursion with its start, end and peak, and each is attributed to what the run recorded then
// (action, GC pause, writeback) or listed as unexplained. Another process's CPU with no
// run-queue wait of the engine's threads recorded names nothing.
func TestExcursionsMergedAndAttributed(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	ps := stallProbes(30_000, 100, 5000, 8000, 12_000, 15_500, 18_500, 21_000)
	for i := range ps { // a lost probe at 24 s: waited to the end of load
		if ps[i].IntendedNs == at(24_000).UnixNano() {
			ps[i].Outcome, ps[i].LatencyNs = rundir.ProbeLost, int64(6*time.Second)
		}
	}
	f.probes(ps)
	f.action(11_990, "snapshot", "node-0", map[string]any{"index": 1})
	f.snap(12_150, "node-0", 1, 5, nil)
	f.run(30_000, "load_end")
	f.run(30_500, "end")
	f.status("node-0", engine.Status{Phase: "ready"})
	stamp := at(8060).Format("2006-01-02T15:04:05.000-0700")
	os.WriteFile(filepath.Join(f.dir, "node-0", "gc-1.log"), []byte(
		"["+stamp+"][8.0s][info][gc          ] GC(3) Pause Full (System.gc()) 60M->3M(240M) 55.000ms\n"), 0o644)
	os.WriteFile(filepath.Join(f.dir, "node-0", "engine.log"), []byte(
		`{"time":"`+at(21_050).Format(time.RFC3339Nano)+`","msg":"slow apply"}`+"\n"+
			`{"time":"`+at(2000).Format(time.RFC3339Nano)+`","msg":"started"}`+"\n"), 0o644)
	writeSamples(t, f.dir, "node-0", 31_000, func(ms int64) rundir.Sample {
		s := rundir.Sample{Host: &rundir.SampleHost{BusyPct: 40}, Procs: []rundir.SampleProc{{PID: 7, CPUPct: 25}}, Agent: rundir.SampleProc{PID: 8, CPUPct: 3}}
		switch ms {
		case 16_000: // [15, 16] s: a CPU hog beside the run
			s.Host.BusyPct = 196
		case 19_000: // [18, 19] s: the kernel writing back
			s.VM = rundir.SampleVM{NrWriteback: 4000, NrDirty: 90_000}
		}
		return s
	})
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	ex := s.Excursions
	if ex == nil {
		t.Fatal("no excursions")
	}
	if ex.ThresholdMs != 10 || ex.Count != 7 || len(ex.List) != 7 {
		t.Fatalf("threshold %v ms, %d excursions (%d listed), want 10 ms and 7: %+v", ex.ThresholdMs, ex.Count, len(ex.List), ex.List)
	}
	first := ex.List[0]
	// Probes at 5.00 … 5.09 s waited 101 … 11 ms: one excursion from 5.0 s to the stall's end.
	if first.StartS != 5 || first.EndS != 5.101 || first.PeakS != 5 || first.PeakMs != 101 || first.Probes != 10 || first.Lost != 0 {
		t.Errorf("first excursion %+v, want 5.000–5.101 s, peak 101 ms at 5 s, 10 probes", first)
	}
	kinds := func(e Excursion) []CauseKind {
		var k []CauseKind
		for _, c := range e.Causes {
			k = append(k, c.Kind)
		}
		return k
	}
	want := []struct {
		atS  float64
		kind CauseKind // "" for unexplained
		has  string
	}{
		{5, "", ""},
		{8, CauseGC, "gc_log: 1 span(s) covering 55.000 ms (54 %) of it, longest 55.000 ms (Pause Full (System.gc()))"},
		{12, CauseAction, "snapshot"},
		{15.5, "", ""}, // other processes took 168 % of a core, but no engine thread is known to have waited
		{18.5, CauseWriteback, "4000 pages under writeback"},
		{21, "", ""},
		{24, "", ""},
	}
	for i, w := range want {
		e := ex.List[i]
		if e.StartS != w.atS {
			t.Errorf("excursion %d starts at %v s, want %v", i, e.StartS, w.atS)
		}
		if w.kind == "" {
			if len(e.Causes) != 0 {
				t.Errorf("excursion at %v s: causes %+v, want unexplained", e.StartS, e.Causes)
			}
			continue
		}
		if len(e.Causes) != 1 || e.Causes[0].Kind != w.kind || !strings.Contains(e.Causes[0].Evidence, w.has) {
			t.Errorf("excursion at %v s: causes %v %+v, want one %s with %q", e.StartS, kinds(e), e.Causes, w.kind, w.has)
		}
	}
	if l := ex.List[5].LogLines["node-0"]; len(l) != 1 || !strings.Contains(l[0], "slow apply") {
		t.Errorf("log lines at 21 s: %q", ex.List[5].LogLines)
	}
	if l := ex.List[0].LogLines; l != nil {
		t.Errorf("log lines at 5 s: %q, want none", l)
	}
	if last := ex.List[6]; last.Lost != 1 {
		t.Errorf("lost probe's excursion %+v", last)
	}
	if ex.Unexplained != 4 {
		t.Errorf("%d unexplained, want 4", ex.Unexplained)
	}
	rep := renderReport(s)
	if !strings.Contains(rep, "### Where the time went") || strings.Count(rep, "**unexplained**") != 4 || strings.Contains(rep, "host_cpu node-0 at") ||
		!strings.Contains(rep, "the 5 excursion(s) with the largest peak went") || !strings.Contains(rep, "; 2 more left out here: summary.json's excursions.list[].where has every listed excursion's") {
		t.Errorf("report's excursion section:\n%s", excursionsSection(s))
	}
}

// TestExcursionsPeriodic: ~100 ms stalls every 5.1 s (with a few ms of jitter, and an unrelated
// stall between two of them) are reported as one periodic series with its period.
func TestExcursionsPeriodic(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	stalls := []int64{2000, 7104, 12_197, 17_300, 22_406, 27_499, 9300}
	f.probes(stallProbes(32_000, 100, stalls...))
	f.run(32_000, "load_end")
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	ex := s.Excursions
	if ex == nil || ex.Count != 7 {
		t.Fatalf("excursions %+v, want 7", ex)
	}
	if len(ex.Periodic) != 1 {
		t.Fatalf("periodic %+v, want one series", ex.Periodic)
	}
	p := ex.Periodic[0]
	if math.Abs(p.PeriodS-5.1) > 0.01 || p.Count != 6 || p.FirstS != 2 || p.Unexplained != 6 || math.Abs(p.MedianMs-100) > 6 {
		t.Errorf("series %+v, want 6 every 5.1 s from 2 s, all unexplained", p)
	}
	for _, e := range ex.List {
		if isStray := e.StartS == 9.3; isStray == (e.PeriodS != 0) {
			t.Errorf("excursion at %v s has period %v", e.StartS, e.PeriodS)
		}
	}
	if rep := excursionsSection(s); !strings.Contains(rep, "**Periodic:** 6 excursions every 5.100 s from 2.0 s") {
		t.Errorf("report:\n%s", rep)
	}
}

// TestExcursionsRandomNotPeriodic: excursions at random times are not called periodic.
func TestExcursionsRandomNotPeriodic(t *testing.T) {
	d := &runData{origin: t0.UnixNano(), warmupEnd: t0.UnixNano() + int64(time.Second), loadEnd: t0.UnixNano() + int64(30*time.Second)}
	for seed := uint64(1); seed <= 50; seed++ {
		r := rand.New(rand.NewPCG(seed, 37))
		var starts []int64
		for range 8 + r.IntN(8) {
			starts = append(starts, t0.UnixNano()+int64(time.Second)+r.Int64N(int64(29*time.Second)))
		}
		slices.Sort(starts)
		if got, _ := d.periodic(starts, func(int) (float64, bool) { return 100, true }); len(got) != 0 {
			t.Errorf("seed %d: random starts %v called periodic: %+v", seed, starts, got)
		}
	}
	// The same check finds a series hidden among the random ones.
	r := rand.New(rand.NewPCG(99, 37))
	var starts []int64
	for k := range 6 {
		starts = append(starts, t0.UnixNano()+int64(1500*time.Millisecond)+int64(k)*int64(5100*time.Millisecond)+r.Int64N(int64(20*time.Millisecond)))
	}
	for range 8 {
		starts = append(starts, t0.UnixNano()+int64(time.Second)+r.Int64N(int64(29*time.Second)))
	}
	slices.Sort(starts)
	got, _ := d.periodic(starts, func(int) (float64, bool) { return 100, true })
	if len(got) != 1 || math.Abs(got[0].PeriodS-5.1) > 0.02 || got[0].Count < 6 {
		t.Errorf("series among random starts: %+v", got)
	}
}

// TestExcursionsWhereTheTimeWent: every excursion gets the windows' table of where its time
// went. One stall is covered by two JFR forces (one begun before it, clipped) and a GC pause
// on node-1 that overlaps the second force, so the rows' totals add up to more than the time
// they cover and the unexplained time is the excursion's length minus their union; a park
// covers nothing. Another has nothing recorded: no rows, all of it unexplained. A third is
// covered by a slow fsync of the disk model, which names it (cause force) as the table does. The
// JSON shape is the windows' own.
func TestExcursionsWhereTheTimeWent(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.probes(stallProbes(30_000, 100, 8000, 16_000, 22_000)) // each stall: [start, start + 101 ms]
	f.run(30_000, "load_end")
	f.run(30_500, "end")
	f.status("node-0", engine.Status{Phase: "ready"})
	f.status("node-1", engine.Status{Phase: "ready"})
	force := func(ms, durMs int64) rundir.InsideSpan {
		s := span37(ms, durMs, rundir.InsideForce, "log")
		s.Role, s.File = rundir.RoleLog, "log/0.dat"
		return s
	}
	gc := span37(8050, 30, rundir.InsideGCPause, "VM Thread")
	gc.Detail = "G1 Young"
	writeInside(t, f.dir, "node-1",
		force(7990, 30), force(8030, 40), gc, // covered: 8.000–8.020, 8.030–8.080
		span37(7900, 400, rundir.InsidePark, "idle"))
	writeInside(t, f.dir, "node-0", span37(12_000, 20, rundir.InsideCPU, "main")) // outside every excursion
	ds, err := rundir.CreateDiskSyncs(filepath.Join(f.dir, "node-0", rundir.DiskSyncsFile))
	if err != nil {
		t.Fatal(err)
	}
	ds.Write(rundir.DiskSync{AtNs: at(22_020).UnixNano(), DurNs: 60 * int64(time.Millisecond), File: "/data/rig/r1/log/0.dat", Bytes: 4096})
	ds.Write(rundir.DiskSync{AtNs: at(22_090).UnixNano(), DurNs: int64(time.Millisecond), File: "/data/rig/r1/log/0.dat", Bytes: 4096}) // too short to name it
	if err := ds.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	ex := s.Excursions
	if ex == nil || ex.Count != 3 || ex.Unexplained != 1 {
		t.Fatalf("excursions %+v, want 3, the one at 16 s unexplained", ex)
	}
	type row struct {
		node, thread, cause, role string
		count                     int
		totalMs, share            float64
		detail                    string
	}
	for i, c := range []struct {
		startS, lengthMs float64
		rows             []row
		unexplainedMs    float64
		causes           []CauseKind
		source           string
	}{
		{8, 101, []row{
			{"node-1", "log", "force", rundir.RoleLog, 2, 60, 59.41, "log/0.dat ×2"},
			{"node-1", "VM Thread", "gc_pause", "", 1, 30, 29.7, "G1 Young ×1"},
			{"node-1", "idle", "park", "", 1, 101, 100, ""},
		}, 31, []CauseKind{CauseKind(rundir.InsideForce)}, "jfr"}, // the GC pause covers 30 % of it: not named
		{16, 101, nil, 101, nil, "jfr"},
		{22, 101, []row{{"node-0", "", "force", "", 2, 61, 60.4, "/data/rig/r1/log/0.dat ×2"}}, 40, []CauseKind{CauseKind(rundir.InsideForce)}, SourceDiskModel},
	} {
		e := ex.List[i]
		if e.StartS != c.startS || e.LengthMs() != c.lengthMs {
			t.Errorf("excursion %d: %v s, %v ms long, want %v s, %v ms", i, e.StartS, e.LengthMs(), c.startS, c.lengthMs)
		}
		var kinds []CauseKind
		for _, k := range e.Causes {
			kinds = append(kinds, k.Kind)
		}
		slices.Sort(kinds)
		if !slices.Equal(kinds, c.causes) {
			t.Errorf("excursion %d: causes %v, want %v", i, kinds, c.causes)
		}
		if e.Where == nil {
			t.Fatalf("excursion %d: no table of where its time went", i)
		}
		var got []row
		for _, r := range e.Where.Rows {
			if r.Source != c.source {
				t.Errorf("excursion %d: row %+v, want source %s", i, r, c.source)
			}
			got = append(got, row{r.Node, r.Thread, r.Cause, r.Role, r.Count, r.TotalMs, r.SharePct, r.Detail})
		}
		if !slices.Equal(got, c.rows) {
			t.Errorf("excursion %d: rows\n%+v\nwant\n%+v", i, got, c.rows)
		}
		if e.Where.UnexplainedMs != c.unexplainedMs || !slices.Equal(e.Where.Sources, []string{"jfr", SourceDiskModel}) {
			t.Errorf("excursion %d: unexplained %v ms, sources %v; want %v ms, [jfr disk_model]", i, e.Where.UnexplainedMs, e.Where.Sources, c.unexplainedMs)
		}
	}
	if c := ex.List[2].Causes; len(c) != 1 || c[0].Node != "node-0" || !strings.HasPrefix(c[0].Evidence, "disk_model: 2 fsync(s) covering 61.000 ms (60 %) of it") {
		t.Errorf("excursion at 22 s: causes %+v, want the disk model's fsync", c)
	}
	if tot := ex.List[0].Where.Totals; !slices.Contains(tot, CauseTotal{Cause: "force", Source: "jfr", Count: 2, TotalMs: 60}) {
		t.Errorf("totals %+v, want force from jfr: 2, 60 ms", tot)
	}

	// summary.json: excursions.list[].where has the windows' fields, named alike.
	b, err := json.Marshal(TimeWindow{Kind: WindowSnapshot, WhereTime: *ex.List[0].Where})
	if err != nil {
		t.Fatal(err)
	}
	var win, exc map[string]any
	json.Unmarshal(b, &win)
	b, _ = json.Marshal(ex)
	json.Unmarshal(b, &exc)
	where, _ := exc["list"].([]any)[0].(map[string]any)["where"].(map[string]any)
	for _, k := range []string{"sources", "rows", "totals", "unexplained_ms"} {
		if where[k] == nil || win[k] == nil {
			t.Errorf("field %q: excursion's where %v, window %v", k, where[k], win[k])
		}
	}

	rep := excursionsSection(s)
	for _, want := range []string{
		"Where the time of the 3 excursion(s) with the largest peak went",
		"**excursion #1**: 8.000 s – 8.101 s (101 ms), peak 101 ms; **unexplained 31.0 ms (31 %)**",
		"| node-1 | log | force (log) | jfr | 2 | 60.0 ms | 59.4 % | log/0.dat ×2 |",
		"**excursion #2**: 16.000 s – 16.101 s (101 ms), peak 101 ms, no cause; **unexplained 101 ms (100 %)**\n\nNo cause recorded in it.",
	} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
}

// TestActionWithEffectExplainsUntilItEnds: a kind whose effect lasts (actions.Spanner: a hog
// until its cpu_hog_end) explains excursions all through it and actionExplains after its end
// event; one without (gc) only actionExplains after it.
func TestActionWithEffectExplainsUntilItEnds(t *testing.T) {
	f := newFixture(t)
	f.run(0, "load_start")
	f.run(1000, "warmup_end")
	f.action(2000, "cpu_hog", "node-0", map[string]any{"as": "leader", "pid": 7})
	f.action(9000, "cpu_hog_end", "node-0", map[string]any{"as": "leader", "pid": 7})
	f.action(2000, "gc", "node-1", map[string]any{"as": "follower"})
	// 6 s: inside the hog, 4 s after both events; 10 s: 1 s after its end; 14 s: 5 s after.
	f.probes(stallProbes(16_000, 100, 6000, 10_000, 14_000))
	f.run(16_000, "load_end")
	s, err := Analyze(f.close())
	if err != nil {
		t.Fatal(err)
	}
	if s.Excursions == nil || len(s.Excursions.List) != 3 {
		t.Fatalf("excursions %+v, want 3", s.Excursions)
	}
	for i, want := range []string{"cpu_hog", "cpu_hog_end", ""} {
		e := s.Excursions.List[i]
		var got []string
		for _, c := range e.Causes {
			if c.Kind == CauseAction {
				got = append(got, c.Evidence)
			}
		}
		switch {
		case want == "" && len(got) > 0:
			t.Errorf("excursion at %.1f s named %v, want no action", e.StartS, got)
		case want != "" && !slices.Contains(got, want+" action"):
			t.Errorf("excursion at %.1f s named %v, want %s", e.StartS, got, want)
		case slices.Contains(got, "gc action"):
			t.Errorf("excursion at %.1f s named the gc action of 2 s", e.StartS)
		}
	}
}
