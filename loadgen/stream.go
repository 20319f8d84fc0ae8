package loadgen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rig-dev/rig/engine/wire"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"github.com/rig-dev/rig/rundir"
)

// Order id ranges. Probe ids have bit 63 set, burst ids bit 62 (and not 63), preload ids
// neither, so a probe can never collide with a resting order. Each stream takes a fresh 30-bit
// stamp for bits 32..61 and numbers its messages in the low 32 bits.
const (
	probeIDBit = 1 << 63
	burstIDBit = loadspec.MaxPreloadID + 1

	streamMax    = 1<<32 - 2       // messages per stream; 1<<32-1 is the discovery order
	discoverCorr = uint64(1) << 62 // correlation id of the order that finds the leader
	lateAfter    = int64(time.Millisecond)
)

var idStamp atomic.Uint64

func init() { idStamp.Store(uint64(time.Now().Unix())) }

func nextIDBase(bit uint64) uint64 { return bit | (idStamp.Add(1)&(1<<30-1))<<32 }

// sink serializes records from any goroutine into one record file of the run folder; the
// first error sticks and is returned by flush and close.
type sink[T any] struct {
	mu  sync.Mutex
	w   *rundir.RecordWriter[T]
	err error
}

// probeSink writes probes.bin or bursts.bin; ledgerSink the acknowledged-order ledger
// (rundir.AckedFile); a nil ledger records nothing.
type (
	probeSink  = sink[rundir.Probe]
	ledgerSink = sink[rundir.Acked]
)

func createSink(path string) (*probeSink, error)    { return openSink(rundir.CreateProbes(path)) }
func createLedger(path string) (*ledgerSink, error) { return openSink(rundir.CreateAcked(path)) }

func openSink[T any](w *rundir.RecordWriter[T], err error) (*sink[T], error) {
	if err != nil {
		return nil, err
	}
	return &sink[T]{w: w}, nil
}

func (p *sink[T]) write(r T) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.err == nil {
		p.err = p.w.Write(r)
	}
	p.mu.Unlock()
}

func (p *sink[T]) flush() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = p.w.Flush()
	}
	return p.err
}

func (p *sink[T]) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.w.Close(); err != nil && p.err == nil {
		p.err = err
	}
	return p.err
}

// streamConfig describes an open-loop stream of IOC orders that cross nothing: message i is
// due at start + at(i), whatever happens to the connection; probes and bursts differ only in
// their schedule.
type streamConfig struct {
	kind         string // for logs: "probe" | "burst"
	servers      []string
	conn         ConnOptions
	log          *slog.Logger
	at           func(i int64) int64 // ns from the schedule start; non-decreasing
	total        int64               // messages in the schedule
	end          int64               // ns from start; messages due at or after it are not sent (0: none)
	chunk        int                 // most first sends per write
	spin         time.Duration       // busy-wait before each message is due (see preciseWindow)
	grace        time.Duration
	startTimeout time.Duration
	instruments  int
	price        int64
	sink         *probeSink
	ledger       *ledgerSink // every order answered OK (nil: none kept)
	hlogPath     string      // "" for none
	hlogWidth    int64
	hlogComment  string
	onSent       func(i0 int64, n int, at int64)  // under the stream lock
	onAnswer     func(i int64, latency, at int64) // under the stream lock
	onLost       func(i int64)                    // under the stream lock
	// lateSends: keep each write of messages more than lateAfter late outside every hold
	// (stream.lateSends), for the probe run's LateSendsFile.
	lateSends bool
}

type bitset []uint64

func (b *bitset) set(i int64) {
	w := int(i >> 6)
	for w >= len(*b) {
		*b = append(*b, 0)
	}
	(*b)[w] |= 1 << (i & 63)
}

func (b bitset) has(i int64) bool {
	w := int(i >> 6)
	return w < len(b) && b[w]&(1<<(i&63)) != 0
}

