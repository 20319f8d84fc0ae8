// Package estimate predicts how long each stage of a run takes, from the stage times the runner
// recorded for earlier runs on the same target (a history file in the results folder), falling
// back to built-in defaults when there are none. It owns that
// history file: the runner appends to it with Append, `rig validate` reads it with Load.
package estimate

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/rig-dev/rig/internal/untrusted"
)

// HistoryFile is the history's name inside the results folder: one Sample per line.
const HistoryFile = "stage-times.jsonl"

// Stages of a run, in order, between the run phases events.jsonl marks (rundir.RunPhase;
// runner/stages.go maps them):
//
//	start     run start -> preload_start: agents, staging, engines started, a leader elected
//	preload   preload_start -> preload_end: the resting book built (or a stored one installed)
//	load      preload_end -> load_end: the probe stream's start, its duration, waits past it
//	finish    load_end -> end: final state and hashes, engines stopped, data removed, collection
//	analysis  end -> summary, report and plots written
const (
	StageStart    = "start"
	StagePreload  = "preload"
	StageLoad     = "load"
	StageFinish   = "finish"
	StageAnalysis = "analysis"
)

// Stages lists the stage names in run order.
var Stages = []string{StageStart, StagePreload, StageLoad, StageFinish, StageAnalysis}

// Sample is one run's measured stage times: a line of HistoryFile.
type Sample struct {
	Run        string             `json:"run"`
	At         time.Time          `json:"at"`
	Target     string             `json:"target"`           // Target(inventory target, stack)
	Engine     string             `json:"engine,omitempty"` // the engine's key (playbooks Engine.EstimateKey); empty: the reference engine
	SyncLevel  int                `json:"sync_level"`
	Orders     int64              `json:"orders"`                // preload orders
	Probes     int64              `json:"probes"`                // probes the playbook sends (rate x duration)
	BookReused bool               `json:"book_reused,omitempty"` // the book was installed, not built
	DurationS  float64            `json:"duration_s"`            // the playbook's load duration
	Stages     map[string]float64 `json:"stages_s"`              // seconds per stage that completed
}

// Target names a target for the history: "local", or the stack or inventory it ran on.
func Target(target, stack string) string {
	if stack != "" {
		return target + ":" + stack
	}
	return target
}

// Append adds s to the history in resultsDir (created if needed). One write of one line, so
// concurrent runners cannot interleave partial lines; a torn last line (a runner killed
// mid-write) is ended first so it does not swallow this one.
func Append(resultsDir string, s Sample) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(resultsDir, 0o755); err != nil {
		return fmt.Errorf("record stage times: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(resultsDir, HistoryFile), os.O_CREATE|os.O_APPEND|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("record stage times: %w", err)
	}
	line := append(b, '\n')
	var last [1]byte
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		if _, err := f.ReadAt(last[:], fi.Size()-1); err == nil && last[0] != '\n' {
			line = append([]byte{'\n'}, line...)
		}
	}
	_, err = f.Write(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("record stage times in %s: %w", f.Name(), err)
	}
	return nil
}

// MaxHistoryBytes bounds what Load reads of a history: some 200,000 runs' lines; lines past it are not read.
const MaxHistoryBytes = 64 << 20

// Load reads the history in resultsDir; no file is no history. A damaged line (a runner killed
// mid-write) is skipped, not fatal: the history only informs estimates.
func Load(resultsDir string) ([]Sample, error) {
	// A regular file only: a FIFO in --results used to hang rig validate and rig run here.
	f, err := untrusted.Open(filepath.Join(resultsDir, HistoryFile), "stage-time history")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read stage-time history: %w", err)
	}
	defer f.Close()
	var out []Sample
	sc := bufio.NewScanner(io.LimitReader(f, MaxHistoryBytes))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var s Sample
		if json.Unmarshal(sc.Bytes(), &s) == nil && s.Stages != nil {
			out = append(out, s)
		}
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read stage-time history %s: %w", f.Name(), err)
	}
	return out, nil
}

// Run describes the run to estimate.
type Run struct {
	Target string
	Engine string // the engine's key; empty: the reference engine
	// PreloadRate is the orders per second the engine declares it preloads at (engine.preload_rate;
	// 0: none): the preload's estimate when no earlier run of the engine is in the history.
	PreloadRate float64
	SyncLevel   int
	Orders      int64
	Probes      int64 // rate x duration
	BookReused  bool
	Duration    time.Duration
}

// Stage is one stage's estimate and where it came from.
type Stage struct {
	Name string
	D    time.Duration
	From string // "5 runs on local at sync level 2", "default (this machine)"
}

// Estimate is a run's estimate, stage by stage.
type Estimate struct {
	Stages []Stage
	Total  time.Duration
}

// Stage returns the named stage's estimate (zero if absent).
func (e Estimate) Stage(name string) time.Duration {
	for _, s := range e.Stages {
		if s.Name == name {
			return s.D
		}
	}
	return 0
}

