package loadgen

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rig-dev/rig/engine/wire"
	"github.com/rig-dev/rig/internal/ctxtime"
	"github.com/rig-dev/rig/internal/peak"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"github.com/rig-dev/rig/rundir"
	"golang.org/x/net/ipv4"
)

// UDP burst senders (datagram format: docs/wire.md, "UDP ingress"). A sender owns one socket
// connected to the leader's UDP address and one session. A burst is encoded before it is due,
// so sending is only stamping the send time and handing batches of udpSendBatch datagrams to the
// kernel with sendmmsg. Datagrams stay in a retransmit ring until overwritten; a NAK is answered
// from it. Heartbeats carry the next sequence number so the receiver sees a lost tail.

const (
	udpSendBatch   = 16       // datagrams per sendmmsg: every one carries the stamp taken before the call, so fewer per call bias latency less
	udpRingBytes   = 64 << 20 // retransmit ring per sender
	heartbeatEvery = 5 * time.Millisecond
	heartbeatFor   = 2 * time.Second // after the last send
	resendHold     = 2 * time.Millisecond
	maxLinger      = 10 * time.Second
)

type udpSender struct {
	conn    *net.UDPConn
	pc      *ipv4.PacketConn
	session uint32
	size    int
	idBase  uint64
	instr   int
	price   int64
	log     *slog.Logger

	mu        sync.Mutex // guards ring contents against the NAK reader's copies
	ring      []byte
	slots     int
	slotSeq   []uint64 // which seq each slot holds (+1; 0 = empty)
	resentAt  []int64  // when each slot was last resent (Unix ns)
	next      uint64   // next seq to send
	encoded   uint64   // seqs below this are encoded in the ring
	lastSend  atomic.Int64
	lastNakAt atomic.Int64

	msgs  []ipv4.Message
	stats rundir.UDPSenderStats
	naks  atomic.Int64
	res   atomic.Int64
	unav  atomic.Int64
	done  chan struct{}
	wg    sync.WaitGroup
}

var sessionSeq atomic.Uint32

func init() { sessionSeq.Store(uint32(time.Now().UnixNano()) & 0x7fff_0000) }

func newUDPSender(target string, size, instruments int, price int64, log *slog.Logger) (*udpSender, error) {
	if size < wire.DgramMin || size > wire.DgramMax {
		return nil, fmt.Errorf("%w: size: %d bytes, want %d..%d", ErrBadOptions, size, wire.DgramMin, wire.DgramMax)
	}
	ra, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		return nil, fmt.Errorf("udp target %q: %w", target, err)
	}
	c, err := net.DialUDP("udp", nil, ra)
	if err != nil {
		return nil, fmt.Errorf("udp sender to %s: %w", target, err)
	}
	slots := max(udpRingBytes/size, udpSendBatch)
	s := &udpSender{
		conn: c, pc: ipv4.NewPacketConn(c), session: sessionSeq.Add(1), size: size,
		idBase: nextIDBase(burstIDBit), instr: instruments, price: price, log: log,
		ring: make([]byte, slots*size), slots: slots, slotSeq: make([]uint64, slots), resentAt: make([]int64, slots),
		msgs: make([]ipv4.Message, udpSendBatch), done: make(chan struct{}),
	}
	for i := range s.msgs {
		s.msgs[i].Buffers = make([][]byte, 1)
	}
	s.stats = rundir.UDPSenderStats{Session: s.session, Target: target}
	s.wg.Add(2)
	go s.readNaks()
	go s.heartbeats()
	return s, nil
}

func (s *udpSender) slot(seq uint64) []byte {
	i := int(seq % uint64(s.slots))
	return s.ring[i*s.size : (i+1)*s.size]
}

// prepare encodes up to n datagrams from the next sequence number, as many as the ring holds
// without overwriting what a burst still in flight may need. It runs before the burst is due.
func (s *udpSender) prepare(burst uint32, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.encodeLocked(burst, s.next, s.next+uint64(min(n, s.slots)))
}

func (s *udpSender) encodeLocked(burst uint32, from, to uint64) {
	for seq := max(from, s.encoded); seq < to; seq++ {
		req := wire.Request{Type: wire.TypeOrder, Corr: seq, Order: wire.Order{
			ID: s.idBase | seq, Instrument: uint32(seq % uint64(s.instr)), Side: wire.Buy, TIF: wire.IOC, Price: s.price, Qty: 1,
		}}
		b := s.slot(seq)
		if _, err := wire.AppendDataDgram(b[:0], s.session, seq, burst, &req, s.size); err != nil {
			panic(err) // size was checked in newUDPSender
		}
		s.slotSeq[seq%uint64(s.slots)] = seq + 1
	}
	s.encoded = max(s.encoded, to)
}

// sendMarks are the times batches went out, for the sender-side peak per 1 ms.
type udpBurstSent struct {
	sent    int
	startNs int64 // Unix ns of the first send call
	endNs   int64 // Unix ns when the last send call returned
	marks   []sendMark
}