// stream runs one schedule through its own client (connection). All counters are guarded by mu.
type stream struct {
	cfg       streamConfig
	cl        *client
	idBase    uint64
	epochUnix int64
	start     int64 // schedule origin, ns since the client epoch

	stopReq    chan struct{} // Stop was called
	stopOnce   sync.Once
	stopped    chan struct{} // the schedule end is decided (endAt is final)
	finished   chan struct{}
	discovered chan struct{}
	discOnce   sync.Once
	started    chan struct{} // closed when the schedule starts (phase running)

	mu            sync.Mutex
	phase         string
	stopReason    string
	endAt         int64 // ns from start: the schedule ends here (math.MaxInt64 until decided)
	through       int64 // ns from start: every message due before it has been scheduled
	done          bitset
	scheduled     int64
	sent          int64
	answered      int64
	rejected      int64
	filled        int64
	lost          int64
	unsent        int64
	dups          int64
	firstReject   string
	lat           *hdr.Histogram
	lag           *hdr.Histogram
	maxLag        int64
	late          int64
	lateConnected int64
	lateSends     []rundir.LateSend // cfg.lateSends: at most maxLateSends
	held          int64
	senderSched   string // the scheduling policy and nice value the sender's thread ran at (senderThread)
	senderNice    *int
	firstSent     int64 // messages [0, firstSent) were sent at least once
	hl            *intervalLog
	stopping      bool
	drained       chan struct{}
	drainedClosed bool
	closedAt      int64
	err           error
}

func newStream(cfg streamConfig, idBit uint64) *stream {
	s := &stream{
		cfg:        cfg,
		idBase:     nextIDBase(idBit),
		stopReq:    make(chan struct{}),
		stopped:    make(chan struct{}),
		finished:   make(chan struct{}),
		discovered: make(chan struct{}),
		started:    make(chan struct{}),
		drained:    make(chan struct{}),
		phase:      "starting",
		endAt:      math.MaxInt64,
		lat:        newHist(),
		lag:        newHist(),
	}
	if cfg.end > 0 {
		s.endAt = cfg.end
	}
	s.cfg.log = cfg.log.With("stream", cfg.kind)
	epoch := time.Now()
	s.epochUnix = epoch.UnixNano()
	s.cl = newClient(cfg.servers, cfg.conn, s, s.cfg.log, epoch)
	return s
}

// stop ends the schedule now (what is due before now is still sent); answers are awaited for
// the grace period.
func (s *stream) stop() { s.stopOnce.Do(func() { close(s.stopReq) }) }

func (s *stream) encode(dst []byte, corr uint64) []byte {
	i := corr - 1
	if corr == discoverCorr {
		i = 1<<32 - 1
	}
	req := wire.Request{Type: wire.TypeOrder, Corr: corr, Order: s.order(i)}
	return wire.AppendRequest(dst, &req)
}

// order is message i of the stream.
func (s *stream) order(i uint64) wire.Order {
	return wire.Order{
		ID:         s.idBase | i,
		Instrument: uint32(i % uint64(s.cfg.instruments)),
		Side:       wire.Buy,
		TIF:        wire.IOC,
		Price:      s.cfg.price,
		Qty:        1,
	}
}

func (s *stream) answer(corr uint64, r *wire.Response, at int64) {
	if corr == discoverCorr {
		s.discOnce.Do(func() { close(s.discovered) })
		return
	}
	i := int64(corr - 1)
	off := s.cfg.at(i)
	lat := at - (s.start + off)
	s.mu.Lock()
	if s.done.has(i) {
		s.dups++
		s.mu.Unlock()
		return
	}
	s.done.set(i)
	s.answered++
	if r.Status == wire.StatusRejected {
		s.rejected++
		if s.firstReject == "" {
			s.firstReject = r.Text
			s.cfg.log.Warn("the book rejected a "+s.cfg.kind, "reason", r.Text)
		}
	}
	if r.Filled != 0 && s.filled == 0 {
		s.cfg.log.Warn(s.cfg.kind + "s are trading: they must cross nothing, or the book changes under the measurement")
	}
	s.filled += r.Filled
	if r.Status == wire.StatusOK {
		o := s.order(uint64(i))
		s.cfg.ledger.write(rundir.Acked{ID: o.ID, Instrument: o.Instrument, Side: o.Side, Price: o.Price, Qty: o.Qty,
			Index: r.Index, AckNs: s.epochUnix + at})
	}
	s.cfg.sink.write(rundir.Probe{IntendedNs: s.epochUnix + s.start + off, LatencyNs: lat, Outcome: rundir.ProbeOK})
	s.lat.RecordValue(clampLatency(lat))
	if s.hl != nil {
		s.hl.answered(off/s.cfg.hlogWidth, lat)
		s.hl.advance(s.through)
	}
	if s.cfg.onAnswer != nil {
		s.cfg.onAnswer(i, lat, at)
	}
	s.checkDrainedLocked()
	s.mu.Unlock()
}

