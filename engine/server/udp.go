package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/rig-dev/rig/internal/peak"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/procfs"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/replica"
	"github.com/rig-dev/rig/engine/wire"
)

// UDP ingress: datagrams (engine/wire/datagram.go) are delivered per session in sequence order;
// a gap is NAKed after the configured delay. A NAK round asks for at most a window of missing
// datagrams (about what the granted receive buffer holds), so that the resends do not
// overflow the buffer again; the next round follows as soon as that window is filled, or after
// nakRetry if part of it was lost again. Delivered commands go through raft like TCP ones; UDP commands get no reply.
// The receive loop is one goroutine that owns all session state; it takes ing.mu once per
// batch so /status can read a consistent copy.

// DefaultNakDelay is the wait from detecting a gap to the first NAK: long enough for reordering
// on one path to settle, short against the 1 ms a burst takes to arrive.
const DefaultNakDelay = time.Millisecond

const (
	udpBatch      = 64                     // datagrams per recvmmsg
	burstQuiet    = 100 * time.Millisecond // a burst with nothing received for this long and no gap open is closed
	gapGiveUp     = 5 * time.Second        // an unrepaired gap is skipped (counted lost) after this
	keepBursts    = 512                    // closed bursts kept for /status?udp=1
	snmpIdleEvery = 200 * time.Millisecond // node-wide RcvbufErrors baseline refresh while idle
)

type udpIngress struct {
	node     *replica.Node
	log      *slog.Logger
	conn     *net.UDPConn
	pc       *ipv4.PacketConn
	nakDelay time.Duration
	nakRetry time.Duration

	nakWindow uint64 // most missing datagrams asked for in one NAK round

	mu       sync.Mutex // guards st, bursts, order (written by the loop, read by status)
	st       engine.UDP
	bursts   map[uint32]*burstRecv
	open     map[uint32]*burstRecv // bursts not closed yet
	order    []uint32              // burst numbers in the order they were first seen
	sessions map[uint32]*udpSession

	applied, applyErrs atomic.Uint64
	applyq             chan []udpCmd
	futs               chan applyFuture

	snmp     *procfs.FS
	snmpBase uint64
	snmpAt   time.Time
	ovfl     uint64 // SO_RXQ_OVFL counter as last seen
	nak      []byte
}

type applyFuture struct {
	f interface{ Error() error }
	n uint64 // commands in the entry
}

// udpCmd is one log entry: a batch of orders delivered together, or one cancel.
type udpCmd struct {
	data []byte
	n    uint64
}

// cmdBatch gathers what one pass of the receive loop delivered. Consecutive orders become one
// batch entry (wire.TypeBatch), so a burst costs raft a few thousand appends, not one per order;
// a cancel ends the batch and goes alone, so sequence order is kept.
type cmdBatch struct {
	orders []wire.Order
	out    []udpCmd
	req    wire.Request
}

func (c *cmdBatch) add(r *wire.Request) {
	if r.Type == wire.TypeOrder {
		c.orders = append(c.orders, r.Order)
		return
	}
	c.flush()
	c.out = append(c.out, udpCmd{wire.AppendRequest(nil, r)[4:], 1})
}

// flush ends the current batch of orders.
func (c *cmdBatch) flush() {
	if len(c.orders) == 0 {
		return
	}
	c.req = wire.Request{Type: wire.TypeBatch, Batch: c.orders}
	c.out = append(c.out, udpCmd{wire.AppendRequest(nil, &c.req)[4:], uint64(len(c.orders))})
	c.orders = c.orders[:0]
}

type udpSession struct {
	addr      netip.AddrPort
	next      uint64 // next sequence number to deliver
	high      uint64 // one past the highest seen (or announced by a heartbeat)
	lastBurst uint32
	pending   map[uint64]pendingDgram
	gaps      []udpGap
	lastNak   int64  // last NAK round
	nakedTo   uint64 // end of the last round's window: once delivery passes it, the next round is due
}

type pendingDgram struct {
	body  []byte
	sent  int64
	burst uint32
}

type udpGap struct {
	from, to uint64 // missing [from, to) when detected
	detected int64
	naked    bool // asked for at least once
	burst    uint32
}

type burstRecv struct {
	out          engine.UDPBurst
	sessions     map[uint32]bool
	first, last  int64
	marks        []sendMark // arrivals per receive time, for the peak per 1 ms
	hist         *hdrhistogram.Histogram
	openGaps     int
	waiting      int // datagrams held behind a gap: the burst is not done before they are delivered
	ovflAtOpen   uint64
	snmpAtOpen   uint64
	snmpAtOpenOK bool
}

