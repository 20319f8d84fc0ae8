package loadgen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/net/ipv4"

	"github.com/rig-dev/rig/engine/wire"
	"github.com/rig-dev/rig/internal/loadavg"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"github.com/rig-dev/rig/stats"
)

// BenchOptions configure BenchSend (`rig bench loadgen`).
type BenchOptions struct {
	Messages int             // datagrams per burst (default 50,000)
	Size     int             // bytes per datagram (default 170)
	Repeats  int             // bursts timed per sender kind, interleaved (default 5)
	Rates    []float64       // probe rates for the send-lag runs (default 1k, 5k, 50k/s)
	Spins    []time.Duration // probe stream spin settings run at each rate (default 0 and 100 µs)
	For      time.Duration
	Logger   *slog.Logger
}

// BenchReport is what BenchSend measured. Times are medians over the repeats.
type BenchReport struct {
	Messages int     `json:"messages"`
	Size     int     `json:"size"`
	Repeats  int     `json:"repeats"`
	BurstMs  float64 `json:"burst_ms"`  // the load generator's UDP sender: pre-encoded, stamped, sendmmsg
	BareMs   float64 `json:"bare_ms"`   // a bare loop of sendmmsg over the same buffers
	SingleMs float64 `json:"single_ms"` // one datagram per write, for reference
	Ratio    float64 `json:"ratio"`     // BurstMs / BareMs (goal: at most 1.25)
	Received int64   `json:"received"`  // datagrams the loopback receiver read over every burst
	// A bare receiver's latency (receive time minus send stamp) over the load generator's bursts:
	// the host's floor under a burst's p99 < 1 ms bound (analysis.MaxBurstP99Ms), with no engine
	// behind the socket.
	RecvP50Us  float64 `json:"recv_p50_us"`
	RecvP99Us  float64 `json:"recv_p99_us"`
	RecvMaxUs  float64 `json:"recv_max_us"`
	ProbeLag   []Lag   `json:"probe_lag"`    // send lag of the probe stream by rate
	Load1      float64 `json:"load1_before"` // /proc/loadavg when the benchmark started
	Load1After float64 `json:"load1_after"`
	CPUs       int     `json:"cpus"`
}

// Lag is the probe stream's send lag at one rate.
type Lag struct {
	Rate   float64 `json:"rate"`
	SpinUs float64 `json:"spin_us"` // the stream's busy-wait before each probe (0: it sleeps)
	Probes int64   `json:"probes"`
	P50Us  float64 `json:"p50_us"`
	P99Us  float64 `json:"p99_us"`
	MaxUs  float64 `json:"max_us"`
	Late   int64   `json:"late"` // more than 1 ms behind schedule
}

// BenchSend measures how fast and how punctual the load generator sends, against receivers on
// loopback: a burst through the UDP sender next to a bare batched-send loop and a
// one-datagram-per-write loop (same run, interleaved), then the probe stream's send lag at each
// rate against a TCP responder that answers every request at once.
func BenchSend(ctx context.Context, o BenchOptions) (BenchReport, error) {
	if o.Messages == 0 {
		o.Messages = 50_000
	}
	if o.Size == 0 {
		o.Size = loadspec.DefaultBurstSize
	}
	if o.Repeats == 0 {
		o.Repeats = 5
	}
	if o.Rates == nil {
		o.Rates = []float64{1000, 5000, 50000}
	}
	if o.Spins == nil {
		o.Spins = []time.Duration{0, 100 * time.Microsecond}
	}
	if o.For == 0 {
		o.For = 3 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.Messages < 1 || o.Messages > 10_000_000:
		return BenchReport{}, fmt.Errorf("%w: messages %d: want 1..10M", ErrBadOptions, o.Messages)
	case o.Size < wire.DgramMin || o.Size > wire.DgramMax:
		return BenchReport{}, fmt.Errorf("%w: size %d: want %d..%d bytes", ErrBadOptions, o.Size, wire.DgramMin, wire.DgramMax)
	case o.Repeats < 1:
		return BenchReport{}, fmt.Errorf("%w: repeats %d: want at least 1", ErrBadOptions, o.Repeats)
	}
	rep := BenchReport{Messages: o.Messages, Size: o.Size, Repeats: o.Repeats, CPUs: runtime.NumCPU()}
	rep.Load1 = load1()
	if err := benchBursts(ctx, o, &rep); err != nil {
		return rep, err
	}
	for _, rate := range o.Rates {
		for _, spin := range o.Spins {
			l, err := benchProbeLag(ctx, rate, spin, o.For, o.Logger)
			if err != nil {
				return rep, fmt.Errorf("probe lag at %g/s, spin %v: %w", rate, spin, err)
			}
			rep.ProbeLag = append(rep.ProbeLag, l)
		}
	}
	rep.Load1After = load1()
	return rep, nil
}

// benchReceiver drains a UDP socket on loopback, counts what it read and records the latency of
// every stamped datagram (the bare loops' are not).
type benchReceiver struct {
	conn *net.UDPConn
	n    chan int64
	lat  *hdr.Histogram // ns, as the engine's burst latency (HDR); read after close
}

