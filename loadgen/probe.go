package loadgen

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"github.com/rig-dev/rig/rundir"
)

// A probe run writes into ProbeOptions.Out (names from rundir): rundir.ProbesFile, every probe
// (intended time, latency, outcome) in completion order; rundir.ProbesHlogFile, the HdrHistogram
// interval log of probe latency in ns, one interval per Interval; rundir.StatsFile, ProbeStats;
// rundir.BurstsFile, every burst message in probes.bin's format; and rundir.AckedFile, the ledger
// of every order answered OK (probes, and the bursts sent over TCP by this run) with the log
// index it was applied at, for the durability check after the run.

// Defaults shared by the probe and burst streams.
const (
	DefaultGrace        = loadspec.DefaultGrace
	DefaultStartTimeout = 30 * time.Second
	defaultInterval     = loadspec.DefaultInterval
	probeChunk          = 256 // most first sends per write when catching up a backlog
)

// ErrBadOptions classifies invalid options (the message names the field).
var ErrBadOptions = loadspec.ErrBadOptions

// ProbeOptions configure an open-loop probe stream. Probe i is due at start + i/Rate; each probe
// is an IOC buy at Price that crosses nothing, so the book never changes under the stream.
type ProbeOptions struct {
	Servers      []string      // client addresses of the engine nodes (any of them: followers redirect)
	Rate         float64       // probes per second (> 0)
	Duration     time.Duration // schedule length; 0 runs until Stop or ctx ends
	Grace        time.Duration // after the schedule ends, how long answers are awaited (default 5 s)
	Out          string        // directory for probes.bin, probes.hlog, stats.json (and bursts.bin); created if missing
	Instruments  int           // probes rotate over instruments 0..Instruments-1 (default 16)
	Price        int64         // limit price of the IOC buy (default 1): must be below every resting ask
	Interval     time.Duration // HDR log interval (default 1 s)
	StartTimeout time.Duration // how long to look for a leader before the first probe (default 30 s)
	Spin         time.Duration // busy-wait this long before each probe is due, 0..MaxSpin (0: sleep)
	Conn         ConnOptions
	Logger       *slog.Logger
}

func (o *ProbeOptions) normalize() error {
	if len(o.Servers) == 0 {
		return fmt.Errorf("%w: servers: none given (want host:port of each engine's client address)", ErrBadOptions)
	}
	if !(o.Rate > 0) || math.IsInf(o.Rate, 0) {
		return fmt.Errorf("%w: rate: %v, want probes per second > 0", ErrBadOptions, o.Rate)
	}
	if o.Duration < 0 {
		return fmt.Errorf("%w: duration: %v, want >= 0 (0 runs until stopped)", ErrBadOptions, o.Duration)
	}
	if o.Duration > 0 && o.Rate*o.Duration.Seconds() > streamMax {
		return fmt.Errorf("%w: rate x duration is %.0f probes, at most %d per run", ErrBadOptions, o.Rate*o.Duration.Seconds(), int64(streamMax))
	}
	if o.Out == "" {
		return fmt.Errorf("%w: out: no output directory", ErrBadOptions)
	}
	if o.Spin < 0 || o.Spin > loadspec.MaxSpin {
		return fmt.Errorf("%w: spin: %v, want 0 (sleep until each probe is due) to %v", ErrBadOptions, o.Spin, loadspec.MaxSpin)
	}
	if o.Interval < 0 || (o.Interval > 0 && o.Interval%time.Millisecond != 0) {
		return fmt.Errorf("%w: interval: %v, want a whole number of milliseconds", ErrBadOptions, o.Interval)
	}
	if err := normalizeCommon(&o.Grace, &o.Instruments, &o.Price, &o.StartTimeout, &o.Logger); err != nil {
		return err
	}
	if o.Interval == 0 {
		o.Interval = defaultInterval
	}
	return nil
}

