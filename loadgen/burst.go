package loadgen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/rig-dev/rig/rundir"
)

// BurstSpec is one micro-burst series: Count bursts of Messages sent back-to-back, one every
// EveryNs. It is also the body of the control API's POST /burst.
type BurstSpec struct {
	Messages int   `json:"messages"`
	EveryNs  int64 `json:"every_ns"`
	Count    int   `json:"count"`
}

func (b BurstSpec) validate() error {
	switch {
	case b.Messages <= 0:
		return fmt.Errorf("%w: messages: %d, want > 0", ErrBadOptions, b.Messages)
	case b.Count <= 0:
		return fmt.Errorf("%w: count: %d, want > 0", ErrBadOptions, b.Count)
	case b.EveryNs < 0 || (b.Count > 1 && b.EveryNs == 0):
		return fmt.Errorf("%w: every_ns: %d, want > 0 when count > 1", ErrBadOptions, b.EveryNs)
	case int64(b.Messages)*int64(b.Count) > streamMax:
		return fmt.Errorf("%w: messages x count is %d, at most %d", ErrBadOptions, int64(b.Messages)*int64(b.Count), int64(streamMax))
	}
	return nil
}

// BurstOptions configure a standalone micro-burst series (Burst). Every message is an IOC buy
// that crosses nothing, recorded like a probe in bursts.bin with the burst's due time as its
// intended time: its latency includes the queue the burst itself built in the client.
type BurstOptions struct {
	Servers      []string
	Messages     int           // per burst
	Every        time.Duration // between burst starts
	Count        int           // bursts
	Grace        time.Duration // default 5 s
	Out          string        // directory for bursts.bin and bursts.json; created if missing
	Instruments  int           // default 16
	Price        int64         // default 1
	StartTimeout time.Duration // default 30 s
	Conn         ConnOptions
	Logger       *slog.Logger
}

// ErrBurstBusy is returned when a burst series is started while another is under way.
var ErrBurstBusy = errors.New("a burst series is already running")

const burstChunk = 64 // messages per write: small enough to time a burst's shape within it

type sendMark struct {
	at int64
	n  int
}

// burstTracker keeps per-burst timings; it is driven from the stream's hooks under its lock.
type burstTracker struct {
	per       int64
	marks     [][]sendMark
	lastReply []int64
	answered  []int
	lost      []int
	maxLat    []int64
}

func newBurstTracker(spec BurstSpec) *burstTracker {
	return &burstTracker{
		per:       int64(spec.Messages),
		marks:     make([][]sendMark, spec.Count),
		lastReply: make([]int64, spec.Count),
		answered:  make([]int, spec.Count),
		lost:      make([]int, spec.Count),
		maxLat:    make([]int64, spec.Count),
	}
}

func (t *burstTracker) sent(i0 int64, n int, at int64) {
	for n > 0 { // a chunk can straddle bursts when the sender is behind
		b := i0 / t.per
		k := min(int64(n), (b+1)*t.per-i0)
		t.marks[b] = append(t.marks[b], sendMark{at, int(k)})
		i0 += k
		n -= int(k)
	}
}

func (t *burstTracker) answer(i, latency, at int64) {
	b := i / t.per
	t.answered[b]++
	t.lastReply[b] = max(t.lastReply[b], at)
	t.maxLat[b] = max(t.maxLat[b], latency)
}

func (t *burstTracker) lostOne(i int64) { t.lost[i/t.per]++ }

// peakPerMs is the most messages in any window [t, t+1ms) over time-ordered marks.
func peakPerMs(marks []sendMark) int {
	peak, sum, j := 0, 0, 0
	for i := range marks {
		sum += marks[i].n
		for marks[i].at-marks[j].at >= int64(time.Millisecond) {
			sum -= marks[j].n
			j++
		}
		peak = max(peak, sum)
	}
	return peak
}

type burstRun struct {
	spec BurstSpec
	s    *stream
	t    *burstTracker
}

func newBurstRun(spec BurstSpec, servers []string, conn ConnOptions, grace time.Duration, instruments int, price int64, startTimeout time.Duration, log *slog.Logger, sink *probeSink) *burstRun {
	t := newBurstTracker(spec)
	per, every := int64(spec.Messages), spec.EveryNs
	total := per * int64(spec.Count)
	at := func(i int64) int64 { return (i / per) * every }
	cfg := streamConfig{
		kind: "burst", servers: servers, conn: conn, log: log,
		at: at, total: total, end: at(total-1) + 1, chunk: burstChunk,
		grace: grace, startTimeout: startTimeout, instruments: instruments, price: price,
		sink: sink, onSent: t.sent, onAnswer: t.answer, onLost: t.lostOne,
	}
	return &burstRun{spec: spec, s: newStream(cfg, burstIDBit), t: t}
}

