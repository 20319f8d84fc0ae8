package estimate

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestAppendLoadSkipsDamagedLines(t *testing.T) {
	dir := t.TempDir()
	a := Sample{Run: "r1", Target: "local", SyncLevel: 2, Orders: 1_000_000, DurationS: 3, Stages: map[string]float64{StagePreload: 1.3}}
	if err := Append(dir, a); err != nil {
		t.Fatal(err)
	}
	// A runner killed mid-write leaves a partial line; the next run appends after it.
	f, _ := os.OpenFile(filepath.Join(dir, HistoryFile), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"run":"r2","stag`)
	f.Close()
	b := a
	b.Run = "r3"
	if err := Append(dir, b); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Run != "r1" || got[1].Run != "r3" {
		t.Fatalf("loaded %+v, want r1 and r3 (the torn r2 skipped)", got)
	}
	if none, err := Load(t.TempDir()); err != nil || none != nil {
		t.Fatalf("no history: %v, %v", none, err)
	}
}

func TestEstimateFitsHistoryPerTargetAndSyncLevel(t *testing.T) {
	var hist []Sample
	add := func(target string, sync int, orders int64, st map[string]float64) {
		hist = append(hist, Sample{Target: target, SyncLevel: sync, Orders: orders, DurationS: 60, Stages: st})
	}
	// local, sync 2: preload 0.2 s + 1 µs/order; load runs 2 s past its duration; finish 1 s + 0.1 µs/order.
	for _, n := range []int64{1_000_000, 5_000_000, 10_000_000} {
		add("local", 2, n, map[string]float64{StageStart: 1.5, StagePreload: 0.2 + 1e-6*float64(n), StageLoad: 62, StageFinish: 1 + 1e-7*float64(n), StageAnalysis: 0.5})
	}
	// Another target, much slower: must not leak into local's estimates.
	add("aws:perf", 2, 1_000_000, map[string]float64{StageStart: 90, StagePreload: 9, StageLoad: 70, StageFinish: 20, StageAnalysis: 1})
	m := NewModel(hist)

	e := m.Estimate(Run{Target: "local", SyncLevel: 2, Orders: 20_000_000, Duration: time.Minute})
	want := map[string]time.Duration{StageStart: 1500 * time.Millisecond, StagePreload: 20200 * time.Millisecond, StageLoad: 62 * time.Second, StageFinish: 3 * time.Second, StageAnalysis: 500 * time.Millisecond}
	for st, d := range want {
		if got := e.Stage(st); got != d {
			t.Errorf("%s: %v, want %v (fitted line extrapolated to 20M)", st, got, d)
		}
	}
	if !strings.Contains(e.Stages[1].From, "3 runs of the reference engine on local at sync level 2") {
		t.Errorf("preload source %q", e.Stages[1].From)
	}

	// Sync level 0 has no history: the preload rate is not borrowed from level 2, the other
	// stages are.
	e0 := m.Estimate(Run{Target: "local", SyncLevel: 0, Orders: 1_000_000, Duration: time.Minute})
	if e0.Stages[1].From != "default (this machine)" || e0.Stage(StageStart) != 1500*time.Millisecond ||
		!strings.Contains(e0.Stages[0].From, "at any sync level") {
		t.Errorf("sync 0 estimate %+v", e0.Stages)
	}
	// An unknown target uses the defaults throughout.
	for _, s := range NewModel(hist).Estimate(Run{Target: "aws:other", SyncLevel: 2, Orders: 1000, Duration: time.Second}).Stages {
		if s.From != "default (this machine)" {
			t.Errorf("unknown target: %s from %q", s.Name, s.From)
		}
	}
	// A stored book installed is not a preload built; installs at any sync level inform it.
	if s := m.Estimate(Run{Target: "local", SyncLevel: 2, Orders: 1_000_000, BookReused: true}).Stages[1]; s.From != "default (this machine)" {
		t.Errorf("reused book preload from %q", s.From)
	}
	hist = append(hist, Sample{Target: "local", SyncLevel: 0, Orders: 10_000_000, BookReused: true, Stages: map[string]float64{StagePreload: 2, StageStart: 0.3}})
	e = NewModel(hist).Estimate(Run{Target: "local", SyncLevel: 2, Orders: 5_000_000, BookReused: true})
	if e.Stage(StagePreload) != time.Second || !strings.HasPrefix(e.Stages[1].From, "1 run of the reference engine on local installing a stored book") || e.Stage(StageStart) != 300*time.Millisecond {
		t.Errorf("reused estimate %+v", e.Stages)
	}
}

// An engine is estimated from its own earlier runs only (another engine's preload rate can be
// several times off: the Aeron engine's is much slower than the reference engine's); with
// none, from the rate it declares; with neither, from the defaults, which say whose they are.
func TestEstimatePerEngine(t *testing.T) {
	const aeron = "command /x/start-node.sh -Xmx1g --config"
	var hist []Sample
	for _, n := range []int64{500_000, 1_000_000} {
		// The reference engine: 1 µs an order. Older lines name no engine: they are its.
		hist = append(hist, Sample{Target: "local", SyncLevel: 2, Orders: n, Stages: map[string]float64{StagePreload: 1e-6 * float64(n), StageStart: 1}})
		hist = append(hist, Sample{Target: "local", Engine: aeron, SyncLevel: 2, Orders: n, Stages: map[string]float64{StagePreload: 1e-5 * float64(n), StageStart: 4}})
	}
	m := NewModel(hist)
	e := m.Estimate(Run{Target: "local", Engine: aeron, SyncLevel: 2, Orders: 2_000_000, PreloadRate: 1e9})
	if e.Stage(StagePreload) != 20*time.Second || e.Stage(StageStart) != 4*time.Second ||
		!strings.HasPrefix(e.Stages[1].From, "2 runs of engine "+aeron+" on local at sync level 2") {
		t.Errorf("aeron from its own runs: %+v, want preload 20 s and start 4 s from its 2 runs (its history beats its declared rate)", e.Stages)
	}
	ref := m.Estimate(Run{Target: "local", Engine: "reference", SyncLevel: 2, Orders: 2_000_000})
	if ref.Stage(StagePreload) != 2*time.Second || ref.Stage(StageStart) != time.Second {
		t.Errorf("reference from its own runs: %+v, want preload 2 s, start 1 s", ref.Stages)
	}
	// Another engine with no history: its declared rate, else the defaults named as the reference engine's.
	other := Run{Target: "local", Engine: "command /y/engine", SyncLevel: 2, Orders: 1_000_000, PreloadRate: 250_000}
	if e := m.Estimate(other); e.Stage(StagePreload) != 4*time.Second ||
		e.Stages[1].From != "declared rate (engine.preload_rate 250000 orders/s; no run of engine command /y/engine in the history)" {
		t.Errorf("declared rate: %v from %q, want 4 s from engine.preload_rate", e.Stage(StagePreload), e.Stages[1].From)
	}
	other.PreloadRate = 0
	if e := m.Estimate(other); e.Stage(StagePreload) != 1600*time.Millisecond || !strings.HasPrefix(e.Stages[1].From, "default (the reference engine on this machine") ||
		!strings.HasPrefix(e.Stages[0].From, "default (the reference engine") {
		t.Errorf("no history, no rate: %v from %q, want the defaults named as the reference engine's", e.Stage(StagePreload), e.Stages[1].From)
	}
}

func TestFitOneSize(t *testing.T) {
	one := []float64{1, 1}
	// One size: the runs give the fixed cost, the prior the per-item cost.
	if l, _ := fitRuns([]float64{1e6, 1e6}, []float64{1, 3}, 1e6, line{b: 1e-6}); l.a != 1 || l.b != 1e-6 {
		t.Errorf("one size, prior slope: %+v", l)
	}
	// Faster than the prior's per-item cost alone: their own rate.
	if l, _ := fitRuns([]float64{1e6, 1e6}, []float64{1, 3}, 1e6, line{b: 5e-6}); l.a != 0 || l.b != 2e-6 {
		t.Errorf("one size, faster than the prior: %+v", l)
	}
	if l, _ := fitRuns([]float64{1e6, 1e6}, []float64{1, 3}, 1e6, line{a: 0.8}); l.a != 2 || l.b != 0 {
		t.Errorf("constant: %+v", l)
	}
	// Falling times with size (noise): a constant, not a negative slope.
	if l := fitLine([]float64{1, 2}, []float64{3, 1}, one); l.a != 2 || l.b != 0 {
		t.Errorf("negative slope: %+v", l)
	}
}

// One small run must not price a big one: a 100K-order quickstart that installed a stored book
// in 1.046 s (most of it fixed cost) priced installing 5M at 52.3 s and 10M at 1 m 44.6 s, longer
// than building 10M. Its fixed cost is learned; the per-order cost stays the default's until runs
// of other sizes show one.
func TestEstimateOneSmallRunDoesNotScale(t *testing.T) {
	hist := []Sample{{Target: "local", SyncLevel: 2, Orders: 100_000, BookReused: true, Stages: map[string]float64{StagePreload: 1.046}}}
	m := NewModel(hist)
	for _, n := range []int64{5_000_000, 10_000_000} {
		install := m.Estimate(Run{Target: "local", SyncLevel: 2, Orders: n, BookReused: true})
		build := m.Estimate(Run{Target: "local", SyncLevel: 2, Orders: n})
		want := time.Duration((1.046 - 0.034 + 340e-9*float64(n)) * float64(time.Second)).Round(100 * time.Millisecond)
		if got := install.Stage(StagePreload); got != want || got >= build.Stage(StagePreload) {
			t.Errorf("install %d orders: %v, want %v (fixed cost from the run, per-order cost the default's), and below building them (%v)", n, got, want, build.Stage(StagePreload))
		}
		if f := install.Stages[1].From; !strings.Contains(f, "1 run of the reference engine on local installing a stored book (their fixed cost") {
			t.Errorf("install %d orders from %q, want it to say the fixed cost came from the run", n, f)
		}
	}
	// Two sizes, asked within reach of them: a fitted line, weighted to the size asked, with the
	// runs' spread about it.
	hist = append(hist, Sample{Target: "local", SyncLevel: 2, Orders: 1_000_000, BookReused: true, Stages: map[string]float64{StagePreload: 1.3}})
	e := NewModel(hist).Estimate(Run{Target: "local", SyncLevel: 2, Orders: 2_000_000, BookReused: true})
	if got, want := e.Stage(StagePreload), 1600*time.Millisecond; got != want || !strings.Contains(e.Stages[1].From, "within ±0.0 s of the fit") {
		t.Errorf("two sizes: %v from %q, want %v on the line through both", got, e.Stages[1].From, want)
	}
}

// A FIFO in the results folder in place of the history is refused at once (it used to hang
// rig validate and rig run, which read the history for their estimates).
func TestLoadRefusesAFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, HistoryFile), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := Load(dir); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "named pipe") {
			t.Fatalf("Load of a FIFO: %v, want refused naming it", err)
		}
	case <-time.After(30 * time.Second): // a guard against hanging the suite, not a measurement
		t.Fatal("Load blocked on a FIFO")
	}
}