func (s *stream) checkDrainedLocked() {
	if s.stopping && !s.drainedClosed && s.answered == s.scheduled {
		s.drainedClosed = true
		close(s.drained)
	}
}

// run finds the leader, sends the schedule, waits out the grace period and resolves every
// message due before the schedule ended as answered or lost. It returns an error only when no
// leader was found before the first message or an output could not be written; everything
// recorded up to then is kept either way.
func (s *stream) run(ctx context.Context) error {
	defer close(s.finished)
	if err := s.discover(ctx); err != nil {
		s.cl.close()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.phase, s.stopReason, s.endAt = "done", "error", 0
		switch {
		case errors.Is(err, errStoppedEarly):
			s.stopReason, err = "stop", nil
		case ctx.Err() != nil:
			s.stopReason, err = "signal", nil
		}
		// The outputs exist even when no probe went out, so a reader never trips on a missing file.
		if s.cfg.hlogPath != "" {
			hl, herr := createIntervalLog(s.cfg.hlogPath, s.epochUnix+s.cl.now(), s.cfg.hlogWidth, s.cfg.hlogComment)
			if herr == nil {
				herr = hl.close(0, "no probe was sent: "+s.stopReason)
			}
			err = errors.Join(err, herr)
		}
		s.err = err
		return err
	}
	s.mu.Lock()
	s.start = s.cl.now()
	if s.cfg.hlogPath != "" {
		hl, err := createIntervalLog(s.cfg.hlogPath, s.epochUnix+s.start, s.cfg.hlogWidth, s.cfg.hlogComment)
		if err != nil {
			s.phase, s.stopReason, s.err = "done", "error", err
			s.endAt = 0
			s.mu.Unlock()
			s.cl.close()
			return err
		}
		s.hl = hl
	}
	s.phase = "running"
	close(s.started)
	s.mu.Unlock()

	hard, cancelHard := context.WithCancel(context.Background())
	defer cancelHard()
	go s.stopper(ctx, cancelHard)

	sent := make(chan struct{})
	go func() { // on a thread of its own (preciseThread), which ends with it
		defer close(sent)
		s.sendLoop(hard)
	}()
	<-sent
	s.mu.Lock()
	s.phase = "draining"
	s.stopping = true
	s.through = s.endAt // all that will be scheduled is
	if s.hl != nil {
		s.hl.advance(s.through)
	}
	s.checkDrainedLocked()
	s.mu.Unlock()
	s.drain(hard)
	s.cl.close()
	return s.finish()
}

// discover sends one uncounted order until a server answers it as leader, so the first probe
// does not carry the time it takes to find the leader.
func (s *stream) discover(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, s.cfg.startTimeout)
	defer cancel()
	corrs := []uint64{discoverCorr}
	var retries []uint64
	if _, err := s.cl.send(dctx, corrs); err != nil {
		return s.discoverErr(ctx, err)
	}
	for {
		select {
		case <-s.discovered:
			return nil
		case <-s.stopReq:
			return errStoppedEarly
		case <-s.cl.retryCh:
		case <-time.After(10 * time.Millisecond):
		case <-dctx.Done():
			return s.discoverErr(ctx, dctx.Err())
		}
		retries, _ = s.cl.takeRetries(s.cl.now(), retries[:0])
		if len(retries) > 0 {
			if _, err := s.cl.send(dctx, retries); err != nil {
				return s.discoverErr(ctx, err)
			}
		}
	}
}

func (s *stream) discoverErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("find the leader among %v: %w", s.cfg.servers, ctx.Err())
	}
	return fmt.Errorf("%w among %v within %v: %w", ErrNoLeader, s.cfg.servers, s.cfg.startTimeout, err)
}

