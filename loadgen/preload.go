package loadgen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/rig-dev/rig/engine/bookgen"
	"github.com/rig-dev/rig/engine/wire"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"github.com/rig-dev/rig/rundir"
)

// PreloadOptions configure the resting book built before a run (its shape, BookShape) and how
// it is sent.
type PreloadOptions struct {
	loadspec.BookShape
	Servers  []string
	Batch    int // orders per TypeBatch frame, one raft entry each (default loadspec.DefaultBatch: ~1 MiB)
	InFlight int // batches pipelined before waiting for an answer (default loadspec.DefaultInFlight)
	Conn     ConnOptions
	Logger   *slog.Logger
	// Progress, if set, is called about once a second while the preload runs.
	Progress func(PreloadProgress)
}

// PreloadProgress is a progress report.
type PreloadProgress struct {
	Acked   int64         // orders the leader has applied
	Total   int64         // orders to send
	Elapsed time.Duration // since the first send
	Rate    float64       // orders/s over the last report interval
}

// ErrRejected reports that the engine refused preload orders on their first send.
var ErrRejected = errors.New("engine rejected preload orders")

func (o *PreloadOptions) normalize() error {
	if err := o.BookShape.Normalize(); err != nil {
		return err
	}
	if err := loadspec.Default(&o.Batch, loadspec.DefaultBatch, "batch"); err != nil {
		return err
	}
	if err := loadspec.Default(&o.InFlight, loadspec.DefaultInFlight, "in_flight"); err != nil {
		return err
	}
	if o.Batch*31+13 > wire.MaxFrame {
		return fmt.Errorf("%w: batch: %d orders exceed the %d-byte frame limit", ErrBadOptions, o.Batch, wire.MaxFrame)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// preloader owns the batches in flight: a batch stays encoded until the leader applies it, so
// it can be resent after a redirect, an error or a lost connection.
type preloader struct {
	o  *PreloadOptions
	cl *client

	mu         sync.Mutex
	frames     map[uint64][]byte // in flight, by correlation id (batch number + 1)
	sizes      map[uint64]int
	attempts   map[uint64]int
	acked      int64
	batches    int64
	dups       int64
	filled     int64
	lastAnswer int64
	fatal      error
	freed      chan struct{}
}

func (p *preloader) encode(dst []byte, corr uint64) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attempts[corr]++
	return append(dst, p.frames[corr]...)
}

func (p *preloader) answer(corr uint64, r *wire.Response, at int64) {
	p.mu.Lock()
	n, ok := p.sizes[corr]
	if !ok {
		p.mu.Unlock()
		return
	}
	if r.Status == wire.StatusRejected {
		if p.attempts[corr] <= 1 {
			if p.fatal == nil {
				p.fatal = fmt.Errorf("%w: batch %d (orders %d..): %s", ErrRejected, corr-1, p.o.FirstID+(corr-1)*uint64(p.o.Batch), r.Text)
			}
		} else {
			// A resend of a batch whose first send was applied before the connection or the
			// leader went away: the book already has these ids.
			p.dups++
		}
	}
	p.filled += r.Filled
	if r.Status == wire.StatusOK || p.attempts[corr] > 1 {
		p.acked += int64(n)
		p.batches++
	}
	p.lastAnswer = at
	delete(p.frames, corr)
	delete(p.sizes, corr)
	delete(p.attempts, corr)
	p.mu.Unlock()
	select {
	case p.freed <- struct{}{}:
	default:
	}
}

// Preload builds the resting book: Orders GTC orders in TypeBatch frames, InFlight batches
// pipelined to the leader, following it across elections and resending what a lost
// connection or leader left unanswered. It returns when the leader has applied every order.
func Preload(ctx context.Context, opts PreloadOptions) (rundir.PreloadStats, error) {
	if len(opts.Servers) == 0 {
		return rundir.PreloadStats{}, fmt.Errorf("%w: servers: none given (want host:port of each engine's client address)", ErrBadOptions)
	}
	if err := opts.normalize(); err != nil {
		return rundir.PreloadStats{}, err
	}
	o := &opts
	p := &preloader{
		o:        o,
		frames:   make(map[uint64][]byte),
		sizes:    make(map[uint64]int),
		attempts: make(map[uint64]int),
		freed:    make(chan struct{}, 1),
	}
	p.cl = newClient(o.Servers, o.Conn, p, o.Logger, time.Now())
	defer p.cl.close()

	progressDone := make(chan struct{})
	var progressWG sync.WaitGroup
	if o.Progress != nil {
		progressWG.Add(1)
		go func() {
			defer progressWG.Done()
			p.reportProgress(progressDone)
		}()
	}
	err := p.send(ctx)
	close(progressDone)
	progressWG.Wait()
	p.cl.close()

	p.mu.Lock()
	st := rundir.PreloadStats{
		Orders: p.acked, Batches: p.batches, ElapsedNs: p.lastAnswer,
		Duplicates: p.dups, Filled: p.filled, Book: loadspec.BookRecord(o.BookShape),
	}
	p.mu.Unlock()
	if st.ElapsedNs > 0 {
		st.OrdersPerSec = float64(st.Orders) / time.Duration(st.ElapsedNs).Seconds()
	}
	st.Conn = p.cl.snapshot()
	if st.Filled != 0 {
		o.Logger.Warn("preload orders traded: the book already held crossing orders", "filled", st.Filled)
	}
	if err != nil {
		return st, fmt.Errorf("preload %d orders (%d applied): %w", o.Orders, st.Orders, err)
	}
	return st, nil
}

func (p *preloader) send(ctx context.Context) error {
	gen := bookgen.New(&p.o.BookShape)
	nb := (p.o.Orders + int64(p.o.Batch) - 1) / int64(p.o.Batch)
	batch := make([]wire.Order, 0, p.o.Batch)
	var retries []uint64
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for j := int64(0); ; {
		now := p.cl.now()
		var next int64
		retries, next = p.cl.takeRetries(now, retries[:0])
		if len(retries) > 0 {
			slices.Sort(retries) // batch order, so resent batches enter the log in order
			if _, err := p.cl.send(ctx, retries); err != nil {
				return err
			}
			continue
		}
		p.mu.Lock()
		fatal, inflight := p.fatal, len(p.frames)
		p.mu.Unlock()
		if fatal != nil {
			return fatal
		}
		// A new batch goes out only behind everything sent before it: alone until a leader has
		// confirmed the connection, and never while a batch waits to be resent. Within a price
		// level time priority follows the log, so this is what makes the book the same on every
		// run (and the same as a stored one, bookgen.Orders).
		if j < nb && !p.cl.retrying() && (inflight == 0 || (inflight < p.o.InFlight && p.cl.steady())) {
			batch = batch[:0]
			for k := 0; k < p.o.Batch && gen.More(); k++ {
				batch = append(batch, gen.Next())
			}
			corr := uint64(j + 1)
			frame := wire.AppendRequest(nil, &wire.Request{Type: wire.TypeBatch, Corr: corr, Batch: batch})
			p.mu.Lock()
			p.frames[corr], p.sizes[corr] = frame, len(batch)
			p.mu.Unlock()
			if _, err := p.cl.send(ctx, []uint64{corr}); err != nil {
				return err
			}
			j++
			continue
		}
		if j >= nb && inflight == 0 {
			return nil
		}
		timer.Reset(time.Duration(min(next-now, int64(time.Second))))
		select {
		case <-p.freed:
		case <-p.cl.retryCh:
		case <-timer.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (p *preloader) reportProgress(done <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var prev int64
	prevAt := time.Now()
	start := prevAt
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			p.mu.Lock()
			acked := p.acked
			p.mu.Unlock()
			p.o.Progress(PreloadProgress{
				Acked: acked, Total: p.o.Orders, Elapsed: now.Sub(start),
				Rate: float64(acked-prev) / now.Sub(prevAt).Seconds(),
			})
			prev, prevAt = acked, now
		}
	}
}