type sendMark = peak.Mark

func newUDPIngress(node *replica.Node, log *slog.Logger) (*udpIngress, error) {
	cfg := node.Config()
	nakDelay, err := time.ParseDuration(cfg.UDPNakDelay) // validated by replica.New
	if err != nil {
		return nil, fmt.Errorf("udp_nak_delay %q: %w", cfg.UDPNakDelay, err)
	}
	addr, err := net.ResolveUDPAddr("udp", cfg.ClientAddr)
	if err != nil {
		return nil, fmt.Errorf("udp address %q: %w", cfg.ClientAddr, err)
	}
	conn, err := net.ListenUDP("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("udp listener on %s: %w", cfg.ClientAddr, err)
	}
	ing := &udpIngress{
		node: node, log: log, conn: conn, pc: ipv4.NewPacketConn(conn),
		nakDelay: nakDelay, nakRetry: max(4*nakDelay, 20*time.Millisecond),
		bursts: map[uint32]*burstRecv{}, open: map[uint32]*burstRecv{}, sessions: map[uint32]*udpSession{},
		applyq: make(chan []udpCmd, 1<<16), futs: make(chan applyFuture, 1<<16),
	}
	ing.st = engine.UDP{Addr: conn.LocalAddr().String(), RcvbufAsked: cfg.UDPRcvbuf, NakDelayMs: ms(nakDelay)}
	if err := ing.setSockopts(cfg.UDPRcvbuf); err != nil {
		conn.Close()
		return nil, err
	}
	// A small datagram takes about 1 KiB of buffer on Linux (its truesize), whatever its length;
	// the loop drains while resends arrive, so a window of the buffer's capacity rarely overflows.
	ing.nakWindow = uint64(max(ing.st.RcvbufGranted/1024, 64))
	if fs, err := procfs.NewDefaultFS(); err == nil {
		ing.snmp = &fs
	}
	ing.refreshSnmp(time.Now())
	return ing, nil
}

// setSockopts asks for the receive buffer (never SO_RCVBUFFORCE: the point is to see the
// kernel's clamp), reads back what was granted, and turns on SO_RXQ_OVFL so every datagram
// carries the socket's drop count.
func (ing *udpIngress) setSockopts(rcvbuf int) error {
	if b, err := os.ReadFile("/proc/sys/net/core/rmem_max"); err == nil {
		ing.st.RmemMax, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if rcvbuf > 0 {
		if err := ing.conn.SetReadBuffer(rcvbuf); err != nil {
			return fmt.Errorf("udp SO_RCVBUF %d: %w", rcvbuf, err)
		}
	}
	rc, err := ing.conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1); serr != nil {
			serr = fmt.Errorf("udp SO_RXQ_OVFL: %w", serr)
			return
		}
		ing.st.RcvbufGranted, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
	})
	return errors.Join(err, serr)
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// run serves until ctx is done.
func (ing *udpIngress) run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ing.applyLoop() }()
	go func() { defer wg.Done(); ing.waitLoop() }()
	stop := context.AfterFunc(ctx, func() { ing.conn.Close() })
	defer stop()
	err := ing.recvLoop()
	close(ing.applyq)
	wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// applyLoop hands delivered commands to raft without waiting for each, so raft batches them.
func (ing *udpIngress) applyLoop() {
	defer close(ing.futs)
	for batch := range ing.applyq {
		for _, cmd := range batch {
			ing.futs <- applyFuture{ing.node.ApplyAsync(cmd.data, applyTimeout), cmd.n}
		}
	}
}

func (ing *udpIngress) waitLoop() {
	for f := range ing.futs {
		if err := f.f.Error(); err != nil {
			ing.applyErrs.Add(f.n)
		} else {
			ing.applied.Add(f.n)
		}
	}
}

func (ing *udpIngress) recvLoop() error {
	// One OS thread drains the socket, so its priority can be raised like a dedicated receiver's.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ing.setNice(ing.node.Config().UDPRecvNice)
	msgs := make([]ipv4.Message, udpBatch)
	for i := range msgs {
		msgs[i].Buffers = [][]byte{make([]byte, 2048)}
		msgs[i].OOB = make([]byte, 64)
	}
	var d wire.Dgram
	for {
		ing.conn.SetReadDeadline(time.Now().Add(ing.wait()))
		n, err := ing.pc.ReadBatch(msgs, 0)
		now := time.Now()
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		ing.mu.Lock()
		cb := &cmdBatch{}
		for i := 0; i < n; i++ {
			m := &msgs[i]
			ing.readOvfl(m.OOB[:m.NN])
			if err := wire.DecodeDgram(m.Buffers[0][:m.N], &d); err != nil {
				ing.st.Malformed++
				continue
			}
			ua, _ := m.Addr.(*net.UDPAddr)
			if ua == nil {
				continue
			}
			ing.handle(&d, ua.AddrPort(), now.UnixNano(), cb)
		}
		ing.housekeep(now, cb)
		ing.mu.Unlock()
		if cb.flush(); len(cb.out) > 0 {
			ing.applyq <- cb.out
		}
	}
}