// stopper decides when the schedule ends (its natural end, Stop, or ctx) and cancels hard once
// the grace period after that has passed.
func (s *stream) stopper(ctx context.Context, cancelHard context.CancelFunc) {
	var endC <-chan time.Time
	if s.cfg.end > 0 {
		t := time.NewTimer(time.Duration(s.start + s.cfg.end - s.cl.now()))
		defer t.Stop()
		endC = t.C
	}
	reason := "duration"
	select {
	case <-endC:
	case <-s.stopReq:
		reason = "stop"
	case <-ctx.Done():
		reason = "signal"
	case <-s.finished:
		return
	}
	// The clock is read under the lock: the sender schedules under it too, so nothing it has
	// already taken can be due after the end.
	s.mu.Lock()
	now := s.cl.now() - s.start
	s.endAt = min(s.endAt, now)
	s.stopReason = reason
	s.mu.Unlock()
	close(s.stopped)
	if reason != "duration" {
		s.cfg.log.Info(s.cfg.kind+" stream stopping", "reason", reason, "grace", s.cfg.grace)
	}
	t := time.NewTimer(s.cfg.grace)
	defer t.Stop()
	select {
	case <-t.C:
		cancelHard()
	case <-s.finished:
	}
}

// sendLoop sends every message when it is due, resends what the client hands back, and ends
// when every message due before the schedule's end is sent (or hard ends). It never waits for a
// connection: while none can take its messages (an outage, or a new server on probation) it
// keeps scheduling them on time and holds them, and sends the backlog as soon as a leader takes
// it. Held messages keep their intended times, so their latency carries the outage
// (coordinated omission), and the hold is recorded (ConnStats.Holds) so lateness outside every
// outage can be told apart (SendLag.LateConnected).
func (s *stream) sendLoop(hard context.Context) {
	policy, nice, done := senderThread()
	defer done()
	s.mu.Lock()
	s.senderSched, s.senderNice = policy, &nice
	s.mu.Unlock()
	var (
		i, first int64    // messages [first, i) are due and not yet sent
		rq       []uint64 // resends due and not yet taken by a connection
		batch    []uint64
		lags     []int64
		hold     = rundir.Hold{}
		holding  bool
		holdFrom int64
		// lastReturn: when the sender's last write (probes or resends) returned. Probes that
		// came due while it sat in that write were held up by a server not reading, not by
		// the sender.
		lastReturn int64
	)
	endHold := func(at int64) {
		if holding {
			hold.From = time.Unix(0, s.epochUnix+holdFrom)
			hold.To = time.Unix(0, s.epochUnix+at)
			s.cl.addHold(hold)
			holding, hold = false, rundir.Hold{}
		}
	}
	defer func() { endHold(s.cl.now()) }()
	stopped := s.stopped
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := s.cl.now()
		var nextRetry int64
		rq, nextRetry = s.cl.takeRetries(now, rq)
		if len(rq) > 0 {
			if n, at := s.cl.trySend(rq); n > 0 {
				lastReturn = at
				rq = rq[:copy(rq, rq[n:])]
				continue
			}
		}
		s.mu.Lock()
		endAt := s.endAt
		s.mu.Unlock()
		// Schedule what is due, whether it can go out now or not.
		i1 := i
		for i1 < s.cfg.total {
			if off := s.cfg.at(i1); off >= endAt || s.start+off > now {
				break
			}
			i1++
		}
		if i1 > i {
			i = s.scheduleChunk(i, i1)
		}
		if len(rq) == 0 && first < i {
			batch = batch[:0]
			for k := first; k < i && len(batch) < s.cfg.chunk; k++ {
				batch = append(batch, uint64(k+1))
			}
			woke := s.cl.now()
			if n, at := s.cl.trySend(batch); n > 0 {
				lags = s.sentChunk(first, first+int64(n), writeTimes{prev: lastReturn, woke: woke, at: at}, lags, holding)
				lastReturn = at
				first += int64(n)
				if holding {
					hold.Messages += int64(n)
					for _, l := range lags {
						hold.MaxLagNs = max(hold.MaxLagNs, l)
					}
				}
				continue
			}
		}
		blocked := len(rq) > 0 || first < i
		if !blocked {
			endHold(now)
		} else if !holding {
			holding, holdFrom = true, now
			if first < i {
				holdFrom = s.start + s.cfg.at(first)
			}
		}
		ended := i >= s.cfg.total || s.cfg.at(i) >= endAt
		if ended && !blocked {
			return
		}
		due := nextRetry
		if !ended {
			due = min(due, s.start+s.cfg.at(i))
		}
		if blocked {
			// Woken by a connection's change of state (the connector found one, a probation
			// ended), a resend, or the next message coming due.
			timer.Reset(time.Duration(min(due-now, int64(time.Second))))
			select {
			case <-s.cl.stateChan():
			case <-timer.C:
			case <-s.cl.retryCh:
			case <-stopped:
				stopped = nil
			case <-hard.Done():
				return
			}
			continue
		}
		if wake := time.Duration(due - now); wake <= preciseWindow {
			// Not woken by retryCh meanwhile: a resend handed back now waits at most this
			// (< 2 ms, after an election that took far longer; its latency counts from its
			// intended time anyway).
			preciseSleep(wake - s.cfg.spin)
			for s.cfg.spin > 0 && s.cl.now() < due {
			}
			continue
		}
		timer.Reset(time.Duration(due-now) - preciseWindow)
		select {
		case <-timer.C:
		case <-s.cl.retryCh:
		case <-stopped:
			stopped = nil
		case <-hard.Done():
			return
		}
	}
}

