package linkproxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// echoServer is a real TCP echo on loopback, the target of the links under test.
func echoServer(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go serveEcho(ln)
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

func startLink(t testing.TB, target string, up, down Shape) *Link {
	t.Helper()
	l, err := Start(context.Background(), Options{Listen: "127.0.0.1:0", Target: target, Up: up, Down: down, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// roundTrips measures n 64 B round trips over c.
func roundTrips(t *testing.T, c net.Conn, n int) []time.Duration {
	t.Helper()
	msg, back := make([]byte, 64), make([]byte, 64)
	var out []time.Duration
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	for i := range n {
		msg[0] = byte(i)
		t0 := time.Now()
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, back); err != nil {
			t.Fatal(err)
		}
		out = append(out, time.Since(t0))
		if !bytes.Equal(msg, back) {
			t.Fatalf("round trip %d came back changed", i)
		}
	}
	return out
}

// TestDelayMeasured: the round trip through a link with delays set each way is measured back
// within what jitter and this machine's scheduling allow: never below the set delays less the
// jitter (the link cannot be faster than asked), the median within 20 % (plus the jitter) of
// the set round trip, over twice the floor: how much later than asked the round trip of a link
// delayed 200 µs each way is, measured first (the proxy's own hops and two late wakes from
// nanosleep: 0.1-0.5 ms on this machine, depending on its load).
func TestDelayMeasured(t *testing.T) {
	us := Shape{Delay: 200 * time.Microsecond}
	fl, err := startLink(t, echoServer(t), us, us).Probe(context.Background(), ProbeOptions{Count: 30})
	if err != nil {
		t.Fatal(err)
	}
	floor := max(fl.Median-fl.Set, 0)
	t.Logf("floor %v: %v", floor, fl)
	for _, tc := range []struct {
		name     string
		up, down Shape
	}{
		{"symmetric", Shape{Delay: 10 * time.Millisecond, Jitter: time.Millisecond}, Shape{Delay: 10 * time.Millisecond, Jitter: time.Millisecond}},
		{"asymmetric", Shape{Delay: 15 * time.Millisecond}, Shape{Delay: 3 * time.Millisecond, Jitter: 500 * time.Microsecond}},
		{"sub-millisecond", Shape{Delay: 400 * time.Microsecond}, Shape{Delay: 400 * time.Microsecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := startLink(t, echoServer(t), tc.up, tc.down)
			set := tc.up.Delay + tc.down.Delay
			jit := tc.up.Jitter + tc.down.Jitter
			check := func(what string, p Probe) {
				t.Helper()
				lo := set - jit
				// Twice the floor, at least 300 µs: the machine's load changes between the
				// floor's probe and this one (7 sessions share 2 cores here).
				slack := max(2*floor, 300*time.Microsecond)
				hi := set + jit + set/5 + slack
				t.Logf("%s: %v", what, p)
				if p.Min < lo {
					t.Errorf("%s: fastest round trip %v, below the set %v less the jitter %v", what, p.Min, set, jit)
				}
				if p.Median > hi {
					t.Errorf("%s: median round trip %v, above %v (set %v + jitter %v + 20 %% + %v for the floor)", what, p.Median, hi, set, jit, slack)
				}
			}
			c, err := net.Dial("tcp", l.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			check("traffic", summarize(Probe{Set: set, Jitter: jit, Size: 64}, roundTrips(t, c, 30)))
			p, err := l.Probe(context.Background(), ProbeOptions{Count: 30})
			if err != nil {
				t.Fatal(err)
			}
			if p.Set != set || p.Jitter != jit || p.N != 30 {
				t.Errorf("probe reports set %v jitter %v n %d, want %v %v 30", p.Set, p.Jitter, p.N, set, jit)
			}
			check("probe", p)
		})
	}
}

// TestDelayBesideBusyGoroutines: a link keeps its delay while every P the process had before it
// is busy (a controller proxying a run's traffic on a loaded host). Its timer thread wakes from
// nanosleep and needs a P to hand a chunk on; without one of its own it waited up to the
// scheduler's 10 ms time slice per hop, and this link's 4 ms round trip came out at 40-80 ms.
func TestDelayBesideBusyGoroutines(t *testing.T) {
	busy := runtime.GOMAXPROCS(0)
	ms2 := Shape{Delay: 2 * time.Millisecond}
	l := startLink(t, echoServer(t), ms2, ms2)
	var stop atomic.Bool
	defer stop.Store(true)
	for range busy {
		go func() {
			for n := 0; !stop.Load(); n++ {
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	p, err := l.Probe(context.Background(), ProbeOptions{Count: 20})
	stop.Store(true)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d busy goroutines: %v", busy, p)
	if p.Median > 2*p.Set {
		t.Errorf("median round trip %v with every earlier P busy; want near the set %v", p.Median, p.Set)
	}
}

// TestJitterSpreads: jitter is drawn per chunk, so round trips spread over most of its range,
// and never beyond it.
func TestJitterSpreads(t *testing.T) {
	s := Shape{Delay: 6 * time.Millisecond, Jitter: 5 * time.Millisecond}
	l := startLink(t, echoServer(t), s, s)
	p, err := l.Probe(context.Background(), ProbeOptions{Count: 40})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(p)
	if spread := p.Max - p.Min; spread < 5*time.Millisecond {
		t.Errorf("round trips spread over %v; ±5 ms each way should spread them over more than 5 ms", spread)
	}
	if p.Min < 2*time.Millisecond {
		t.Errorf("fastest round trip %v, below the least the shapes allow (2 ms)", p.Min)
	}
}

// TestOrderKept: with jitter larger than the time between reads, every byte still arrives in
// the order sent.
func TestOrderKept(t *testing.T) {
	s := Shape{Delay: 2 * time.Millisecond, Jitter: 2 * time.Millisecond}
	l := startLink(t, echoServer(t), s, s)
	c, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	data := make([]byte, 4<<20)
	_, _ = rand.Read(data)
	errc := make(chan error, 1)
	go func() {
		for off := 0; off < len(data); {
			n := min(len(data)-off, 1000+off%7000) // writes of every size
			if _, err := c.Write(data[off : off+n]); err != nil {
				errc <- err
				return
			}
			off += n
		}
		errc <- c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		i := 0
		for i < len(got) && i < len(data) && got[i] == data[i] {
			i++
		}
		t.Fatalf("got %d bytes back, first difference at %d of %d", len(got), i, len(data))
	}
	if st := l.Stats(); st.BytesUp != uint64(len(data)) || st.BytesDown != uint64(len(data)) {
		t.Errorf("stats %+v, want %d bytes each way", st, len(data))
	}
}

// TestCutHeal: a cut link forwards nothing on an open connection and refuses new ones; healed,
// the held bytes arrive and new connections are served.
func TestCutHeal(t *testing.T) {
	l := startLink(t, echoServer(t), Shape{Delay: time.Millisecond}, Shape{Delay: time.Millisecond})
	c, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrips(t, c, 3)

	l.Cut()
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(buf); !errors.Is(err, deadlineErr(err)) || n != 0 {
		t.Fatalf("read on a cut link: %d bytes, %v; want nothing until the deadline", n, err)
	}
	c2, err := net.Dial("tcp", l.Addr())
	if err == nil {
		_ = c2.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = c2.Write([]byte("x"))
		n, rerr := c2.Read(buf)
		c2.Close()
		if rerr == nil || isTimeout(rerr) {
			t.Fatalf("a new connection to a cut link read %d bytes, %v; want it closed by the link", n, rerr)
		}
	}
	if _, err := l.Probe(context.Background(), ProbeOptions{Count: 1}); !errors.Is(err, ErrCut) {
		t.Errorf("probe of a cut link: %v, want ErrCut", err)
	}
	if st := l.Stats(); st.Refused == 0 {
		t.Errorf("stats %+v: no connection refused", st)
	}

	l.Heal()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "held" {
		t.Fatalf("after heal: %q, %v; want the held bytes", buf, err)
	}
	c3, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	roundTrips(t, c3, 3)
	if _, err := l.Probe(context.Background(), ProbeOptions{Count: 3}); err != nil {
		t.Errorf("probe after heal: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// deadlineErr is err when it is a timeout, else a sentinel that matches nothing.
func deadlineErr(err error) error {
	if isTimeout(err) {
		return err
	}
	return errors.New("not a timeout")
}

func TestShapeValidate(t *testing.T) {
	if _, err := Start(context.Background(), Options{Listen: "127.0.0.1:0", Target: "127.0.0.1:1", Up: Shape{Delay: time.Millisecond, Jitter: 2 * time.Millisecond}}); err == nil {
		t.Error("jitter above the delay accepted")
	}
	if _, err := Start(context.Background(), Options{Listen: "127.0.0.1:0", Target: "127.0.0.1:1", Down: Shape{Delay: -time.Millisecond}}); err == nil {
		t.Error("a negative delay accepted")
	}
}

// BenchmarkRoundTrip: what a 64 B round trip costs through an undelayed link, beside the same
// round trip direct to the echo server.
func BenchmarkRoundTrip(b *testing.B) {
	target := echoServer(b)
	l := startLink(b, target, Shape{}, Shape{})
	for _, bc := range []struct{ name, addr string }{{"direct", target}, {"proxy", l.Addr()}} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := net.Dial("tcp", bc.addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			msg, back := make([]byte, 64), make([]byte, 64)
			b.SetBytes(128)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, back); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