// setNice sets the receive thread's nice value (0: leave it) and records the outcome.
func (ing *udpIngress) setNice(nice int) {
	tid := unix.Gettid()
	if nice != 0 {
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, nice); err != nil {
			ing.mu.Lock()
			ing.st.RecvNiceError = fmt.Sprintf("setpriority %d: %v", nice, err)
			ing.mu.Unlock()
			ing.log.Warn("udp receive thread priority", "nice", nice, "err", err)
		}
	}
	// getpriority returns 20 - nice for PRIO_PROCESS on Linux.
	if p, err := unix.Getpriority(unix.PRIO_PROCESS, tid); err == nil {
		ing.mu.Lock()
		ing.st.RecvNice = 20 - p
		ing.mu.Unlock()
	}
}

// wait is how long the loop may block: until the next NAK round is due, or a burst may close.
func (ing *udpIngress) wait() time.Duration {
	ing.mu.Lock()
	defer ing.mu.Unlock()
	w := snmpIdleEvery
	now := time.Now().UnixNano()
	for _, s := range ing.sessions {
		if due, ok := ing.nakDue(s, now); ok {
			w = min(w, time.Duration(max(due-now, int64(20*time.Microsecond))))
		}
	}
	if len(ing.open) > 0 {
		w = min(w, 10*time.Millisecond)
	}
	return w
}

// nakDue is when the session's next NAK round is due, if it has a gap.
func (ing *udpIngress) nakDue(s *udpSession, now int64) (int64, bool) {
	if len(s.gaps) == 0 {
		return 0, false
	}
	due := int64(math.MaxInt64)
	for _, g := range s.gaps {
		if !g.naked {
			due = min(due, g.detected+int64(ing.nakDelay))
		}
	}
	if s.lastNak > 0 && s.gaps[0].naked {
		if s.next >= s.nakedTo {
			return now, true // the last window is filled: ask for the next one
		}
		due = min(due, s.lastNak+int64(ing.nakRetry))
	}
	return due, due != math.MaxInt64
}

// nakRound asks for up to a window of missing datagrams, as ranges, from the oldest gap on,
// in gaps old enough to NAK.
func (ing *udpIngress) nakRound(id uint32, s *udpSession, now int64) {
	budget := ing.nakWindow
	end := s.next
	for i := range s.gaps {
		g := &s.gaps[i]
		if budget == 0 || now < g.detected+int64(ing.nakDelay) {
			break
		}
		g.naked = true
		seq := max(g.from, s.next)
		for seq < g.to && budget > 0 {
			if _, ok := s.pending[seq]; ok {
				seq++
				continue
			}
			from := seq
			for seq < g.to && budget > 0 {
				if _, ok := s.pending[seq]; ok {
					break
				}
				seq++
				budget--
			}
			ing.nak = wire.AppendNak(ing.nak[:0], id, from, uint32(seq-from))
			if _, err := ing.conn.WriteToUDPAddrPort(ing.nak, s.addr); err != nil {
				ing.log.Warn("udp nak", "to", s.addr, "err", err)
			}
			ing.st.Naks++
			if b := ing.bursts[g.burst]; b != nil {
				b.out.Naks++
			}
		}
		end = max(end, seq)
	}
	s.lastNak, s.nakedTo = now, end
}

// readOvfl takes the socket's drop counter from a datagram's control message (the kernel adds
// it only once the count is above zero).
func (ing *udpIngress) readOvfl(oob []byte) {
	if len(oob) == 0 {
		return
	}
	cms, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	for _, cm := range cms {
		if cm.Header.Level == unix.SOL_SOCKET && cm.Header.Type == unix.SO_RXQ_OVFL && len(cm.Data) >= 4 {
			ing.ovfl = max(ing.ovfl, uint64(binary.NativeEndian.Uint32(cm.Data)))
			ing.st.SocketDrops = ing.ovfl
		}
	}
}

func (ing *udpIngress) session(id uint32, addr netip.AddrPort) *udpSession {
	s := ing.sessions[id]
	if s == nil {
		s = &udpSession{pending: map[uint64]pendingDgram{}}
		ing.sessions[id] = s
	}
	s.addr = addr // NAKs go where the latest datagram came from
	return s
}

