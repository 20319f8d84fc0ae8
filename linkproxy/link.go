// Package linkproxy makes network distance and partitions in user space: a Link is a TCP proxy
// that delays each direction by a set delay and jitter, can be cut (nothing forwarded, new
// connections refused) and healed, and measures its own round trip; a Mesh puts a Link on every
// cross-zone pair of a placement. The local target needs it because this kernel has no netem
// qdisc; on a real network the kernel's netem does the same job.
package linkproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Shape is what a Link does to one direction of its traffic: every chunk read is written
// Delay later, give or take a uniform Jitter (never before it was read, never before the chunk
// read ahead of it on the same connection, so a connection's bytes keep their order).
type Shape struct {
	Delay  time.Duration `json:"delay_ns"`
	Jitter time.Duration `json:"jitter_ns"`
}

func (s Shape) String() string {
	if s.Jitter == 0 {
		return s.Delay.String()
	}
	return fmt.Sprintf("%v ± %v", s.Delay, s.Jitter)
}

// Validate says what is wrong with a shape.
func (s Shape) Validate() error {
	if s.Delay < 0 || s.Jitter < 0 {
		return fmt.Errorf("delay %v and jitter %v must not be negative", s.Delay, s.Jitter)
	}
	if s.Jitter > s.Delay {
		// Below zero the draw would be clamped, and the mean would no longer be Delay.
		return fmt.Errorf("jitter %v is more than the delay %v", s.Jitter, s.Delay)
	}
	return nil
}

// ErrCut is the error of a Probe through a link that is cut.
var ErrCut = errors.New("link is cut")

// Options configure a Link.
type Options struct {
	Listen string // host:port the link listens on (port 0: any free port)
	Target string // host:port it forwards to
	Up     Shape  // client → target
	Down   Shape  // target → client
	Seed   uint64 // the jitter's random stream (0: from the clock)
	Logger *slog.Logger
	// DialTimeout bounds the connection to Target (default 2 s).
	DialTimeout time.Duration
}

// Stats are a link's counters.
type Stats struct {
	Accepted  uint64 `json:"accepted"`   // connections forwarded
	Refused   uint64 `json:"refused"`    // connections closed at once because the link was cut
	DialFail  uint64 `json:"dial_fail"`  // connections whose target could not be reached
	BytesUp   uint64 `json:"bytes_up"`   // bytes written to the target
	BytesDown uint64 `json:"bytes_down"` // bytes written back to clients
}

// Link is one proxied TCP path.
type Link struct {
	opts  Options
	log   *slog.Logger
	ln    net.Listener
	probe *prober
	q     *timerQueue

	up, down atomic.Pointer[Shape]
	rngMu    sync.Mutex
	rng      *rand.Rand

	cutMu  sync.Mutex
	cut    bool
	healed chan struct{} // closed at Heal; replaced at Cut

	connMu sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	quit   chan struct{} // closed at Close
	wg     sync.WaitGroup

	accepted, refused, dialFail, bytesUp, bytesDown atomic.Uint64
}

// Start listens and forwards until Close.
func Start(ctx context.Context, o Options) (*Link, error) {
	if err := o.Up.Validate(); err != nil {
		return nil, fmt.Errorf("link to %s: up: %w", o.Target, err)
	}
	if err := o.Down.Validate(); err != nil {
		return nil, fmt.Errorf("link to %s: down: %w", o.Target, err)
	}
	if o.Target == "" {
		return nil, errors.New("link: no target address")
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	seed := o.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("link to %s: listen on %s: %w", o.Target, o.Listen, err)
	}
	l := &Link{opts: o, log: o.Logger.With("link", ln.Addr().String(), "target", o.Target), ln: ln,
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), healed: make(chan struct{}),
		conns: map[net.Conn]struct{}{}, quit: make(chan struct{}), q: newTimerQueue()}
	close(l.healed)
	up, down := o.Up, o.Down
	l.up.Store(&up)
	l.down.Store(&down)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.serve(ln, func(ctx context.Context) (net.Conn, error) { return l.dialTarget(ctx) })
	}()
	return l, nil
}

// Addr is where the link listens: what a client dials instead of the target.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// Target is where the link forwards to.
func (l *Link) Target() string { return l.opts.Target }

// Shapes are the shapes in effect.
func (l *Link) Shapes() (up, down Shape) { return *l.up.Load(), *l.down.Load() }

// SetShapes changes the shapes for every chunk read from now on.
func (l *Link) SetShapes(up, down Shape) error {
	if err := up.Validate(); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	if err := down.Validate(); err != nil {
		return fmt.Errorf("down: %w", err)
	}
	l.up.Store(&up)
	l.down.Store(&down)
	return nil
}

// Cut stops the link: nothing more is forwarded on open connections (what they send is held,
// as a partition holds it in the sender's retransmissions) and new connections are closed as
// soon as they are accepted, so the dialer sees its connection reset.
func (l *Link) Cut() {
	l.cutMu.Lock()
	defer l.cutMu.Unlock()
	if !l.cut {
		l.cut = true
		l.healed = make(chan struct{})
		l.log.Info("cut")
	}
}

// Heal undoes Cut: held data flows on, new connections are forwarded again.
func (l *Link) Heal() {
	l.cutMu.Lock()
	defer l.cutMu.Unlock()
	if l.cut {
		l.cut = false
		close(l.healed)
		l.log.Info("healed")
	}
}

// IsCut says whether the link is cut.
func (l *Link) IsCut() bool {
	l.cutMu.Lock()
	defer l.cutMu.Unlock()
	return l.cut
}