// burst sends n datagrams as fast as the kernel takes them.
func (s *udpSender) burst(burst uint32, n int) udpBurstSent {
	out := udpBurstSent{marks: make([]sendMark, 0, n/udpSendBatch+1)}
	first := s.next
	end := first + uint64(n)
	for seq := first; seq < end; {
		k := int(min(uint64(udpSendBatch), end-seq))
		now := time.Now().UnixNano()
		s.mu.Lock()
		if seq+uint64(k) > s.encoded { // a burst larger than the ring is encoded as it goes
			s.encodeLocked(burst, seq, seq+uint64(k))
		}
		for i := 0; i < k; i++ {
			b := s.slot(seq + uint64(i))
			wire.StampDgram(b, now)
			s.msgs[i].Buffers[0] = b
		}
		s.mu.Unlock()
		if out.startNs == 0 {
			out.startNs = now
		}
		sent := s.writeAll(s.msgs[:k])
		done := time.Now().UnixNano()
		out.marks = append(out.marks, sendMark{At: done, N: sent})
		out.sent += sent
		seq += uint64(k)
		out.endNs = done
	}
	s.next = end
	s.lastSend.Store(time.Now().UnixNano())
	s.sendHeartbeat()
	return out
}

// writeAll hands msgs to the kernel, calling sendmmsg again for what a short write left.
func (s *udpSender) writeAll(msgs []ipv4.Message) int {
	sent := 0
	for sent < len(msgs) {
		n, err := s.pc.WriteBatch(msgs[sent:], 0)
		if err != nil {
			s.stats.SendErrors++
			if errors.Is(err, net.ErrClosed) {
				return sent
			}
			n = max(n, 1) // skip the datagram the kernel refused (e.g. ECONNREFUSED from an ICMP)
		}
		sent += n
	}
	return sent
}

func (s *udpSender) sendHeartbeat() {
	s.mu.Lock()
	next := s.next
	s.mu.Unlock()
	s.conn.Write(wire.AppendHeartbeat(nil, s.session, next, time.Now().UnixNano()))
}

// heartbeats repeats the next sequence number for a while after each burst, since the first
// heartbeat can be dropped by the same full buffer as the tail it announces.
func (s *udpSender) heartbeats() {
	defer s.wg.Done()
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			if last := s.lastSend.Load(); last > 0 && time.Now().UnixNano()-last < int64(heartbeatFor) {
				s.sendHeartbeat()
			}
		}
	}
}