func (ing *udpIngress) burst(n uint32, now int64) *burstRecv {
	b := ing.bursts[n]
	if b == nil || b.out.Closed && now-b.last > int64(burstQuiet) {
		if b != nil { // the sender reused a number: start over
			ing.dropBurst(n)
		}
		b = &burstRecv{out: engine.UDPBurst{Burst: n}, sessions: map[uint32]bool{}, first: now,
			hist: hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3), ovflAtOpen: ing.ovfl,
			snmpAtOpen: ing.snmpBase, snmpAtOpenOK: !ing.snmpAt.IsZero()}
		ing.bursts[n] = b
		ing.open[n] = b
		ing.order = append(ing.order, n)
		if len(ing.order) > keepBursts {
			ing.dropBurst(ing.order[0])
		}
	}
	return b
}

func (ing *udpIngress) dropBurst(n uint32) {
	delete(ing.bursts, n)
	delete(ing.open, n)
	for i, m := range ing.order {
		if m == n {
			ing.order = append(ing.order[:i], ing.order[i+1:]...)
			break
		}
	}
}

func (b *burstRecv) arrived(now int64) {
	b.out.Received++
	b.last = now
	if k := len(b.marks) - 1; k >= 0 && b.marks[k].At == now {
		b.marks[k].N++
		return
	}
	b.marks = append(b.marks, sendMark{At: now, N: 1})
}

func (ing *udpIngress) handle(d *wire.Dgram, from netip.AddrPort, now int64, cb *cmdBatch) {
	s := ing.session(d.Session, from)
	switch d.Kind {
	case wire.DgramHeartbeat:
		if d.Seq > s.high {
			ing.newGap(s, s.high, d.Seq, s.lastBurst, now)
			s.high = d.Seq
		}
		return
	case wire.DgramNak:
		return // NAKs go the other way
	}
	ing.st.Received++
	if _, waiting := s.pending[d.Seq]; d.Seq < s.next || waiting {
		ing.st.Duplicates++
		return
	}
	b := ing.burst(d.Burst, now)
	b.sessions[d.Session] = true
	b.arrived(now)
	s.lastBurst = d.Burst
	if d.Seq > s.high {
		ing.newGap(s, s.high, d.Seq, d.Burst, now)
	}
	s.high = max(s.high, d.Seq+1)
	if d.Seq != s.next {
		s.pending[d.Seq] = pendingDgram{body: append([]byte(nil), d.Body...), sent: d.SentNs, burst: d.Burst}
		b.waiting++
		return
	}
	ing.deliver(d.Body, d.SentNs, b, now, cb)
	s.next++
	for ing.deliverPending(s, now, cb) {
		s.next++
	}
	ing.closeGaps(s, now)
}

// deliverPending delivers the datagram waiting at s.next, if there is one.
func (ing *udpIngress) deliverPending(s *udpSession, now int64, cb *cmdBatch) bool {
	p, ok := s.pending[s.next]
	if !ok {
		return false
	}
	delete(s.pending, s.next)
	b := ing.bursts[p.burst]
	if b != nil {
		b.waiting--
	}
	ing.deliver(p.body, p.sent, b, now, cb)
	return true
}

func (ing *udpIngress) newGap(s *udpSession, from, to uint64, burst uint32, now int64) {
	s.gaps = append(s.gaps, udpGap{from: from, to: to, detected: now, burst: burst})
	ing.st.Gaps++
	if b := ing.bursts[burst]; b != nil {
		b.out.Gaps++
		b.openGaps++
	}
}

// closeGaps retires the gaps delivery has moved past: repaired, with the time since detection.
func (ing *udpIngress) closeGaps(s *udpSession, now int64) {
	keep := s.gaps[:0]
	for _, g := range s.gaps {
		if g.to > s.next {
			keep = append(keep, g)
			continue
		}
		rep := ms(time.Duration(now - g.detected))
		ing.st.Repaired++
		ing.st.RepairMaxMs = max(ing.st.RepairMaxMs, rep)
		if b := ing.bursts[g.burst]; b != nil {
			b.out.Repaired++
			b.out.RepairMaxMs = max(b.out.RepairMaxMs, rep)
			b.openGaps--
		}
	}
	s.gaps = keep
}

