// Package cost measures what an engine's own recording (the Go flight recorder, Java Flight
// Recorder) costs the figures a run reports: probe p50 and preload throughput, with recording
// on and off in alternating phases of one run, so the machine's load falls on both alike
// (recording is on by default only if its cost is within Goals). The load is the rig's own load
// generator (loadgen.Preload, loadgen.Probe). An engine kind plugs in as an Engine: the reference
// engine is ReferenceEngine; a JVM engine starts with and without its JFR options.
package cost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/rig-dev/rig/internal/ctxtime"
	"github.com/rig-dev/rig/internal/loadavg"
	"github.com/rig-dev/rig/loadgen"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"github.com/rig-dev/rig/recording"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/stats"
)

// Engine starts an engine for one phase of the bench.
type Engine interface {
	// Name says what is measured, for the report ("reference engine, flight recorder 60s").
	Name() string
	// Start launches a fresh engine (cluster) with its data under dir, recording or not, and
	// returns once its processes run (the load generator waits for a leader).
	Start(ctx context.Context, dir string, recording bool) (Running, error)
}

// Running is an engine started for one phase.
type Running struct {
	Servers []string     // client addresses
	Stop    func() error // stops every process and waits for it
	// Dump, if set, fetches the recording the way a run collects it after a window and
	// returns its size (not timed: a run dumps between windows).
	Dump func(ctx context.Context) (int64, error)
	// Switch starts and dumps an idle recorder (Options.Windows): every server's, as one.
	Switch recording.Switch
}

// Windows is a probe stream's windows, as a run's timeline has them: one lasting For every
// Every, the first Every after the stream's start, each with recording.DefaultWindowOptions'
// lead and tail. Zero: the recorder runs throughout.
type Windows struct {
	Every, For time.Duration
}

// starts are the windows' offsets within a stream of length d that end before it does.
func (w Windows) starts(d time.Duration) []time.Duration {
	var out []time.Duration
	if w.Every <= 0 {
		return nil
	}
	for at := w.Every; at+w.For+recording.DefaultWindowOptions.Tail < d; at += w.Every {
		out = append(out, at)
	}
	return out
}

// Options say what one bench run does.
type Options struct {
	Engine    Engine
	Rounds    int           // rounds of one phase each way; the first phase of a round alternates
	Orders    int           // resting orders preloaded each phase
	ProbeRate float64       // probes per second, after the preload
	ProbeFor  time.Duration // length of the probe stream
	Dir       string        // working folder (engine data, probe files); removed phase by phase
	// Windows, when set, records only around windows of the probe stream (the engine starts
	// its recorder idle: Engine.Start is asked for recording, Running.Switch switches it).
	Windows    Windows
	Logger     *slog.Logger
	loadRootFS string // tests: a folder standing for / when reading proc/loadavg
}

// Phase is one engine's life in the bench: preload, then probes.
type Phase struct {
	Round       int     `json:"round"`
	Recording   bool    `json:"recording"`
	PreloadPerS float64 `json:"preload_orders_per_s"`
	ProbeP50Us  float64 `json:"probe_p50_us"`
	ProbeP99Us  float64 `json:"probe_p99_us"`
	Probes      int64   `json:"probes"`
	Lost        int64   `json:"lost"`
	DumpBytes   int64   `json:"dump_bytes,omitempty"` // the recording fetched after the phase
	// RecordedS is how long the recorder ran during the probe stream (Options.Windows; else the
	// whole stream).
	RecordedS float64 `json:"recorded_s,omitempty"`
	// InP50Us and OutP50Us split a windowed phase's probes by whether they were due while the
	// recorder ran: the same engine, seconds apart, so the machine's load falls on both alike.
	InP50Us      float64 `json:"in_p50_us,omitempty"`
	OutP50Us     float64 `json:"out_p50_us,omitempty"`
	DumpMBPerSec float64 `json:"dump_mb_per_s,omitempty"` // its size over the phase's length: how fast it fills
	Seconds      float64 `json:"seconds"`
}

