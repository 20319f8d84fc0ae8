package loadgen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/internal/peak"

	"github.com/rig-dev/rig/engine/wire"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"github.com/rig-dev/rig/rundir"
)

// validBurst checks a series as one load generator sends it (rundir.BurstSeries). Over TCP
// (the default) the messages go through the stream's connection and are answered. With UDP
// each of Senders senders sends Messages datagrams of Size bytes per burst to the leader's UDP
// ingress (docs/wire.md), all at once, with sendmmsg; nothing is answered, and the receiver's
// figures come from the engine.
func validBurst(b rundir.BurstSeries) error {
	switch {
	case !b.UDP && (b.Size != 0 || b.Senders != 0):
		return fmt.Errorf("%w: size and senders apply to UDP bursts only (set udp)", ErrBadOptions)
	case b.UDP && b.Size != 0 && (b.Size < wire.DgramMin || b.Size > wire.DgramMax):
		return fmt.Errorf("%w: size: %d bytes, want %d..%d", ErrBadOptions, b.Size, wire.DgramMin, wire.DgramMax)
	case b.UDP && (b.Senders < 0 || b.Senders > loadspec.MaxSenders):
		return fmt.Errorf("%w: senders: %d, want 1..%d per load generator", ErrBadOptions, b.Senders, loadspec.MaxSenders)
	case b.Messages <= 0:
		return fmt.Errorf("%w: messages: %d, want > 0", ErrBadOptions, b.Messages)
	case b.Count <= 0:
		return fmt.Errorf("%w: count: %d, want > 0", ErrBadOptions, b.Count)
	case b.Every < 0 || (b.Count > 1 && b.Every == 0):
		return fmt.Errorf("%w: every: %s, want > 0 when count > 1", ErrBadOptions, b.Every)
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
	Series       rundir.BurstSeries // Start on this node's clock; zero: at once
	Grace        time.Duration      // default 5 s
	Out          string             // directory for bursts.bin and bursts.json; created if missing
	Instruments  int                // default 16
	Price        int64              // default 1
	StartTimeout time.Duration      // default 30 s
	Conn         ConnOptions
	Logger       *slog.Logger
}

// ErrBurstBusy is returned when a burst series is started while another is under way.
var ErrBurstBusy = errors.New("a burst series is already running")

const burstChunk = 64 // messages per write: small enough to time a burst's shape within it

type sendMark = peak.Mark

// burstTracker keeps per-burst timings; it is driven from the stream's hooks under its lock.
type burstTracker struct {
	per       int64
	marks     [][]sendMark
	lastReply []int64
	answered  []int
	lost      []int
	maxLat    []int64
}

func newBurstTracker(spec rundir.BurstSeries) *burstTracker {
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
		t.marks[b] = append(t.marks[b], sendMark{At: at, N: int(k)})
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

type burstRun struct {
	spec  rundir.BurstSeries
	s     *stream // TCP
	t     *burstTracker
	u     *udpSeries // UDP
	stopU context.CancelFunc
	uErr  error
}

// newUDPBurstRun opens the senders of a UDP series to target (the leader's client address).
func newUDPBurstRun(spec rundir.BurstSeries, target string, instruments int, price int64, log *slog.Logger) (*burstRun, error) {
	u, err := newUDPSeries(udpSpec{BurstSeries: spec, Target: target}, instruments, price, log)
	if err != nil {
		return nil, err
	}
	return &burstRun{spec: spec, u: u}, nil
}

// run sends the series until it ends or ctx is done (TCP: then waits out the grace period).
func (b *burstRun) run(ctx context.Context) error {
	if b.u == nil {
		return b.s.run(ctx)
	}
	ctx, b.stopU = context.WithCancel(ctx)
	start := time.Now()
	if !b.spec.Start.IsZero() {
		start = b.spec.Start
	}
	err := b.u.run(ctx, start)
	b.u.close()
	if errors.Is(err, context.Canceled) {
		err = nil // stopped with the run: what was sent is reported
	}
	b.uErr = err
	return err
}

func (b *burstRun) stop() {
	if b.u == nil {
		b.s.stop()
	} else if b.stopU != nil {
		b.stopU()
	}
}

func (b *burstRun) udpStats() rundir.BurstStats {
	u := b.u
	u.mu.Lock()
	defer u.mu.Unlock()
	st := rundir.BurstStats{
		Messages: b.spec.Messages, EveryNs: int64(b.spec.Every), Count: b.spec.Count, Phase: "running",
		Transport: "udp", Size: u.spec.Size, Senders: u.spec.Senders, Target: u.spec.Target,
		Bursts: append([]rundir.BurstResult(nil), u.bursts...), UDPSenders: u.final,
	}
	if u.final != nil {
		st.Phase = "done"
	}
	for _, r := range u.bursts {
		st.Sent += int64(r.Sent)
		st.PeakPerMs = max(st.PeakPerMs, r.PeakPerMs)
	}
	if b.uErr != nil {
		st.Error = b.uErr.Error()
	}
	return st
}

func newBurstRun(spec rundir.BurstSeries, servers []string, conn ConnOptions, grace time.Duration, instruments int, price int64, startTimeout time.Duration, log *slog.Logger, sink *probeSink, ledger *ledgerSink) *burstRun {
	t := newBurstTracker(spec)
	per, every := int64(spec.Messages), int64(spec.Every)
	total := per * int64(spec.Count)
	at := func(i int64) int64 { return (i / per) * every }
	cfg := streamConfig{
		kind: "burst", servers: servers, conn: conn, log: log,
		at: at, total: total, end: at(total-1) + 1, chunk: burstChunk,
		grace: grace, startTimeout: startTimeout, instruments: instruments, price: price,
		sink: sink, ledger: ledger, onSent: t.sent, onAnswer: t.answer, onLost: t.lostOne,
	}
	return &burstRun{spec: spec, s: newStream(cfg, burstIDBit), t: t}
}

func (b *burstRun) stats() rundir.BurstStats {
	if b.u != nil {
		return b.udpStats()
	}
	c := b.s.counts()
	st := rundir.BurstStats{
		Messages: b.spec.Messages, EveryNs: int64(b.spec.Every), Count: b.spec.Count,
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
			SendNs:       marks[len(marks)-1].At - marks[0].At,
			PeakPerMs:    peak.PerMs(marks),
			Answered:     b.t.answered[k],
			Lost:         b.t.lost[k],
			MaxLatencyNs: b.t.maxLat[k],
		}
		for _, m := range marks {
			r.Sent += m.N
		}
		if b.t.lastReply[k] > 0 {
			// A send is stamped after its write returns, which can be after its reply arrived:
			// the burst is absorbed once both the last send and the last reply are done.
			r.DrainNs = max(b.t.lastReply[k], marks[len(marks)-1].At) - marks[0].At
		}
		st.PeakPerMs = max(st.PeakPerMs, r.PeakPerMs)
		st.Bursts = append(st.Bursts, r)
	}
	return st
}

// Burst runs a micro-burst series on its own connection and writes Out/bursts.bin and
// Out/bursts.json (a UDP series writes only bursts.json: nothing is answered). Cancelling ctx
// ends the series early, after the grace period.
func Burst(ctx context.Context, opts BurstOptions) (rundir.BurstStats, error) {
	spec := opts.Series
	if err := validBurst(spec); err != nil {
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
	var b *burstRun
	var sink *probeSink
	if spec.UDP {
		leader, err := discoverLeader(ctx, opts.Servers, opts.Conn, opts.StartTimeout)
		if err != nil {
			return rundir.BurstStats{}, err
		}
		if b, err = newUDPBurstRun(spec, leader, opts.Instruments, opts.Price, opts.Logger); err != nil {
			return rundir.BurstStats{}, err
		}
	} else {
		var err error
		if sink, err = createSink(filepath.Join(opts.Out, rundir.BurstsFile)); err != nil {
			return rundir.BurstStats{}, err
		}
		b = newBurstRun(spec, opts.Servers, opts.Conn, opts.Grace, opts.Instruments, opts.Price, opts.StartTimeout, opts.Logger, sink, nil)
	}
	err := b.run(ctx)
	if sink != nil {
		if cerr := sink.close(); err == nil && cerr != nil {
			err = fmt.Errorf("write %s: %w", rundir.BurstsFile, cerr)
		}
	}
	st := b.stats()
	if err != nil {
		st.Error = err.Error()
	}
	if werr := atomicfile.WriteJSON(filepath.Join(opts.Out, rundir.BurstStatsFile), st); err == nil {
		err = werr
	}
	return st, err
}

// Burst starts a burst series alongside the probe stream, on its own connection so that the
// probe schedule is not held up by the burst's writes; the probes then show what the burst did
// to the server. Its messages go to Out/bursts.bin and its figures to ProbeStats.Bursts.
func (r *ProbeRun) Burst(spec rundir.BurstSeries) error {
	if err := validBurst(spec); err != nil {
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
		sink, err := createSink(filepath.Join(r.opts.Out, rundir.BurstsFile))
		if err != nil {
			return err
		}
		r.burstSink = sink
	}
	o := r.opts
	var b *burstRun
	if spec.UDP {
		// The probe stream's connection knows the leader; before it answered, ask the cluster.
		leader := r.s.cl.snapshot().Leader
		if leader == "" {
			var err error
			if leader, err = discoverLeader(r.ctx, o.Servers, o.Conn, o.StartTimeout); err != nil {
				return err
			}
		}
		var err error
		if b, err = newUDPBurstRun(spec, leader, o.Instruments, o.Price, o.Logger); err != nil {
			return err
		}
	} else {
		b = newBurstRun(spec, o.Servers, o.Conn, o.Grace, o.Instruments, o.Price, o.StartTimeout, o.Logger, r.burstSink, r.led)
	}
	r.burst = b
	r.bursts = append(r.bursts, b)
	r.bwg.Add(1)
	go func() {
		defer r.bwg.Done()
		if err := b.run(r.ctx); err != nil {
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