func normalizeCommon(grace *time.Duration, instruments *int, price *int64, startTimeout *time.Duration, log **slog.Logger) error {
	if *grace < 0 {
		return fmt.Errorf("%w: grace: %v, want >= 0", ErrBadOptions, *grace)
	}
	if *grace == 0 {
		*grace = DefaultGrace
	}
	if *instruments < 0 {
		return fmt.Errorf("%w: instruments: %d, want > 0", ErrBadOptions, *instruments)
	}
	if *instruments == 0 {
		*instruments = loadspec.DefaultInstruments
	}
	if *price < 0 {
		return fmt.Errorf("%w: price: %d, want > 0", ErrBadOptions, *price)
	}
	if *price == 0 {
		*price = loadspec.DefaultProbePrice
	}
	if *startTimeout <= 0 {
		*startTimeout = DefaultStartTimeout
	}
	if *log == nil {
		*log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// ProbeRun is a probe stream under way. Bursts can be added to it; Stop ends it early.
type ProbeRun struct {
	opts  ProbeOptions
	s     *stream
	sink  *probeSink
	led   *ledgerSink
	late  *rundir.LateSendsWriter
	lateN int // late sends written to late (only the flusher, then run after it, touch it)
	ctx   context.Context
	done  chan struct{}
	stats rundir.ProbeStats
	err   error

	bmu       sync.Mutex
	burstSink *probeSink
	burst     *burstRun // the series under way, if any
	bursts    []*burstRun
	bwg       sync.WaitGroup
	ending    bool
}

// StartProbe validates opts, creates the output files and starts the stream in the background.
// Cancelling ctx ends the schedule like Stop: the run still waits out the grace period and
// writes everything (that is how SIGINT ends `rig loadgen probe`).
func StartProbe(ctx context.Context, opts ProbeOptions) (*ProbeRun, error) {
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, fmt.Errorf("create probe output directory: %w", err)
	}
	sink, err := createSink(filepath.Join(opts.Out, rundir.ProbesFile))
	if err != nil {
		return nil, err
	}
	led, err := createLedger(filepath.Join(opts.Out, rundir.AckedFile))
	if err != nil {
		sink.close()
		return nil, err
	}
	// Created now, empty where the sender is never late: the file says its lateness was measured.
	late, err := rundir.CreateLateSends(filepath.Join(opts.Out, rundir.LateSendsFile))
	if err != nil {
		sink.close()
		led.close()
		return nil, err
	}
	period := 1e9 / opts.Rate
	total := int64(streamMax)
	var end int64
	if opts.Duration > 0 {
		end = int64(opts.Duration)
		// Probes due strictly before the end: i/Rate < Duration.
		total = int64(math.Ceil(opts.Duration.Seconds() * opts.Rate))
	}
	cfg := streamConfig{
		kind:         "probe",
		servers:      opts.Servers,
		conn:         opts.Conn,
		log:          opts.Logger,
		at:           func(i int64) int64 { return int64(float64(i) * period) },
		total:        total,
		end:          end,
		chunk:        probeChunk,
		spin:         opts.Spin,
		grace:        opts.Grace,
		startTimeout: opts.StartTimeout,
		instruments:  opts.Instruments,
		price:        opts.Price,
		sink:         sink,
		ledger:       led,
		hlogPath:     filepath.Join(opts.Out, rundir.ProbesHlogFile),
		hlogWidth:    int64(opts.Interval),
		hlogComment:  fmt.Sprintf("rig loadgen probe stream: %g/s, IOC probes, latency in ns from intended send time, intervals by intended time", opts.Rate),
		lateSends:    true,
	}
	r := &ProbeRun{opts: opts, s: newStream(cfg, probeIDBit), sink: sink, led: led, late: late, ctx: ctx, done: make(chan struct{})}
	go r.run()
	return r, nil
}

// Probe runs a probe stream to its end (Duration, or ctx) and returns what it measured. The
// outputs are complete when it returns, error or not.
func Probe(ctx context.Context, opts ProbeOptions) (rundir.ProbeStats, error) {
	r, err := StartProbe(ctx, opts)
	if err != nil {
		return rundir.ProbeStats{}, err
	}
	return r.Wait()
}

func (r *ProbeRun) run() {
	defer close(r.done)
	flushDone, flusherEnded := make(chan struct{}), make(chan struct{})
	go func() { // keep probes.bin and the late sends current for a run that is killed
		defer close(flusherEnded)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				r.sink.flush()
				r.led.flush()
				r.writeLateSends()
				r.late.Flush()
			case <-flushDone:
				return
			}
		}
	}()
	err := r.s.run(r.ctx)
	close(flushDone)
	<-flusherEnded
	// Bursts end with the run, after their own grace.
	r.bmu.Lock()
	r.ending = true
	if r.burst != nil {
		r.burst.stop()
	}
	r.bmu.Unlock()
	r.bwg.Wait()
	if cerr := r.sink.close(); err == nil && cerr != nil {
		err = fmt.Errorf("write %s: %w", rundir.ProbesFile, cerr)
	}
	if cerr := r.led.close(); err == nil && cerr != nil {
		err = fmt.Errorf("write %s: %w", rundir.AckedFile, cerr)
	}
	r.bmu.Lock()
	if r.burstSink != nil {
		if cerr := r.burstSink.close(); err == nil && cerr != nil {
			err = fmt.Errorf("write %s: %w", rundir.BurstsFile, cerr)
		}
	}
	r.bmu.Unlock()
	r.writeLateSends()
	if cerr := r.late.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("write %s: %w", rundir.LateSendsFile, cerr)
	}
	st := r.Stats()
	if err != nil {
		st.Error = err.Error()
	}
	if werr := atomicfile.WriteJSON(filepath.Join(r.opts.Out, rundir.StatsFile), st); err == nil && werr != nil {
		err = werr
	}
	r.stats, r.err = st, err
}