// Mode is the medians of one mode's phases.
type Mode struct {
	PreloadPerS float64 `json:"preload_orders_per_s"`
	ProbeP50Us  float64 `json:"probe_p50_us"`
	ProbeP99Us  float64 `json:"probe_p99_us"`
}

// Report is a bench run.
type Report struct {
	Engine      string  `json:"engine"`
	Rounds      int     `json:"rounds"`
	Orders      int     `json:"orders"`
	ProbeRate   float64 `json:"probe_rate"`
	ProbeForS   float64 `json:"probe_for_s"`
	Phases      []Phase `json:"phases"`
	On          Mode    `json:"on"`
	Off         Mode    `json:"off"`
	P50Overhead float64 `json:"p50_overhead_pct"` // (on / off - 1) x 100
	PreloadLoss float64 `json:"preload_loss_pct"` // (1 - on / off) x 100
	MeetsGoal   bool    `json:"meets_goal"`       // p50 overhead <= 2 % and preload loss <= 5 %
	// RecordedShare is the share of the probe stream the recorder ran in, median over the
	// recording phases: 1 unless Options.Windows.
	RecordedShare float64 `json:"recorded_share,omitempty"`
	// InWindowPct is the median over windowed phases of (InP50Us / OutP50Us - 1) x 100: what
	// the recorder costs the probes it runs beside.
	InWindowPct  float64 `json:"in_window_pct,omitempty"`
	WindowEveryS float64 `json:"window_every_s,omitempty"`
	WindowForS   float64 `json:"window_for_s,omitempty"`
	Load1        float64 `json:"load1"` // before
	Load1After   float64 `json:"load1_after"`
	CPUs         int     `json:"cpus"`
	DumpMBPerSec float64 `json:"dump_mb_per_s,omitempty"` // median over the recording phases
}

// Goals: recording is on by default only within both (playbooks.DefaultRecording).
const (
	GoalP50Pct     = 2.0
	GoalPreloadPct = 5.0
)

// ErrBadOptions classifies invalid options (the message names the field).
var ErrBadOptions = errors.New("bad cost bench options")