func (ing *udpIngress) deliver(body []byte, sent int64, b *burstRecv, now int64, cb *cmdBatch) {
	ing.st.Delivered++
	if b != nil && b.hist != nil {
		b.hist.RecordValue(max((now-sent)/1e3, 0))
	}
	var req wire.Request
	if err := wire.DecodeRequest(body, &req); err != nil || (req.Type != wire.TypeOrder && req.Type != wire.TypeCancel) {
		ing.st.Malformed++
		return
	}
	if !ing.node.IsLeader() {
		ing.st.NotLeader++
		return
	}
	cb.add(&req)
}

// housekeep sends the NAK rounds that are due, gives up on gaps too old to repair, closes
// quiet bursts and refreshes the node-wide RcvbufErrors baseline while nothing is arriving.
func (ing *udpIngress) housekeep(t time.Time, cb *cmdBatch) {
	now := t.UnixNano()
	for id, s := range ing.sessions {
		if len(s.gaps) > 0 && now-s.gaps[0].detected >= int64(gapGiveUp) {
			ing.skipGap(s, now, cb)
		}
		if due, ok := ing.nakDue(s, now); ok && now >= due {
			ing.nakRound(id, s, now)
		}
	}
	for n, b := range ing.open {
		if b.openGaps > 0 || b.waiting > 0 || now-b.last < int64(burstQuiet) {
			continue
		}
		delete(ing.open, n)
		ing.closeBurst(b, t)
	}
	if len(ing.open) == 0 && t.Sub(ing.snmpAt) >= snmpIdleEvery {
		ing.refreshSnmp(t)
	}
}

// skipGap gives up on the oldest gap (gaps are in detection order, so it is the first): the
// sender no longer has those datagrams. Delivery moves past it; what never came is lost.
func (ing *udpIngress) skipGap(s *udpSession, now int64, cb *cmdBatch) {
	g := s.gaps[0]
	s.gaps = s.gaps[1:]
	for ; s.next < g.to; s.next++ {
		if ing.deliverPending(s, now, cb) {
			continue
		}
		ing.st.Lost++
		if b := ing.bursts[g.burst]; b != nil {
			b.out.Lost++
		}
	}
	if b := ing.bursts[g.burst]; b != nil {
		b.openGaps--
	}
	for { // what waited behind the gap
		p, ok := s.pending[s.next]
		if !ok {
			break
		}
		delete(s.pending, s.next)
		ing.deliver(p.body, p.sent, ing.bursts[p.burst], now, cb)
		s.next++
	}
}

func (ing *udpIngress) closeBurst(b *burstRecv, t time.Time) {
	b.out.Closed = true
	ing.fill(b)
	b.marks, b.hist = nil, nil
	b.out.SocketDrops = ing.ovfl - b.ovflAtOpen
	if prev, ok := b.snmpAtOpen, b.snmpAtOpenOK; ok && ing.refreshSnmp(t) {
		b.out.RcvbufErrors = ing.snmpBase - prev
	}
}

// fill computes a burst's figures from its marks and histogram (kept until it closes).
func (ing *udpIngress) fill(b *burstRecv) {
	if b.hist == nil {
		return
	}
	b.out.Sessions = len(b.sessions)
	b.out.First, b.out.Last = time.Unix(0, b.first), time.Unix(0, b.last)
	b.out.AbsorbMs = ms(time.Duration(b.last - b.first))
	b.out.PeakPerMs = peak.PerMs(b.marks)
	if b.hist.TotalCount() > 0 {
		b.out.LatencyP50Us = float64(b.hist.ValueAtQuantile(50))
		b.out.LatencyP99Us = float64(b.hist.ValueAtQuantile(99))
		b.out.LatencyMaxUs = float64(b.hist.Max())
	}
	b.out.SocketDrops = ing.ovfl - b.ovflAtOpen
}

func (ing *udpIngress) refreshSnmp(t time.Time) bool {
	if ing.snmp == nil {
		return false
	}
	p, err := ing.snmp.Self()
	if err != nil {
		return false
	}
	sn, err := p.Snmp()
	if err != nil || sn.Udp.RcvbufErrors == nil {
		return false
	}
	ing.snmpBase, ing.snmpAt = uint64(*sn.Udp.RcvbufErrors), t
	return true
}

// status is the ingress's part of /status; withBursts adds every burst kept.
func (ing *udpIngress) status(withBursts bool) *engine.UDP {
	ing.mu.Lock()
	defer ing.mu.Unlock()
	st := ing.st
	st.Applied, st.ApplyErrors = ing.applied.Load(), ing.applyErrs.Load()
	for _, s := range ing.sessions {
		st.OpenGaps += len(s.gaps)
	}
	if withBursts {
		for _, n := range ing.order {
			b := ing.bursts[n]
			ing.fill(b)
			st.Bursts = append(st.Bursts, b.out)
		}
	}
	return &st
}