// Model fits stage times to earlier runs: each stage is a + b·x seconds, x the preload's orders
// (the analysis: the probes; the load: on top of the playbook's duration), fitted to the newest
// runs of the same engine on the same target and sync level, else the same engine and target at
// any sync level (fitRuns: how far it trusts them), else (the preload) the rate the engine
// declares, else the defaults, which are the reference engine's.
type Model struct {
	samples []Sample
}

// NewModel makes a model from a history (nil: defaults only).
func NewModel(history []Sample) *Model { return &Model{samples: history} }

// maxSamples bounds the fit to recent runs: a target's speed drifts (disks, kernels, neighbours).
const maxSamples = 30

// referenceEngine is the key of the engine in the rig binary, and of history lines written before
// the history named engines (most were the reference engine's).
const referenceEngine = "reference"

func engineKey(k string) string {
	if k == "" {
		return referenceEngine
	}
	return k
}

// line is t = a + b·x seconds.
type line struct{ a, b float64 }

func (l line) at(x int64) float64 { return l.a + l.b*float64(x) }

// x is what a stage's time grows with.
func x(stage string, orders, probes int64) int64 {
	if stage == StageAnalysis {
		return probes
	}
	return orders
}

// Defaults are what validate uses for a target with no history: fitted to runs of the local
// target with 3 servers (the figures: docs/constants.md, "Stage estimates with no history").
var defaults = map[string]line{
	StageStart:    {a: 0.8},
	StagePreload:  {a: 0.1, b: 1 / 650e3}, // sync level 1-2; level 0 below
	StageLoad:     {a: 0.1},               // past the duration
	StageFinish:   {a: 0.25, b: 95e-9},    // final state hashes walk the book on every node
	StageAnalysis: {a: 0.1, b: 4e-6},      // per probe: probes.bin, histograms, plots
}

var (
	defaultPreloadUnsynced = line{a: 0.1, b: 1 / 800e3}
	// Copy + restore of a stored book on every server, fitted to the shipped snapshot-pause sweep.
	defaultInstall = line{a: 0.6, b: 340e-9}
)

// Estimate predicts r's stage times.
func (m *Model) Estimate(r Run) Estimate {
	var e Estimate
	for _, st := range Stages {
		l, from := m.fit(st, r)
		sec := max(l.at(x(st, r.Orders, r.Probes)), 0)
		if st == StageLoad {
			sec += r.Duration.Seconds()
		}
		if st == StagePreload && r.Orders == 0 {
			sec, from = 0, "no preload"
		}
		d := time.Duration(sec * float64(time.Second)).Round(100 * time.Millisecond)
		e.Stages = append(e.Stages, Stage{Name: st, D: d, From: from})
		e.Total += d
	}
	return e
}

func (m *Model) fit(stage string, r Run) (line, string) {
	// Preload at another sync level, or a book built rather than installed, is different work:
	// it never falls back. Start-up depends on the book too: an installed book's engines start
	// inside the preload stage (they restore it), so start prefers runs alike in that.
	type level struct{ anySync, anyBook bool }
	levels := []level{{false, false}, {true, false}}
	if stage != StagePreload {
		levels = append(levels, level{true, true})
	}
	for _, lv := range levels {
		var xs, ys []float64
		for i := len(m.samples) - 1; i >= 0 && len(xs) < maxSamples; i-- {
			s := m.samples[i]
			y, ok := s.Stages[stage]
			switch {
			case !ok || s.Target != r.Target || engineKey(s.Engine) != engineKey(r.Engine):
				continue
			case stage == StagePreload && (s.SyncLevel != r.SyncLevel && !s.BookReused || s.Orders == 0):
				continue // an installed book does not depend on the sync level; a built one does
			case !lv.anySync && s.SyncLevel != r.SyncLevel && stage != StagePreload:
				continue
			case !lv.anyBook && (stage == StagePreload || stage == StageStart) && s.BookReused != r.BookReused:
				continue
			}
			if stage == StageLoad {
				y -= s.DurationS
			}
			xs, ys = append(xs, float64(x(stage, s.Orders, s.Probes))), append(ys, y)
		}
		if len(xs) == 0 {
			continue
		}
		where := fmt.Sprintf("at sync level %d", r.SyncLevel)
		switch {
		case stage == StagePreload && r.BookReused:
			where = "installing a stored book"
		case lv.anySync:
			where = "at any sync level"
		}
		from := fmt.Sprintf("%d run%s of %s on %s %s", len(xs), plural(len(xs)), engineName(r.Engine), r.Target, where)
		prior, _ := m.prior(stage, r)
		l, how := fitRuns(xs, ys, float64(x(stage, r.Orders, r.Probes)), prior)
		return l, from + how
	}
	return m.prior(stage, r)
}