// scheduleChunk counts messages [i0, i1) as due and in the HDR log's intervals, and returns the
// end of those it took: a stop decided since the sender read endAt ends the chunk there, so no
// message due after the schedule's end is sent (finish counts only those before it). It runs
// before they are written so an answer cannot beat it.
func (s *stream) scheduleChunk(i0, i1 int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := i0; k < i1; k++ {
		if s.cfg.at(k) >= s.endAt {
			i1 = k
			break
		}
	}
	if i1 == i0 {
		return i0
	}
	s.scheduled = i1
	if s.hl != nil {
		for i := i0; i < i1; i++ {
			s.hl.scheduled(s.cfg.at(i) / s.cfg.hlogWidth)
		}
	}
	if i1 < s.cfg.total {
		s.through = min(s.cfg.at(i1), s.endAt)
	} else {
		s.through = min(s.cfg.at(i1-1)+1, s.endAt)
	}
	return i1
}

// maxLateSends bounds the late sends a stream keeps: a sender that falls behind for good writes
// one a chunk, and the first of them say where it began.
const maxLateSends = 100_000

// writeTimes are a write's times on the client clock.
type writeTimes struct {
	prev int64 // the return of the sender's previous write (0: none)
	woke int64 // this write handed to the connection
	at   int64 // this write returned
}

// sentChunk counts messages [i0, i1) as sent by the write w; held says they were due in a hold.
func (s *stream) sentChunk(i0, i1 int64, w writeTimes, lags []int64, held bool) []int64 {
	lags = lags[:0]
	for i := i0; i < i1; i++ {
		lags = append(lags, w.at-(s.start+s.cfg.at(i)))
	}
	var lateDues []int64
	s.mu.Lock()
	s.sent += i1 - i0
	for k, l := range lags {
		s.lag.RecordValue(clampLatency(l))
		s.maxLag = max(s.maxLag, l)
		if l > lateAfter {
			s.late++
			if !held {
				lateDues = append(lateDues, s.start+s.cfg.at(i0+int64(k)))
				s.lateConnected++
			}
		}
	}
	// The sender's own lateness starts when it was free to send: not before the first late
	// probe was due, nor while it sat in its previous write (a server not reading).
	if s.cfg.lateSends && len(lateDues) > 0 && len(s.lateSends) < maxLateSends {
		if from := max(lateDues[0], w.prev); w.woke-from > lateAfter {
			s.lateSends = append(s.lateSends, rundir.LateSend{DueNs: s.epochUnix + lateDues[0], FromNs: s.epochUnix + from,
				WokeNs: s.epochUnix + w.woke, SentNs: s.epochUnix + w.at, Probes: len(lateDues)})
		}
	}
	if held {
		s.held += i1 - i0
	}
	s.firstSent = i1
	if s.cfg.onSent != nil {
		s.cfg.onSent(i0, int(i1-i0), w.at)
	}
	s.mu.Unlock()
	if len(lateDues) > 0 && s.cl != nil {
		s.cl.lateConnected(lateDues)
	}
	return lags
}

// drain resends what comes back until every sent message is answered or hard ends.
func (s *stream) drain(hard context.Context) {
	var retries []uint64
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := s.cl.now()
		var next int64
		retries, next = s.cl.takeRetries(now, retries[:0])
		if len(retries) > 0 {
			if _, err := s.cl.send(hard, retries); err != nil {
				return
			}
			continue
		}
		timer.Reset(time.Duration(min(next-now, int64(time.Second))))
		select {
		case <-s.drained:
			return
		case <-hard.Done():
			return
		case <-s.cl.retryCh:
		case <-timer.C:
		}
	}
}