func (b *burstRun) stats() rundir.BurstStats {
	c := b.s.counts()
	st := rundir.BurstStats{
		Messages: b.spec.Messages, EveryNs: b.spec.EveryNs, Count: b.spec.Count,
		Phase: c.phase, Sent: c.sent, Answered: c.answered, Lost: c.lost, Unsent: c.unsent,
		Latency: c.latency, SendLag: c.lag, Conn: c.conn,
	}
	if c.err != nil {
		st.Error = c.err.Error()
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, marks := range b.t.marks {
		if len(marks) == 0 {
			continue
		}
		r := rundir.BurstResult{
			Index:        k,
			Due:          time.Unix(0, s.epochUnix+s.start+s.cfg.at(int64(k)*b.t.per)),
			SendNs:       marks[len(marks)-1].at - marks[0].at,
			PeakPerMs:    peakPerMs(marks),
			Answered:     b.t.answered[k],
			Lost:         b.t.lost[k],
			MaxLatencyNs: b.t.maxLat[k],
		}
		for _, m := range marks {
			r.Sent += m.n
		}
		if b.t.lastReply[k] > 0 {
			// A send is stamped after its write returns, which can be after its reply arrived:
			// the burst is absorbed once both the last send and the last reply are done.
			r.DrainNs = max(b.t.lastReply[k], marks[len(marks)-1].at) - marks[0].at
		}
		st.PeakPerMs = max(st.PeakPerMs, r.PeakPerMs)
		st.Bursts = append(st.Bursts, r)
	}
	return st
}

// Burst runs a micro-burst series on its own connection and writes Out/bursts.bin and
// Out/bursts.json. Cancelling ctx ends the series early, after the grace period.
func Burst(ctx context.Context, opts BurstOptions) (rundir.BurstStats, error) {
	spec := BurstSpec{Messages: opts.Messages, EveryNs: int64(opts.Every), Count: opts.Count}
	if err := spec.validate(); err != nil {
		return rundir.BurstStats{}, err
	}
	if len(opts.Servers) == 0 {
		return rundir.BurstStats{}, fmt.Errorf("%w: servers: none given", ErrBadOptions)
	}
	if opts.Out == "" {
		return rundir.BurstStats{}, fmt.Errorf("%w: out: no output directory", ErrBadOptions)
	}
	if err := normalizeCommon(&opts.Grace, &opts.Instruments, &opts.Price, &opts.StartTimeout, &opts.Logger); err != nil {
		return rundir.BurstStats{}, err
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return rundir.BurstStats{}, fmt.Errorf("create burst output directory: %w", err)
	}
	sink, err := createSink(filepath.Join(opts.Out, BurstsFile))
	if err != nil {
		return rundir.BurstStats{}, err
	}
	b := newBurstRun(spec, opts.Servers, opts.Conn, opts.Grace, opts.Instruments, opts.Price, opts.StartTimeout, opts.Logger, sink)
	err = b.s.run(ctx)
	if cerr := sink.close(); err == nil && cerr != nil {
		err = fmt.Errorf("write %s: %w", BurstsFile, cerr)
	}
	st := b.stats()
	if err != nil {
		st.Error = err.Error()
	}
	if werr := writeJSON(filepath.Join(opts.Out, "bursts.json"), st); err == nil {
		err = werr
	}
	return st, err
}

// Burst starts a burst series alongside the probe stream, on its own connection so that the
// probe schedule is not held up by the burst's writes; the probes then show what the burst did
// to the server. Its messages go to Out/bursts.bin and its figures to ProbeStats.Bursts.
func (r *ProbeRun) Burst(spec BurstSpec) error {
	if err := spec.validate(); err != nil {
		return err
	}
	r.bmu.Lock()
	defer r.bmu.Unlock()
	if r.ending {
		return errRunEnded
	}
	if r.burst != nil {
		return ErrBurstBusy
	}
	if r.burstSink == nil {
		sink, err := createSink(filepath.Join(r.opts.Out, BurstsFile))
		if err != nil {
			return err
		}
		r.burstSink = sink
	}
	o := r.opts
	b := newBurstRun(spec, o.Servers, o.Conn, o.Grace, o.Instruments, o.Price, o.StartTimeout, o.Logger, r.burstSink)
	r.burst = b
	r.bursts = append(r.bursts, b)
	r.bwg.Add(1)
	go func() {
		defer r.bwg.Done()
		if err := b.s.run(r.ctx); err != nil {
			o.Logger.Error("burst series failed", "err", err)
		}
		st := b.stats()
		o.Logger.Info("burst series done", "bursts", len(st.Bursts), "sent", st.Sent, "answered", st.Answered, "lost", st.Lost, "peak_per_ms", st.PeakPerMs)
		r.bmu.Lock()
		r.burst = nil
		r.bmu.Unlock()
	}()
	return nil
}