// Stop ends the schedule now; the run waits out the grace period, then writes everything.
func (r *ProbeRun) Stop() { r.s.stop() }

// Started is closed when the schedule has started: Stats().Start is probe 0's intended send
// time from then on. A run that ends before it could start closes Done only.
func (r *ProbeRun) Started() <-chan struct{} { return r.s.started }

// Done is closed when the run has written its outputs.
func (r *ProbeRun) Done() <-chan struct{} { return r.done }

// Wait blocks until the run is done and returns its final stats.
func (r *ProbeRun) Wait() (rundir.ProbeStats, error) {
	<-r.done
	return r.stats, r.err
}

// Stats is a live copy of the run's figures (final once Done is closed).
func (r *ProbeRun) Stats() rundir.ProbeStats {
	c := r.s.counts()
	st := rundir.ProbeStats{
		Start: c.start, End: c.end,
		Rate: r.opts.Rate, DurationNs: int64(r.opts.Duration),
		Phase: c.phase, StopReason: c.stopReason,
		Scheduled: c.scheduled, Sent: c.sent, Answered: c.answered, Rejected: c.rejected,
		Lost: c.lost, Unsent: c.unsent, Filled: c.filled,
		Latency: c.latency, SendLag: c.lag, Conn: c.conn,
	}
	if c.err != nil {
		st.Error = c.err.Error()
	}
	r.bmu.Lock()
	for _, b := range r.bursts {
		st.Bursts = append(st.Bursts, b.stats())
	}
	r.bmu.Unlock()
	return st
}

// writeLateSends appends the late sends kept since the last call (buffered: Flush or Close
// writes them out).
func (r *ProbeRun) writeLateSends() {
	ls := r.s.lateSendsFrom(r.lateN)
	for _, l := range ls {
		r.late.Write(l)
	}
	r.lateN += len(ls)
}