func newBenchReceiver() (*benchReceiver, error) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	c.SetReadBuffer(64 << 20) // whatever rmem_max allows: drops do not change the send time
	r := &benchReceiver{conn: c, n: make(chan int64, 1), lat: newHist()}
	go func() {
		pc := ipv4.NewPacketConn(c)
		msgs := make([]ipv4.Message, 64)
		for i := range msgs {
			msgs[i].Buffers = [][]byte{make([]byte, 2048)}
		}
		var total int64
		var d wire.Dgram
		for {
			k, err := pc.ReadBatch(msgs, 0)
			if err != nil {
				r.n <- total
				return
			}
			now := time.Now().UnixNano()
			for _, m := range msgs[:k] {
				if wire.DecodeDgram(m.Buffers[0][:m.N], &d) == nil && d.SentNs > 0 {
					r.lat.RecordValue(clampLatency(now - d.SentNs))
				}
			}
			total += int64(k)
		}
	}()
	return r, nil
}

func (r *benchReceiver) close() int64 {
	r.conn.Close()
	return <-r.n
}

func benchBursts(ctx context.Context, o BenchOptions, rep *BenchReport) error {
	recv, err := newBenchReceiver()
	if err != nil {
		return fmt.Errorf("loopback receiver: %w", err)
	}
	target := recv.conn.LocalAddr().String()
	s, err := newUDPSender(target, o.Size, loadspec.DefaultInstruments, loadspec.DefaultProbePrice, o.Logger)
	if err != nil {
		recv.close()
		return err
	}
	defer s.close()
	bare, err := net.DialUDP("udp", nil, recv.conn.LocalAddr().(*net.UDPAddr))
	if err != nil {
		recv.close()
		return err
	}
	defer bare.Close()
	bufs := make([][]byte, o.Messages)
	for i := range bufs {
		bufs[i] = make([]byte, o.Size)
	}
	bpc := ipv4.NewPacketConn(bare)
	msgs := make([]ipv4.Message, udpSendBatch)
	for i := range msgs {
		msgs[i].Buffers = make([][]byte, 1)
	}
	var burst, plain, single []float64
	for k := 0; k < o.Repeats && ctx.Err() == nil; k++ {
		s.prepare(uint32(k), o.Messages) // encoded before the burst is due, as in a run
		t0 := time.Now()
		s.burst(uint32(k), o.Messages)
		burst = append(burst, msSince(t0))
		pause()

		t0 = time.Now()
		for i := 0; i < len(bufs); {
			n := min(udpSendBatch, len(bufs)-i)
			for j := 0; j < n; j++ {
				msgs[j].Buffers[0] = bufs[i+j]
			}
			w, err := bpc.WriteBatch(msgs[:n], 0)
			if err != nil {
				return fmt.Errorf("bare sendmmsg: %w", err)
			}
			i += w
		}
		plain = append(plain, msSince(t0))
		pause()

		t0 = time.Now()
		for _, b := range bufs {
			if _, err := bare.Write(b); err != nil {
				return fmt.Errorf("single write: %w", err)
			}
		}
		single = append(single, msSince(t0))
		pause()
	}
	rep.BurstMs, rep.BareMs, rep.SingleMs = stats.Median(burst), stats.Median(plain), stats.Median(single)
	if rep.BareMs > 0 {
		rep.Ratio = rep.BurstMs / rep.BareMs
	}
	rep.Received = recv.close()
	if h := recv.lat; h.TotalCount() > 0 {
		rep.RecvP50Us, rep.RecvP99Us = float64(h.ValueAtQuantile(50))/1e3, float64(h.ValueAtQuantile(99))/1e3
		rep.RecvMaxUs = float64(h.Max()) / 1e3
	}
	return ctx.Err()
}

// pause lets the receiver drain between timed bursts.
func pause() { time.Sleep(200 * time.Millisecond) }

func msSince(t time.Time) float64 { return float64(time.Since(t)) / 1e6 }

// benchProbeLag runs the real probe stream at rate for d against a responder on loopback.
func benchProbeLag(ctx context.Context, rate float64, spin, d time.Duration, log *slog.Logger) (Lag, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Lag{}, err
	}
	defer ln.Close()
	go serveOK(ln)
	dir, err := os.MkdirTemp("", "rig-bench-loadgen-")
	if err != nil {
		return Lag{}, err
	}
	defer os.RemoveAll(dir)
	st, err := Probe(ctx, ProbeOptions{Servers: []string{ln.Addr().String()}, Rate: rate, Duration: d, Spin: spin,
		Grace: time.Second, Out: dir, Logger: log})
	if err != nil {
		return Lag{}, err
	}
	return Lag{Rate: rate, SpinUs: float64(spin) / 1e3, Probes: st.Sent, P50Us: float64(st.SendLag.P50Ns) / 1e3, P99Us: float64(st.SendLag.P99Ns) / 1e3,
		MaxUs: float64(st.SendLag.MaxNs) / 1e3, Late: st.SendLag.Late}, nil
}

// serveOK answers every request on every connection with OK at once: a leader with no work.
func serveOK(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			br, bw := bufio.NewReaderSize(c, 64<<10), bufio.NewWriterSize(c, 64<<10)
			var buf, out []byte
			var req wire.Request
			for {
				var err error
				if buf, err = wire.ReadFrame(br, buf[:0]); err != nil {
					return
				}
				if wire.DecodeRequest(buf, &req) != nil {
					return
				}
				out = wire.AppendResponse(out[:0], &wire.Response{Type: req.Type, Corr: req.Corr, Status: wire.StatusOK})
				bw.Write(out)
				if br.Buffered() == 0 { // flush once the pipeline is drained
					if err := bw.Flush(); err != nil && !errors.Is(err, net.ErrClosed) {
						return
					}
				}
			}
		}()
	}
}

func load1() float64 {
	if l, err := loadavg.Read("/"); err == nil {
		return l.Load1
	}
	return -1
}
