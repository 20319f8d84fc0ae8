package linkproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"
)

// ProbeOptions say how a link's round trip is measured.
// DefaultProbeCount is a probe's round trips when its options name none (a placement's links
// before and under load).
const DefaultProbeCount = 20

type ProbeOptions struct {
	Count   int           // round trips (default DefaultProbeCount)
	Size    int           // bytes each way (default 64)
	Timeout time.Duration // for the whole probe (default 5 s plus Count round trips of the set delays)
}

// Probe is a measured round trip: Count messages of Size bytes sent through the link, each
// after the answer to the one before.
type Probe struct {
	N      int           `json:"n"`
	Size   int           `json:"size"`
	Set    time.Duration `json:"set_ns"` // up + down delay asked for
	Jitter time.Duration `json:"jitter_ns"`
	Min    time.Duration `json:"min_ns"`
	Median time.Duration `json:"median_ns"`
	Mean   time.Duration `json:"mean_ns"`
	Max    time.Duration `json:"max_ns"`
}

func (p Probe) String() string {
	return fmt.Sprintf("round trip %v set (± %v): min %v, median %v, mean %v, max %v over %d × %d B",
		p.Set, p.Jitter, p.Min, p.Median, p.Mean, p.Max, p.N, p.Size)
}

// Tolerance and Floor are how far a probe's median round trip may be from the one asked for
// (Probe.Set) before a run stops: Tolerance of the asked, plus Floor, which covers what the
// path costs with no delay asked (loopback and the link's two hops, tens of µs each on an idle
// machine, a few hundred on a busy one).
const (
	Tolerance = 0.2
	Floor     = 300 * time.Microsecond
)

// ErrOffShape classifies a probe whose round trip is not the asked one.
var ErrOffShape = errors.New("off the asked")

// Check says how the probe's median round trip misses Set by more than tolerance × Set + floor.
func (p Probe) Check(tolerance float64, floor time.Duration) error {
	if p.N == 0 {
		return fmt.Errorf("%w: nothing measured", ErrOffShape)
	}
	allowed := time.Duration(tolerance*float64(p.Set)) + floor
	if off := p.Median - p.Set; off > allowed || -off > allowed {
		return fmt.Errorf("%w: asked %v, achieved %v (median of %d; min %v, max %v); allowed %v ± %v (%.0f %% + %v)",
			ErrOffShape, p.Set, p.Median, p.N, p.Min, p.Max, p.Set, allowed, tolerance*100, floor)
	}
	return nil
}

// prober is a second way through the link, shaped and cut like the first, that ends at an echo
// listener on the target's host instead of the target: the link's round trip can be measured
// without the target's service taking part.
type prober struct {
	ln   net.Listener // the link's side, served like the main listener
	echo net.Listener // on the target's host
	wg   sync.WaitGroup
}

func (p *prober) close() {
	p.ln.Close()
	p.echo.Close()
	p.wg.Wait()
}

func (l *Link) prober(ctx context.Context) (*prober, error) {
	l.connMu.Lock()
	defer l.connMu.Unlock()
	if l.closed {
		return nil, net.ErrClosed
	}
	if l.probe != nil {
		return l.probe, nil
	}
	host, _, err := net.SplitHostPort(l.opts.Target)
	if err != nil {
		return nil, fmt.Errorf("link to %s: target address: %w", l.opts.Target, err)
	}
	lhost, _, err := net.SplitHostPort(l.Addr())
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	echo, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("link to %s: echo listener for probes: %w", l.opts.Target, err)
	}
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(lhost, "0"))
	if err != nil {
		echo.Close()
		return nil, fmt.Errorf("link to %s: probe listener: %w", l.opts.Target, err)
	}
	p := &prober{ln: ln, echo: echo}
	p.wg.Add(2)
	go func() { defer p.wg.Done(); serveEcho(echo) }()
	go func() {
		defer p.wg.Done()
		l.serve(ln, func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", echo.Addr().String())
		})
	}()
	l.probe = p
	return p, nil
}

// serveEcho writes back whatever each connection sends.
func serveEcho(ln net.Listener) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			_, _ = io.Copy(c, c)
		}()
	}
}

// ProbeSlack is what a probe of one link may take beyond its round trips (the dial and the
// loopback hops on a busy machine) before it is given up.
const ProbeSlack = 5 * time.Second

// ProbeTimeout is the default bound of a probe of count round trips on a link whose round trip
// is at most rtt (its set delays plus their jitter, both ways): what a playbook's plan shows.
func ProbeTimeout(count int, rtt time.Duration) time.Duration {
	return ProbeSlack + time.Duration(count)*rtt
}

// Probe measures the link's round trip now, through the same shaping and cut as its traffic.
// A cut link answers ErrCut.
func (l *Link) Probe(ctx context.Context, o ProbeOptions) (Probe, error) {
	if o.Count <= 0 {
		o.Count = DefaultProbeCount
	}
	if o.Size <= 0 {
		o.Size = 64
	}
	up, down := l.Shapes()
	set := up.Delay + down.Delay
	if o.Timeout <= 0 {
		o.Timeout = ProbeTimeout(o.Count, set+up.Jitter+down.Jitter)
	}
	res := Probe{Size: o.Size, Set: set, Jitter: up.Jitter + down.Jitter}
	if l.IsCut() {
		return res, fmt.Errorf("probe %s: %w", l.Addr(), ErrCut)
	}
	p, err := l.prober(ctx)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", p.ln.Addr().String())
	if err != nil {
		return res, fmt.Errorf("probe %s: dial: %w", l.Addr(), err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	// A cancel (the run's load ended, the controller was interrupted) ends a round trip in
	// flight at once; a deadline set above would hold it for the whole bound (a delay of 10 s
	// each way: 105 s).
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	msg := make([]byte, o.Size)
	back := make([]byte, o.Size)
	rtts := make([]time.Duration, 0, o.Count)
	for i := range o.Count {
		for j := range msg {
			msg[j] = byte(i + j)
		}
		t0 := time.Now()
		if _, err := c.Write(msg); err != nil {
			return res, probeErr(ctx, l, err)
		}
		if _, err := io.ReadFull(c, back); err != nil {
			return res, probeErr(ctx, l, err)
		}
		rtts = append(rtts, time.Since(t0))
		if string(back) != string(msg) {
			return res, fmt.Errorf("probe %s: round trip %d came back changed", l.Addr(), i)
		}
	}
	return summarize(res, rtts), nil
}

func probeErr(ctx context.Context, l *Link, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("probe %s: %w (%v)", l.Addr(), context.Cause(ctx), err)
	}
	if l.IsCut() {
		return fmt.Errorf("probe %s: %w (%v)", l.Addr(), ErrCut, err)
	}
	if errors.Is(err, io.EOF) {
		// A connection accepted while the link was being cut is closed at once.
		return fmt.Errorf("probe %s: the link closed the connection: %w", l.Addr(), err)
	}
	return fmt.Errorf("probe %s: %w", l.Addr(), err)
}

func summarize(res Probe, rtts []time.Duration) Probe {
	res.N = len(rtts)
	if res.N == 0 {
		return res
	}
	s := slices.Clone(rtts)
	slices.Sort(s)
	var sum time.Duration
	for _, r := range s {
		sum += r
	}
	res.Min, res.Max, res.Mean = s[0], s[len(s)-1], sum/time.Duration(len(s))
	if len(s)%2 == 1 {
		res.Median = s[len(s)/2]
	} else {
		res.Median = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return res
}