// finish records every message due before the schedule ended and not answered as lost
// (including those the sender never got out), and closes the HDR log.
func (s *stream) finish() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closedAt = s.cl.now()
	s.phase = "done"
	if s.stopReason == "" { // the schedule ran out before its end timer fired
		s.stopReason = "duration"
	}
	var due int64
	for due < s.cfg.total && s.cfg.at(due) < s.endAt {
		due++
	}
	for i := int64(0); i < due; i++ {
		if s.done.has(i) {
			continue
		}
		off := s.cfg.at(i)
		s.lost++
		if i >= s.firstSent {
			s.unsent++
		}
		if i < s.scheduled && s.hl != nil {
			s.hl.lost(off / s.cfg.hlogWidth)
		}
		s.cfg.sink.write(rundir.Probe{IntendedNs: s.epochUnix + s.start + off, LatencyNs: s.closedAt - (s.start + off), Outcome: rundir.ProbeLost})
		if s.cfg.onLost != nil {
			s.cfg.onLost(i)
		}
	}
	s.scheduled = due
	if s.lost > 0 {
		s.cfg.log.Warn(s.cfg.kind+"s lost", "lost", s.lost, "never_sent", s.unsent, "of", due)
	}
	var err error
	if s.hl != nil {
		end := s.endAt
		if due > 0 {
			end = max(end, s.cfg.at(due-1)+1)
		}
		err = s.hl.close(end, fmt.Sprintf("%s latency ns by intended send time; answered=%d lost=%d", s.cfg.kind, s.answered, s.lost))
	}
	if err == nil {
		err = s.cfg.sink.flush()
	}
	if err != nil {
		s.err = err
	}
	return err
}

func summarize(h *hdr.Histogram) rundir.Latency {
	l := rundir.Latency{N: h.TotalCount()}
	if l.N == 0 {
		return l
	}
	l.P50Ns = h.ValueAtQuantile(50)
	l.P90Ns = h.ValueAtQuantile(90)
	if l.N >= 100 {
		l.P99Ns = h.ValueAtQuantile(99)
	}
	if l.N >= 1000 {
		l.P999Ns = h.ValueAtQuantile(99.9)
	}
	l.MaxNs = h.Max()
	return l
}

// streamCounts is a consistent copy of a stream's counters.
type streamCounts struct {
	phase, stopReason                                         string
	start, end                                                time.Time
	scheduled, sent, answered, rejected, lost, unsent, filled int64
	dups                                                      int64
	latency                                                   rundir.Latency
	lag                                                       rundir.SendLag
	conn                                                      rundir.ConnStats
	err                                                       error
}

func (s *stream) counts() streamCounts {
	s.mu.Lock()
	c := streamCounts{
		phase: s.phase, stopReason: s.stopReason,
		scheduled: s.scheduled, sent: s.sent, answered: s.answered, rejected: s.rejected,
		lost: s.lost, unsent: s.unsent, filled: s.filled, dups: s.dups,
		latency: summarize(s.lat), err: s.err,
	}
	if s.phase != "starting" {
		c.start = time.Unix(0, s.epochUnix+s.start)
		if s.endAt != math.MaxInt64 {
			c.end = time.Unix(0, s.epochUnix+s.start+s.endAt)
		}
	}
	c.lag = rundir.SendLag{MaxNs: s.maxLag, Late: s.late, Held: s.held, LateConnected: s.lateConnected, SenderSched: s.senderSched, SenderNice: s.senderNice}
	if n := s.lag.TotalCount(); n > 0 {
		c.lag.P50Ns = s.lag.ValueAtQuantile(50)
		if n >= 100 {
			c.lag.P99Ns = s.lag.ValueAtQuantile(99)
		}
	}
	s.mu.Unlock()
	c.conn = s.cl.snapshot()
	return c
}

// lateSendsFrom is a copy of the late sends kept (cfg.lateSends) from the n-th on.
func (s *stream) lateSendsFrom(n int) []rundir.LateSend {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.lateSends[min(n, len(s.lateSends)):])
}

var (
	errRunEnded     = errors.New("run has ended")
	errStoppedEarly = errors.New("stopped before a leader was found")
)