// prior is a stage's line with no run to learn from: the rate the engine declares, else the
// defaults, which are the reference engine's.
func (m *Model) prior(stage string, r Run) (line, string) {
	def := "default (this machine)"
	if engineKey(r.Engine) != referenceEngine {
		def = "default (the reference engine on this machine; no run of " + engineName(r.Engine) + " in the history)"
	}
	switch {
	case stage == StagePreload && r.BookReused:
		return defaultInstall, def
	case stage == StagePreload && r.PreloadRate > 0:
		return line{b: 1 / r.PreloadRate}, fmt.Sprintf("declared rate (engine.preload_rate %.0f orders/s; no run of %s in the history)", r.PreloadRate, engineName(r.Engine))
	case stage == StagePreload && r.SyncLevel == 0:
		return defaultPreloadUnsynced, def
	}
	return defaults[stage], def
}

// reach is how far past the sizes the runs had a fitted slope is trusted: a line through runs of
// 1M and 5M orders says little about 100M, and one run says nothing about the slope at all.
const reach = 2

// fitRuns fits a stage's line to earlier runs for a run of size ask, and says how beside the runs'
// count. Runs of at least two sizes, asked within reach of them, get a least-squares line weighted
// to the size asked. Otherwise the runs cannot separate fixed from per-item cost, so they give
// only the fixed cost and the per-item cost is the prior's: one 100K-order run whose time was
// mostly start-up must not price 10M orders at 100 times that time. Where the runs were faster
// than the prior's per-item cost alone, they show no fixed cost, and their own rate is used.
func fitRuns(xs, ys []float64, ask float64, prior line) (line, string) {
	distinct := slices.Compact(slices.Sorted(slices.Values(xs)))
	lo, hi := distinct[0], distinct[len(distinct)-1]
	w := make([]float64, len(xs))
	for i, v := range xs {
		w[i] = 1
		if v > 0 && ask > 0 {
			d := math.Abs(math.Log(v / ask))
			w[i] = 1 / ((1 + d) * (1 + d))
		}
	}
	var l line
	how := ""
	if len(distinct) >= 2 && ask >= lo/reach && ask <= hi*reach {
		l = fitLine(xs, ys, w)
	} else {
		var sw, sa, sxx, sxy float64
		for i := range xs {
			sw += w[i]
			sa += w[i] * (ys[i] - prior.b*xs[i])
			sxx += xs[i] * xs[i]
			sxy += xs[i] * ys[i]
		}
		switch a := sa / sw; {
		case a >= 0:
			l = line{a: a, b: prior.b}
			if prior.b > 0 && (len(distinct) > 1 || ask != lo) {
				how = fmt.Sprintf(" (their fixed cost; the per-item cost is the default's: %s)", sizes(distinct, ask))
			}
		case sxx > 0:
			l = line{b: sxy / sxx}
			how = fmt.Sprintf(" (their rate: faster than the default's per-item cost alone; %s)", sizes(distinct, ask))
		default:
			l = line{a: max(prior.a, 0)}
		}
	}
	if n := len(xs); n >= 2 {
		var ss float64
		for i := range xs {
			r := ys[i] - l.at(int64(xs[i]))
			ss += r * r
		}
		how += fmt.Sprintf(", within ±%.1f s of the fit (rms)", math.Sqrt(ss/float64(n)))
	}
	return l, how
}

// sizes says which sizes the runs had against the one asked.
func sizes(distinct []float64, ask float64) string {
	if len(distinct) == 1 {
		return fmt.Sprintf("one size, %.0f, asked %.0f", distinct[0], ask)
	}
	return fmt.Sprintf("sizes %.0f–%.0f, asked %.0f, beyond %d× of them", distinct[0], distinct[len(distinct)-1], ask, reach)
}

// engineName is how an estimate's source names the engine.
func engineName(k string) string {
	if k = engineKey(k); k == referenceEngine {
		return "the reference engine"
	}
	return "engine " + k
}

// fitLine fits y = a + b·x by weighted least squares (weights w), with a and b kept >= 0. With
// one distinct x there is no slope to fit: a constant (fitRuns never asks for one).
func fitLine(xs, ys, w []float64) line {
	var sw, sx, sy, sxx, sxy float64
	for i := range xs {
		sw += w[i]
		sx += w[i] * xs[i]
		sy += w[i] * ys[i]
		sxx += w[i] * xs[i] * xs[i]
		sxy += w[i] * xs[i] * ys[i]
	}
	den := sw*sxx - sx*sx
	if den <= 0 {
		return line{a: max(sy/sw, 0)}
	}
	b := (sw*sxy - sx*sy) / den
	a := (sy - b*sx) / sw
	switch {
	case b < 0 || math.IsNaN(b):
		return line{a: max(sy/sw, 0)}
	case a < 0:
		return line{b: sxy / sxx} // through the origin
	}
	return line{a: a, b: b}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