func (o *Options) check() error {
	switch {
	case o.Engine == nil:
		return fmt.Errorf("%w: no engine", ErrBadOptions)
	case o.Rounds < 1:
		return fmt.Errorf("%w: rounds %d: want at least 1", ErrBadOptions, o.Rounds)
	case o.Orders < 1:
		return fmt.Errorf("%w: orders %d: want at least 1", ErrBadOptions, o.Orders)
	case !(o.ProbeRate > 0):
		return fmt.Errorf("%w: probe rate %v: want probes per second > 0", ErrBadOptions, o.ProbeRate)
	case o.ProbeFor < 100*time.Millisecond:
		return fmt.Errorf("%w: probe length %v: want at least 100ms", ErrBadOptions, o.ProbeFor)
	case o.Dir == "":
		return fmt.Errorf("%w: no working folder", ErrBadOptions)
	case o.Windows.Every < 0 || o.Windows.For < 0 || (o.Windows.Every > 0 && o.Windows.For <= 0):
		return fmt.Errorf("%w: windows every %s for %s: want both above 0, or every 0 (no windows)", ErrBadOptions, o.Windows.Every, o.Windows.For)
	case o.Windows.Every > 0 && len(o.Windows.starts(o.ProbeFor)) == 0:
		return fmt.Errorf("%w: windows every %s for %s: none ends within the probe stream of %s", ErrBadOptions, o.Windows.Every, o.Windows.For, o.ProbeFor)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.loadRootFS == "" {
		o.loadRootFS = "/"
	}
	return nil
}

// Run runs the bench: Rounds rounds of two phases, recording on and off, the first of each
// round alternating (on-off, off-on, ...), each phase a fresh engine preloaded then probed.
func Run(ctx context.Context, o Options) (Report, error) {
	if err := o.check(); err != nil {
		return Report{}, err
	}
	rep := Report{Engine: o.Engine.Name(), Rounds: o.Rounds, Orders: o.Orders, ProbeRate: o.ProbeRate,
		ProbeForS: o.ProbeFor.Seconds(), CPUs: runtime.NumCPU(), WindowEveryS: o.Windows.Every.Seconds(), WindowForS: o.Windows.For.Seconds()}
	if la, err := loadavg.Read(o.loadRootFS); err == nil {
		rep.Load1 = la.Load1
	}
	for round := range o.Rounds {
		for _, rec := range []bool{round%2 == 0, round%2 != 0} {
			ph, err := phase(ctx, o, round, rec)
			if err != nil {
				return rep, fmt.Errorf("round %d, recording %v: %w", round+1, rec, err)
			}
			o.Logger.Info("phase", "round", round+1, "recording", rec, "preload_per_s", int64(ph.PreloadPerS),
				"p50_us", ph.ProbeP50Us, "dump_bytes", ph.DumpBytes)
			rep.Phases = append(rep.Phases, ph)
		}
	}
	if la, err := loadavg.Read(o.loadRootFS); err == nil {
		rep.Load1After = la.Load1
	}
	rep.summarize()
	return rep, nil
}

func (r *Report) summarize() {
	var dump, share, inWin []float64
	mode := func(rec bool) Mode {
		var pre, p50, p99 []float64
		for _, p := range r.Phases {
			if p.Recording == rec {
				pre, p50, p99 = append(pre, p.PreloadPerS), append(p50, p.ProbeP50Us), append(p99, p.ProbeP99Us)
				if rec && p.DumpMBPerSec > 0 {
					dump = append(dump, p.DumpMBPerSec)
				}
				if rec && r.ProbeForS > 0 {
					share = append(share, p.RecordedS/r.ProbeForS)
				}
				if rec && p.OutP50Us > 0 {
					inWin = append(inWin, (p.InP50Us/p.OutP50Us-1)*100)
				}
			}
		}
		return Mode{PreloadPerS: stats.Median(pre), ProbeP50Us: stats.Median(p50), ProbeP99Us: stats.Median(p99)}
	}
	r.On, r.Off = mode(true), mode(false)
	r.DumpMBPerSec = stats.Median(dump)
	r.RecordedShare = stats.Median(share)
	r.InWindowPct = stats.Median(inWin)
	if r.Off.ProbeP50Us > 0 {
		r.P50Overhead = (r.On.ProbeP50Us/r.Off.ProbeP50Us - 1) * 100
	}
	if r.Off.PreloadPerS > 0 {
		r.PreloadLoss = (1 - r.On.PreloadPerS/r.Off.PreloadPerS) * 100
	}
	r.MeetsGoal = r.P50Overhead <= GoalP50Pct && r.PreloadLoss <= GoalPreloadPct
}

func phase(ctx context.Context, o Options, round int, rec bool) (ph Phase, err error) {
	ph = Phase{Round: round + 1, Recording: rec}
	dir := filepath.Join(o.Dir, fmt.Sprintf("round-%d-%v", round+1, map[bool]string{true: "on", false: "off"}[rec]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ph, err
	}
	defer os.RemoveAll(dir)
	start := time.Now()
	eng, err := o.Engine.Start(ctx, filepath.Join(dir, "engine"), rec)
	if err != nil {
		return ph, fmt.Errorf("start engine: %w", err)
	}
	defer func() {
		if serr := eng.Stop(); err == nil && serr != nil {
			err = fmt.Errorf("stop engine: %w", serr)
		}
	}()
	pre, err := loadgen.Preload(ctx, loadgen.PreloadOptions{BookShape: loadspec.BookShape{Orders: int64(o.Orders)},
		Servers: eng.Servers, Logger: o.Logger})
	if err != nil {
		return ph, fmt.Errorf("preload: %w", err)
	}
	ph.PreloadPerS = pre.OrdersPerSec
	windowed := rec && o.Windows.Every > 0
	if windowed && eng.Switch == nil {
		return ph, fmt.Errorf("%w: the engine cannot switch its recorder around windows", ErrBadOptions)
	}
	var (
		wdone chan error
		win   *recording.Windows
	)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	if windowed {
		if win, err = recording.NewWindows(eng.Switch, recording.DefaultWindowOptions); err != nil {
			return ph, err
		}
		wdone = make(chan error, 1)
		go func() { wdone <- runWindows(wctx, win, time.Now(), o.Windows, o.ProbeFor) }()
	}
	probes, err := loadgen.Probe(ctx, loadgen.ProbeOptions{Servers: eng.Servers, Rate: o.ProbeRate, Duration: o.ProbeFor,
		Out: filepath.Join(dir, "probes"), Logger: o.Logger})
	if windowed {
		probeEnd := time.Now()
		werr := <-wdone
		if ferr := win.Finish(ctx, "end"); werr == nil {
			werr = ferr
		}
		if err == nil && werr != nil {
			return ph, fmt.Errorf("recording windows: %w", werr)
		}
		spans := win.Spans()
		for i, s := range spans {
			if s.To.IsZero() || s.To.After(probeEnd) {
				spans[i].To = probeEnd
			}
			ph.RecordedS += spans[i].To.Sub(s.From).Seconds()
		}
		if err == nil {
			if ph.InP50Us, ph.OutP50Us, err = splitP50(filepath.Join(dir, "probes", rundir.ProbesFile), spans); err != nil {
				return ph, fmt.Errorf("split the probes by window: %w", err)
			}
		}
	} else if rec {
		ph.RecordedS = o.ProbeFor.Seconds()
	}
	if err != nil {
		return ph, fmt.Errorf("probes: %w", err)
	}
	if probes.Latency.N == 0 {
		return ph, fmt.Errorf("probes: none answered (%d sent, %d lost)", probes.Sent, probes.Lost)
	}
	ph.Probes, ph.Lost = probes.Latency.N, probes.Lost
	ph.ProbeP50Us, ph.ProbeP99Us = float64(probes.Latency.P50Ns)/1e3, float64(probes.Latency.P99Ns)/1e3
	ph.Seconds = time.Since(start).Seconds()
	if rec && !windowed && eng.Dump != nil {
		n, err := eng.Dump(ctx)
		if err != nil {
			return ph, fmt.Errorf("dump the recording: %w", err)
		}
		ph.DumpBytes, ph.DumpMBPerSec = n, float64(n)/1e6/ph.Seconds
	}
	return ph, nil
}

// runWindows opens and closes the windows of a probe stream that started at start, as the
// runner's timeline does: Open sleeps until each one's lead, Close runs beside the next.
func runWindows(ctx context.Context, win *recording.Windows, start time.Time, w Windows, d time.Duration) error {
	starts := w.starts(d)
	errc := make(chan error, len(starts))
	for i, at := range starts {
		if err := win.Open(ctx, start.Add(at)); err != nil {
			return err
		}
		if err := ctxtime.SleepUntil(ctx, start.Add(at+w.For)); err != nil {
			return err
		}
		var next time.Time
		if i+1 < len(starts) {
			next = start.Add(starts[i+1])
		}
		go func() { errc <- win.Close(ctx, fmt.Sprintf("%02d-window", i+1), next) }()
	}
	var errs []error
	for range starts {
		errs = append(errs, <-errc)
	}
	return errors.Join(errs...)
}

// splitP50 is the p50 latency of the answered probes in file due inside spans, and outside.
func splitP50(file string, spans []recording.Span) (in, out float64, err error) {
	ps, err := rundir.ReadProbes(file)
	if err != nil {
		return 0, 0, err
	}
	var ins, outs []float64
	for _, p := range ps {
		if p.Outcome != rundir.ProbeOK {
			continue
		}
		at := time.Unix(0, p.IntendedNs)
		inside := false
		for _, s := range spans {
			if !at.Before(s.From) && at.Before(s.To) {
				inside = true
				break
			}
		}
		if inside {
			ins = append(ins, float64(p.LatencyNs)/1e3)
		} else {
			outs = append(outs, float64(p.LatencyNs)/1e3)
		}
	}
	return stats.Median(ins), stats.Median(outs), nil
}