// readNaks answers NAKs from the ring, keeping each datagram's original send stamp (so the
// receiver's latency includes the repair) and marking it a retransmission.
func (s *udpSender) readNaks() {
	defer s.wg.Done()
	buf := make([]byte, 2048)
	var d wire.Dgram
	var out [][]byte
	for {
		n, err := s.conn.Read(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil || wire.DecodeDgram(buf[:n], &d) != nil || d.Kind != wire.DgramNak || d.Session != s.session {
			continue // ECONNREFUSED while nobody listens, or not ours
		}
		s.naks.Add(1)
		out = out[:0]
		now := time.Now().UnixNano()
		s.lastNakAt.Store(now)
		s.mu.Lock()
		for seq := d.Seq; seq < d.Seq+uint64(d.Burst) && seq < s.next; seq++ {
			i := seq % uint64(s.slots)
			if s.slotSeq[i] != seq+1 {
				s.unav.Add(1)
				continue
			}
			if now-s.resentAt[i] < int64(resendHold) {
				continue // a NAK crossing the resend it asks for
			}
			s.resentAt[i] = now
			b := append([]byte(nil), s.slot(seq)...)
			wire.MarkRetransmit(b)
			out = append(out, b)
		}
		s.mu.Unlock()
		msgs := make([]ipv4.Message, len(out))
		for i, b := range out {
			msgs[i].Buffers = [][]byte{b}
		}
		for len(msgs) > 0 {
			k, err := s.pc.WriteBatch(msgs[:min(len(msgs), udpSendBatch)], 0)
			if err != nil && errors.Is(err, net.ErrClosed) {
				return
			}
			k = max(k, 1)
			s.res.Add(int64(k))
			msgs = msgs[k:]
		}
	}
}

func (s *udpSender) close() rundir.UDPSenderStats {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.conn.Close()
	s.wg.Wait()
	st := s.stats
	st.Sent = int64(s.next)
	st.NaksRecv, st.Resent, st.Unavailable = s.naks.Load(), s.res.Load(), s.unav.Load()
	return st
}

// udpSpec is a UDP series as one load generator sends it: the series' bursts from each of its
// Senders senders at once, to Target (the leader's client address, over UDP).
type udpSpec struct {
	rundir.BurstSeries
	Target string
	// Linger is how long the senders keep answering NAKs after the last burst and the last NAK
	// (default 1 s; at most maxLinger in all).
	Linger time.Duration
}

// udpSeries runs a UDP burst series; results go to stats in place as bursts complete.
type udpSeries struct {
	spec    udpSpec
	senders []*udpSender
	mu      sync.Mutex
	bursts  []rundir.BurstResult
	final   []rundir.UDPSenderStats
}

func newUDPSeries(spec udpSpec, instruments int, price int64, log *slog.Logger) (*udpSeries, error) {
	if spec.Size == 0 {
		spec.Size = loadspec.DefaultBurstSize
	}
	if spec.Senders == 0 {
		spec.Senders = 1
	}
	if spec.Linger == 0 {
		spec.Linger = time.Second
	}
	u := &udpSeries{spec: spec}
	for i := 0; i < spec.Senders; i++ {
		s, err := newUDPSender(spec.Target, spec.Size, instruments, price, log)
		if err != nil {
			u.close()
			return nil, err
		}
		u.senders = append(u.senders, s)
	}
	return u, nil
}

// run sends the series; burst k is due at start + k*Every (start on the wall clock).
func (u *udpSeries) run(ctx context.Context, start time.Time) error {
	for k := 0; k < u.spec.Count; k++ {
		num := u.spec.FirstBurst + uint32(k)
		for _, s := range u.senders {
			s.prepare(num, u.spec.Messages)
		}
		due := start.Add(time.Duration(k) * u.spec.Every)
		if err := ctxtime.Sleep(ctx, time.Until(due)); err != nil {
			return err
		}
		res := make([]udpBurstSent, len(u.senders))
		var wg sync.WaitGroup
		for i, s := range u.senders {
			wg.Add(1)
			go func() { defer wg.Done(); res[i] = s.burst(num, u.spec.Messages) }()
		}
		wg.Wait()
		r := rundir.BurstResult{Index: k, Burst: num, Due: due}
		var marks []sendMark
		for _, x := range res {
			r.Sent += x.sent
			marks = append(marks, x.marks...)
		}
		r.SendNs = spanNs(res) // first send of any sender to the last return of any
		// Marks of several senders interleave in time; peak.PerMs needs them in order.
		slices.SortFunc(marks, func(a, b sendMark) int { return cmp.Compare(a.At, b.At) })
		r.PeakPerMs = peak.PerMs(marks)
		u.mu.Lock()
		u.bursts = append(u.bursts, r)
		u.mu.Unlock()
	}
	// Keep answering NAKs until the receiver has been quiet for Linger (at most maxLinger).
	end := time.Now()
	for time.Since(end) < maxLinger {
		last := end.UnixNano()
		for _, s := range u.senders {
			last = max(last, s.lastNakAt.Load())
		}
		wait := time.Until(time.Unix(0, last).Add(u.spec.Linger))
		if wait <= 0 {
			return nil
		}
		if err := ctxtime.Sleep(ctx, min(wait, 100*time.Millisecond)); err != nil {
			return err
		}
	}
	return nil
}

func spanNs(res []udpBurstSent) int64 {
	var first, last int64
	for _, x := range res {
		if x.sent == 0 {
			continue
		}
		if first == 0 || x.startNs < first {
			first = x.startNs
		}
		last = max(last, x.endNs)
	}
	return last - first
}

func (u *udpSeries) close() []rundir.UDPSenderStats {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.final == nil {
		u.final = []rundir.UDPSenderStats{}
		for _, s := range u.senders {
			u.final = append(u.final, s.close())
		}
	}
	return u.final
}

// discoverLeader finds the leader's client address: a cancel of order 0 (which no order has) is
// refused by the leader's book and answered NotLeader, with the leader's address, by the others.
func discoverLeader(ctx context.Context, servers []string, opts ConnOptions, timeout time.Duration) (string, error) {
	opts = opts.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req := wire.AppendRequest(nil, &wire.Request{Type: wire.TypeCancel, Corr: discoverCorr, Cancel: 0})
	next, hint := 0, ""
	var last error
	for {
		addr := hint
		if addr == "" {
			addr = servers[next%len(servers)]
			next++
		}
		hint = ""
		r, err := askOnce(ctx, addr, req, opts.DialTimeout)
		switch {
		case err != nil:
			last = fmt.Errorf("%s: %w", addr, err)
		case r.Status == wire.StatusNotLeader:
			hint = r.Text
			last = fmt.Errorf("%s: not the leader", addr)
		case r.Status == wire.StatusOK || r.Status == wire.StatusRejected:
			return addr, nil
		default:
			last = fmt.Errorf("%s: %s", addr, r.Text)
		}
		if hint == "" {
			if err := ctxtime.Sleep(ctx, minBackoff*4); err != nil {
				return "", fmt.Errorf("%w within %s: %v", ErrNoLeader, timeout, last)
			}
		}
	}
}

func askOnce(ctx context.Context, addr string, req []byte, dialTimeout time.Duration) (*wire.Response, error) {
	d := net.Dialer{Timeout: dialTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := c.Write(req); err != nil {
		return nil, err
	}
	body, err := wire.ReadFrame(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err
	}
	var r wire.Response
	if err := wire.DecodeResponse(body, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