// waitHealed returns at once on a link that is not cut, else when it is healed (true) or
// closed (false).
func (l *Link) waitHealed() bool {
	l.cutMu.Lock()
	h := l.healed
	l.cutMu.Unlock()
	select {
	case <-h:
		return true
	case <-l.quit:
		return false
	}
}

// Stats are the link's counters so far.
func (l *Link) Stats() Stats {
	return Stats{Accepted: l.accepted.Load(), Refused: l.refused.Load(), DialFail: l.dialFail.Load(),
		BytesUp: l.bytesUp.Load(), BytesDown: l.bytesDown.Load()}
}

// Close stops listening and closes every connection it holds.
func (l *Link) Close() error {
	l.connMu.Lock()
	if l.closed {
		l.connMu.Unlock()
		return nil
	}
	l.closed = true
	close(l.quit)
	for c := range l.conns {
		c.Close()
	}
	l.connMu.Unlock()
	err := l.ln.Close()
	if l.probe != nil {
		l.probe.close()
	}
	l.q.close()
	l.wg.Wait()
	return err
}

func (l *Link) dialTarget(ctx context.Context) (net.Conn, error) {
	d := net.Dialer{Timeout: l.opts.DialTimeout}
	return d.DialContext(ctx, "tcp", l.opts.Target)
}

func (l *Link) track(c net.Conn) bool {
	l.connMu.Lock()
	defer l.connMu.Unlock()
	if l.closed {
		c.Close()
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *Link) untrack(c net.Conn) {
	l.connMu.Lock()
	delete(l.conns, c)
	l.connMu.Unlock()
	c.Close()
}

// serve accepts on ln and forwards each connection to what dial reaches (the target, or the
// prober's echo), shaped alike.
func (l *Link) serve(ln net.Listener, dial func(context.Context) (net.Conn, error)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				l.log.Warn("accept", "err", err)
			}
			return
		}
		if l.IsCut() {
			l.refused.Add(1)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // a reset, not an orderly end
			}
			c.Close()
			continue
		}
		if !l.track(c) {
			return
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer l.untrack(c)
			ctx, cancel := context.WithTimeout(context.Background(), l.opts.DialTimeout)
			t, err := dial(ctx)
			cancel()
			if err != nil {
				l.dialFail.Add(1)
				l.log.Warn("dial target", "err", err)
				return
			}
			if !l.track(t) {
				return
			}
			defer l.untrack(t)
			l.accepted.Add(1)
			l.forward(c, t)
		}()
	}
}

// forward runs both directions of one connection until both have ended.
func (l *Link) forward(client, target net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); l.pump(target, client, &l.up, &l.bytesUp) }()
	go func() { defer wg.Done(); l.pump(client, target, &l.down, &l.bytesDown) }()
	wg.Wait()
}

// chunkSize is the most read at once; queueDepth the most chunks of one direction in flight
// (read, not yet written), which bounds what a slow reader or a cut makes the link hold.
const (
	chunkSize  = 32 << 10
	queueDepth = 256
)

var chunkPool = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

// pump reads src and writes dst, every chunk at its due time. The reader stamps each chunk and
// hands it to the link's timer queue, which hands it to the writer when due: no goroutine
// sleeps per read, and a chunk is due no earlier than the one before it, so order is kept.
func (l *Link) pump(dst, src net.Conn, shape *atomic.Pointer[Shape], bytes *atomic.Uint64) {
	// out never blocks the timer queue: a slot is taken before a chunk is queued and given back
	// only once the writer is done with it, and out holds as many chunks as there are slots.
	out := make(chan *chunk, queueDepth)
	slots := make(chan struct{}, queueDepth)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		broken := false
		for c := range out {
			if !broken {
				if !l.waitHealed() {
					broken = true
				} else if _, err := dst.Write(c.buf[:c.n]); err != nil {
					broken = true
					src.Close() // the other end is gone: stop reading too
				} else {
					bytes.Add(uint64(c.n))
				}
			}
			chunkPool.Put(c.bp)
			<-slots
		}
	}()
	var last time.Time
	var queued atomic.Int64 // chunks of this direction in the timer queue, not yet in out
	for {
		bp := chunkPool.Get().(*[]byte)
		n, err := src.Read(*bp)
		if n > 0 && l.waitHealed() {
			now := time.Now()
			due := now.Add(l.draw(*shape.Load()))
			if due.Before(last) {
				due = last
			}
			last = due
			slots <- struct{}{}
			c := &chunk{bp: bp, buf: *bp, n: n, due: due, out: out, queued: &queued}
			if !due.After(now) && queued.Load() == 0 {
				// Due now with nothing of this direction ahead of it in the queue (an
				// undelayed link): straight to the writer, which keeps its order and spares
				// the queue's wake-up.
				out <- c
			} else {
				queued.Add(1)
				l.q.push(c)
			}
		} else {
			chunkPool.Put(bp)
		}
		if err != nil {
			break
		}
	}
	// Everything read goes out before the half-close that passes the end on: fill every slot,
	// which the writer frees only as it finishes chunks.
	for range queueDepth {
		slots <- struct{}{}
	}
	close(out)
	<-writerDone
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		dst.Close()
	}
}

// draw is one chunk's delay.
func (l *Link) draw(s Shape) time.Duration {
	if s.Jitter == 0 {
		return s.Delay
	}
	l.rngMu.Lock()
	j := time.Duration(l.rng.Int64N(int64(2*s.Jitter)+1)) - s.Jitter
	l.rngMu.Unlock()
	return max(s.Delay+j, 0)
}
