package loadgen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rig-dev/rig/engine/wire"
	"github.com/rig-dev/rig/rundir"
)

// ConnOptions tune how the load generator talks to the cluster. Zero values take the defaults.
type ConnOptions struct {
	DialTimeout time.Duration // one connection attempt (default 2 s)
	KeepAlive   time.Duration // a ping goes out after this long without traffic (default 1 s)
	// DeadAfter: a ping unanswered, or a write blocked, this long drops the connection and
	// resends what was in flight (default 15 s). It catches a hung leader that keeps its sockets
	// open. If the engine answers pings in order behind commands, keep it above the longest
	// stall expected (a snapshot take), or a stall costs a reconnect.
	DeadAfter time.Duration
	// LeaderTimeout: commands outstanding on a connection that has heard nothing (no answer, no
	// ping reply) for this long: the client leaves it, resends what was in flight, and asks the
	// other servers for the leader, as a cluster client does on a leader or request timeout
	// (default 2 s). The runner sets the engine's heartbeat timeout in effect: the silence after
	// which a follower stands for election, so the client is among the followers when the new
	// leader is known. A busy connection is pinged after a quarter of it, so a leader that answers
	// pings while its log is slow is kept; one that reads them behind a stalled log is left, and
	// taken back when its followers still name it.
	LeaderTimeout time.Duration
	// MaxBackoff caps the wait between dials of one server that keeps failing (refused, or
	// reached but not the leader): the wait doubles from 5 ms per failure up to it, so a dead
	// server costs at most about 1/MaxBackoff dials a second, and a server that becomes leader
	// is found within about MaxBackoff (default 100 ms).
	MaxBackoff time.Duration
}

const (
	defaultDialTimeout = 2 * time.Second
	defaultKeepAlive   = time.Second
	defaultDeadAfter   = 15 * time.Second
	// DefaultLeaderTimeout is ConnOptions.LeaderTimeout when neither the caller nor the engine
	// gives one: twice hashicorp/raft's default heartbeat timeout, the most its followers wait.
	DefaultLeaderTimeout = 2 * time.Second

	// Backoff between dials of one server while it does not lead (endpoint): from minBackoff,
	// doubling per failure, up to ConnOptions.MaxBackoff. The cap is the client's polling
	// granularity during an election and lands in the failover gaps we measure, so it stays
	// low; but a fixed short poll made a long election cost hundreds of reconnects and failed
	// dials to the dead leader the followers still named (docs/constants.md, "Client
	// backoff"). A redirect
	// to a server not backing off is followed at once, so a step-down costs no wait.
	minBackoff        = 5 * time.Millisecond
	defaultMaxBackoff = 100 * time.Millisecond
	// errorBackoff delays the resend of a command the leader answered with StatusError, so a
	// leader that fails everything cannot turn the client into a hot loop.
	errorBackoff = 5 * time.Millisecond

	pingCorrBit = 1 << 63 // pings use their own correlation ids; they are never in flight
)

func (o ConnOptions) withDefaults() ConnOptions {
	if o.DialTimeout <= 0 {
		o.DialTimeout = defaultDialTimeout
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = defaultKeepAlive
	}
	if o.DeadAfter <= 0 {
		o.DeadAfter = defaultDeadAfter
	}
	if o.LeaderTimeout <= 0 {
		o.LeaderTimeout = DefaultLeaderTimeout
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = defaultMaxBackoff
	}
	return o
}

// ErrNoLeader reports that no server answered a command as leader in time.
var ErrNoLeader = errors.New("no leader")

var errClosed = errors.New("client closed")

// handler is the owner of a client's commands: it encodes a command by correlation id (on its
// first send and on every resend) and takes the final answers (OK or Rejected).
type handler interface {
	encode(dst []byte, corr uint64) []byte
	answer(corr uint64, r *wire.Response, at int64)
}

type retryItem struct {
	corr      uint64
	notBefore int64
}

// client keeps one connection to the leader of a cluster and makes sure every command sent
// through it is eventually answered with OK or Rejected: commands answered NotLeader or Error,
// or left in flight on a connection that died, come back through takeRetries for the owner to
// send again. Times are nanoseconds since epoch on the monotonic clock.
type client struct {
	servers   []string
	opts      ConnOptions
	h         handler
	log       *slog.Logger
	epoch     time.Time
	epochUnix int64
	clock     func() int64 // tests' injected clock (ns since epoch); nil: the monotonic clock

	mu     sync.Mutex
	cur    *conn // where new commands go; nil when none is usable
	conns  map[*conn]struct{}
	hint   string               // leader address learned from a NotLeader answer or a lost leader connection
	next   int                  // next server to try when there is no hint
	eps    map[string]*endpoint // dial backoff per server
	avoid  map[string]int64     // servers left on a leader timeout: not tried again before this time
	want   bool                 // a sender waits for a connection: the connector dials
	retry  []retryItem
	leader *conn // last connection that answered OK first among its peers
	lastOK int64 // last OK from leader
	stats  rundir.ConnStats
	closed bool

	retryCh chan struct{} // signalled (non-blocking) when retry grows
	wantCh  chan struct{} // signalled (non-blocking) when want is set
	ctx     context.Context
	cancel  context.CancelFunc
	stateCh chan struct{} // closed and replaced when a connection is confirmed, demoted or dies
	done    chan struct{}
	wg      sync.WaitGroup
	pingSeq atomic.Uint64
}

func newClient(servers []string, opts ConnOptions, h handler, log *slog.Logger, epoch time.Time) *client {
	cl := &client{
		servers:   servers,
		opts:      opts.withDefaults(),
		h:         h,
		log:       log,
		epoch:     epoch,
		epochUnix: epoch.UnixNano(),
		conns:     make(map[*conn]struct{}),
		eps:       make(map[string]*endpoint),
		avoid:     make(map[string]int64),
		retryCh:   make(chan struct{}, 1),
		wantCh:    make(chan struct{}, 1),
		stateCh:   make(chan struct{}),
		done:      make(chan struct{}),
	}
	cl.ctx, cl.cancel = context.WithCancel(context.Background())
	cl.stats.LeaderTimeoutNs = int64(cl.opts.LeaderTimeout)
	cl.wg.Add(2)
	go cl.keepalive()
	go cl.connector()
	return cl
}

func (cl *client) now() int64 {
	if cl.clock != nil {
		return cl.clock()
	}
	return int64(time.Since(cl.epoch))
}

func (cl *client) unix(at int64) time.Time { return time.Unix(0, cl.epochUnix+at) }

type conn struct {
	cl   *client
	addr string
	nc   net.Conn

	wmu  sync.Mutex
	wbuf []byte
	wdl  time.Time // write deadline currently set

	// guarded by cl.mu
	inflight  map[uint64]struct{}
	demoted   bool // answered NotLeader: no new commands go here; closed once drained
	confirmed bool // answered OK at least once
	dead      bool
	suspect   bool // killed by a ping or leader timeout: do not redial it first

	lastSend  atomic.Int64
	lastRecv  atomic.Int64
	busySince atomic.Int64 // when the last command went out on it with none in flight
	pingSent  atomic.Int64 // when the outstanding ping went out; 0 when none

	once   sync.Once
	reason atomic.Value // error that killed it
}

// kill closes the connection; its reader then hands what was in flight back for resending.
func (c *conn) kill(reason error) {
	c.once.Do(func() {
		if reason != nil {
			c.reason.Store(reason)
		}
		c.nc.Close()
	})
}

// send writes the commands to the current leader connection, waiting for the connector to
// find one if needed, and returns when they were handed to the kernel. A connection that fails
// under the write is not an error here: its commands come back through takeRetries. The error
// is ctx's or errClosed.
//
// A connection no command has succeeded on yet is on probation: it gets one command at a time
// until one is answered by a leader. While no leader is known (an election) that keeps the
// client from bouncing its whole backlog off every follower it tries.
func (cl *client) send(ctx context.Context, corrs []uint64) (int64, error) {
	at := cl.now()
	for len(corrs) > 0 {
		c, err := cl.ready(ctx)
		if err != nil {
			return cl.now(), err
		}
		n, t := cl.sendOn(c, corrs)
		if n == 0 {
			continue
		}
		at = t
		corrs = corrs[n:]
	}
	return at, nil
}

// trySend is send without waiting: it writes what the current connection takes now (all of
// corrs to a confirmed leader, one command to a connection on probation, none while there is
// no connection, which sets the connector dialling) and returns how many went and when. An
// open-loop sender uses it so an outage never stops its schedule.
func (cl *client) trySend(corrs []uint64) (int, int64) {
	if len(corrs) == 0 {
		return 0, cl.now()
	}
	cl.mu.Lock()
	c := cl.cur
	if c == nil || c.demoted || c.dead {
		cl.wantLocked()
		cl.mu.Unlock()
		return 0, cl.now()
	}
	cl.mu.Unlock()
	return cl.sendOn(c, corrs)
}

// sendOn writes as many of corrs as c takes now (see send) and returns how many and when.
func (cl *client) sendOn(c *conn, corrs []uint64) (int, int64) {
	cl.mu.Lock()
	if c.demoted || c.dead || (!c.confirmed && len(c.inflight) > 0) {
		cl.mu.Unlock()
		return 0, cl.now()
	}
	n := len(corrs)
	if !c.confirmed {
		n = 1
	}
	// In flight before the write: an answer can beat the return of Write.
	if len(c.inflight) == 0 {
		c.busySince.Store(cl.now())
	}
	for _, k := range corrs[:n] {
		c.inflight[k] = struct{}{}
	}
	cl.mu.Unlock()
	return n, c.write(corrs[:n])
}

// stateChan is closed at the next change of a connection's state (see changedLocked).
func (cl *client) stateChan() <-chan struct{} {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.stateCh
}

// changedLocked wakes everything waiting for a connection to change state.
func (cl *client) changedLocked() {
	close(cl.stateCh)
	cl.stateCh = make(chan struct{})
}

func (c *conn) write(corrs []uint64) int64 {
	c.wmu.Lock()
	b := c.wbuf[:0]
	for _, k := range corrs {
		b = c.cl.h.encode(b, k)
	}
	c.wbuf = b
	err := c.writeLocked(b)
	c.wmu.Unlock()
	at := c.cl.now()
	c.lastSend.Store(at)
	if err != nil {
		c.kill(fmt.Errorf("write to %s: %w", c.addr, err))
	}
	return at
}

// writeLocked writes b with a deadline: a server that stops reading for DeadAfter loses the
// connection. The deadline is moved only when it has come within DeadAfter-slack, which keeps a
// timer update off the per-write path.
func (c *conn) writeLocked(b []byte) error {
	now := time.Now()
	slack := min(time.Second, c.cl.opts.DeadAfter/2)
	if c.wdl.Sub(now) < c.cl.opts.DeadAfter-slack {
		c.wdl = now.Add(c.cl.opts.DeadAfter)
		c.nc.SetWriteDeadline(c.wdl)
	}
	_, err := c.nc.Write(b)
	return err
}

// ready returns a connection new commands may go to, waiting for the connector until it has
// one or ctx ends.
func (cl *client) ready(ctx context.Context) (*conn, error) {
	for {
		cl.mu.Lock()
		if cl.closed {
			cl.mu.Unlock()
			return nil, errClosed
		}
		ch := cl.stateCh
		if c := cl.cur; c != nil && !c.demoted && !c.dead {
			if c.confirmed || len(c.inflight) == 0 {
				cl.mu.Unlock()
				return c, nil
			}
			// On probation with its one command out: wait for the verdict.
		} else {
			cl.wantLocked()
		}
		cl.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-cl.done:
			return nil, errClosed
		}
	}
}

// wantLocked asks the connector for a connection.
func (cl *client) wantLocked() {
	if cl.want {
		return
	}
	cl.want = true
	select {
	case cl.wantCh <- struct{}{}:
	default:
	}
}

// connector is the client's only dialler, so there is never more than one dial in flight: when
// a sender wants a connection and there is none, it dials the servers in turn, each no sooner
// than its backoff allows (nextTargetLocked), until one connects.
func (cl *client) connector() {
	defer cl.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-cl.wantCh:
		case <-cl.done:
			return
		}
		for {
			cl.mu.Lock()
			if cl.closed {
				cl.mu.Unlock()
				return
			}
			if c := cl.cur; c != nil && !c.demoted && !c.dead {
				cl.want = false
				cl.mu.Unlock()
				break
			}
			addr, wait := cl.nextTargetLocked(cl.now())
			cl.mu.Unlock()
			if wait > 0 {
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-cl.done:
					return
				}
			}
			cl.connect(addr)
		}
	}
}

// connect makes one dial of addr and installs the connection as the current one.
func (cl *client) connect(addr string) {
	c, err := cl.dial(cl.ctx, addr)
	cl.mu.Lock()
	now := cl.now()
	cl.tickLocked(now, func(t *rundir.ConnSecond) { t.Dials++ })
	if err != nil {
		if cl.closed {
			cl.mu.Unlock()
			return
		}
		cl.failedLocked(addr, now)
		cl.stats.DialFailures++
		cl.tickLocked(now, func(t *rundir.ConnSecond) { t.DialFailures++ })
		n := cl.stats.DialFailures
		cl.mu.Unlock()
		if n&(n-1) == 0 { // 1, 2, 4, 8...: enough to see it, not a line per attempt
			cl.log.Warn("cannot connect", "server", addr, "failures", n, "err", err)
		}
		return
	}
	if cl.closed {
		cl.mu.Unlock()
		c.nc.Close()
		return
	}
	cl.cur = c
	cl.conns[c] = struct{}{}
	cl.stats.Connects++
	if cl.leader != nil { // following redirects to the first leader is not a reconnect
		cl.stats.Reconnects++
		cl.tickLocked(now, func(t *rundir.ConnSecond) { t.Reconnects++ })
	}
	cl.wg.Add(1)
	cl.changedLocked()
	cl.mu.Unlock()
	go c.read()
	cl.log.Debug("connected", "server", addr)
}

// endpoint is one server's dial backoff: after fails attempts in a row that did not reach a
// leader, it is not dialled again before next.
type endpoint struct {
	fails int
	next  int64
}

// backoff is the wait after fails failures in a row: minBackoff doubling, capped at max.
func backoff(fails int, max time.Duration) time.Duration {
	if fails <= 0 {
		return 0
	}
	return min(minBackoff<<min(fails-1, 20), max)
}

func (cl *client) endpointLocked(addr string) *endpoint {
	e := cl.eps[addr]
	if e == nil {
		e = &endpoint{}
		cl.eps[addr] = e
	}
	return e
}

// failedLocked records an attempt on addr that did not reach a leader: the dial failed, the
// server answered NotLeader before any OK, or the connection died on probation.
func (cl *client) failedLocked(addr string, now int64) {
	e := cl.endpointLocked(addr)
	e.fails++
	e.next = now + int64(backoff(e.fails, cl.opts.MaxBackoff))
}

// nextTargetLocked picks the next server to dial and how long to wait first: a server is not
// dialled before its backoff ends. A hint (a leader address from a redirect or a lost leader
// connection) comes first, so a redirect to a server that is not backing off costs no delay;
// but a hint still backing off (the dead leader the followers go on naming until they time it
// out) does not hold up the next server in turn if that one is due sooner, so the servers that
// may win the election are polled at the backoff's pace. Without a hint, a server left on a
// leader timeout is not tried for a leader timeout (unless every server is); a redirect to it is
// still followed, since the cluster knows better: a leader that was only slow (its pings queued
// behind a stalled log) is still the one its followers name.
func (cl *client) nextTargetLocked(now int64) (string, time.Duration) {
	n := len(cl.servers)
	k0 := 0 // when every server is avoided
	for k := range n {
		if now >= cl.avoid[cl.servers[(cl.next+k)%n]] {
			k0 = k
			break
		}
	}
	rr := cl.servers[(cl.next+k0)%n]
	if h := cl.hint; h != "" {
		cl.hint = ""
		if w := cl.waitLocked(h, now); w <= cl.waitLocked(rr, now) {
			return h, w
		}
	}
	cl.next += k0 + 1
	return rr, cl.waitLocked(rr, now)
}

func (cl *client) waitLocked(addr string, now int64) time.Duration {
	if e := cl.eps[addr]; e != nil && e.next > now {
		return time.Duration(e.next - now)
	}
	return 0
}

// addHold records a span the sender held its messages (rundir.ConnStats.Holds).
func (cl *client) addHold(h rundir.Hold) {
	cl.mu.Lock()
	cl.stats.Holds = append(cl.stats.Holds, h)
	cl.mu.Unlock()
}

// tickLocked counts an event in the second of the timeline it happened in (kept in order: a
// late message is counted in the second it was due, which may precede the newest).
func (cl *client) tickLocked(now int64, f func(*rundir.ConnSecond)) {
	sec := time.Unix(0, cl.epochUnix+now).Truncate(time.Second)
	tl := cl.stats.Timeline
	i := len(tl)
	for i > 0 && tl[i-1].At.After(sec) {
		i--
	}
	if i == 0 || !tl[i-1].At.Equal(sec) {
		tl = slices.Insert(tl, i, rundir.ConnSecond{At: sec})
		cl.stats.Timeline = tl
		i++
	}
	f(&tl[i-1])
}

// lateConnected counts messages sent late outside every hold, each in the second it was due.
func (cl *client) lateConnected(dues []int64) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for _, d := range dues {
		cl.tickLocked(d, func(t *rundir.ConnSecond) { t.LateConnected++ })
	}
}

func (cl *client) dial(ctx context.Context, addr string) (*conn, error) {
	d := net.Dialer{
		Timeout: cl.opts.DialTimeout,
		// The OS notices a peer host that vanished (no FIN, no RST) within ~10 s.
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: time.Second, Count: 5},
	}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	now := cl.now()
	c := &conn{cl: cl, addr: addr, nc: nc, inflight: make(map[uint64]struct{})}
	c.lastSend.Store(now)
	c.lastRecv.Store(now)
	return c, nil
}

func (c *conn) read() {
	cl := c.cl
	defer cl.wg.Done()
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var (
		buf []byte
		r   wire.Response
		err error
	)
	for {
		buf, err = wire.ReadFrame(br, buf)
		if err != nil {
			break
		}
		at := cl.now()
		c.lastRecv.Store(at)
		if err = wire.DecodeResponse(buf, &r); err != nil {
			err = fmt.Errorf("answer from %s: %w", c.addr, err)
			break
		}
		if r.Type == wire.TypePing {
			c.pingSent.Store(0)
			continue
		}
		cl.onResponse(c, &r, at)
	}
	cl.connDead(c, err)
}

// onResponse routes one answer: OK and Rejected are final and go to the owner; NotLeader and
// Error send the command around again.
func (cl *client) onResponse(c *conn, r *wire.Response, at int64) {
	cl.mu.Lock()
	if _, ok := c.inflight[r.Corr]; !ok {
		cl.stats.Unknown++
		cl.mu.Unlock()
		return
	}
	delete(c.inflight, r.Corr)
	deliver := false
	switch r.Status {
	case wire.StatusOK, wire.StatusRejected: // either way a leader applied it
		deliver = true
		cl.confirmLocked(c, at)
	case wire.StatusNotLeader:
		cl.stats.Redirects++
		cl.demoteLocked(c, r.Text)
		cl.retryLocked(r.Corr, 0)
	default: // StatusError, or a status this client does not know: may or may not be applied
		cl.stats.Errors++
		if n := cl.stats.Errors; n&(n-1) == 0 {
			cl.log.Warn("leader failed a command; resending", "server", c.addr, "errors", n, "reason", r.Text)
		}
		cl.retryLocked(r.Corr, at+int64(errorBackoff))
	}
	drained := c.demoted && len(c.inflight) == 0
	if !c.confirmed {
		cl.changedLocked() // a connection on probation may take its next command
	}
	cl.mu.Unlock()
	if deliver {
		cl.h.answer(r.Corr, r, at)
	}
	if drained {
		c.kill(nil)
	}
}

func (cl *client) confirmLocked(c *conn, at int64) {
	if !c.confirmed {
		c.confirmed = true
		clear(cl.eps) // a leader is known: whatever redirects next is followed at once
		prev := cl.leader
		switch {
		case prev == nil:
			cl.log.Info("leader found", "leader", c.addr)
		case prev.addr != c.addr:
			lc := rundir.LeaderChange{At: cl.unix(at), From: prev.addr, To: c.addr, GapNs: at - cl.lastOK}
			cl.stats.LeaderChanges = append(cl.stats.LeaderChanges, lc)
			cl.log.Info("leader changed", "from", lc.From, "to", lc.To, "gap", time.Duration(lc.GapNs))
		}
		cl.leader = c
		cl.stats.Leader = c.addr
		cl.changedLocked()
	}
	if c == cl.leader {
		cl.lastOK = at
	}
}

func (cl *client) demoteLocked(c *conn, leader string) {
	if !c.demoted {
		c.demoted = true
		cl.changedLocked()
		if !c.confirmed {
			cl.failedLocked(c.addr, cl.now())
		}
		cl.log.Debug("not the leader", "server", c.addr, "leader", leader)
	}
	if leader != "" && leader != c.addr {
		cl.hint = leader
	}
	if cl.cur == c {
		cl.cur = nil
	}
}

func (cl *client) retryLocked(corr uint64, notBefore int64) {
	cl.retry = append(cl.retry, retryItem{corr, notBefore})
	select {
	case cl.retryCh <- struct{}{}:
	default:
	}
}

// connDead runs when a connection's reader ends: whatever was in flight on it is resent.
func (cl *client) connDead(c *conn, readErr error) {
	c.kill(nil)
	cl.mu.Lock()
	c.dead = true
	cl.changedLocked()
	delete(cl.conns, c)
	if cl.cur == c {
		cl.cur = nil
		// The leader's connection broke but the leader may be fine: try it again first.
		if c.confirmed && !c.suspect && cl.hint == "" {
			cl.hint = c.addr
		}
	}
	n := len(c.inflight)
	for k := range c.inflight {
		cl.retry = append(cl.retry, retryItem{corr: k})
	}
	clear(c.inflight)
	closed := cl.closed
	if !closed && !c.demoted {
		cl.stats.ConnLosses++
		if !c.confirmed {
			cl.failedLocked(c.addr, cl.now())
		}
	}
	cl.mu.Unlock()
	if n > 0 {
		select {
		case cl.retryCh <- struct{}{}:
		default:
		}
	}
	if !closed && !c.demoted {
		reason := readErr
		if r, ok := c.reason.Load().(error); ok {
			reason = r
		}
		cl.log.Warn("connection lost", "server", c.addr, "in_flight", n, "err", reason)
	}
}

// steady reports whether new commands may be pipelined without overtaking earlier ones: the
// current connection is to a confirmed leader and nothing waits to be resent.
func (cl *client) steady() bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	c := cl.cur
	return len(cl.retry) == 0 && c != nil && c.confirmed && !c.demoted && !c.dead
}

// retrying reports whether commands wait to be resent.
func (cl *client) retrying() bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return len(cl.retry) > 0
}

// takeRetries moves the commands due for resending into dst and returns when the next one
// becomes due (math.MaxInt64 if none is waiting).
func (cl *client) takeRetries(now int64, dst []uint64) ([]uint64, int64) {
	next := int64(math.MaxInt64)
	cl.mu.Lock()
	had := len(dst)
	keep := cl.retry[:0]
	for _, it := range cl.retry {
		if it.notBefore <= now {
			dst = append(dst, it.corr)
		} else {
			keep = append(keep, it)
			next = min(next, it.notBefore)
		}
	}
	cl.retry = keep
	if n := int64(len(dst) - had); n > 0 {
		cl.stats.Resent += n
		cl.tickLocked(now, func(t *rundir.ConnSecond) { t.Resent += n })
	}
	cl.mu.Unlock()
	return dst, next
}

// keepalive pings connections that sent nothing for KeepAlive, or that have commands in flight
// and heard nothing for KeepAlive or a quarter of the LeaderTimeout; it leaves one whose commands
// waited a LeaderTimeout with nothing heard, and drops one whose ping stays unanswered for
// DeadAfter (a hung process keeps its sockets open; only silence tells).
func (cl *client) keepalive() {
	defer cl.wg.Done()
	period := max(min(cl.opts.KeepAlive, cl.opts.LeaderTimeout)/4, 10*time.Millisecond)
	t := time.NewTicker(period)
	defer t.Stop()
	var conns []*conn
	var frame []byte
	for {
		select {
		case <-t.C:
		case <-cl.done:
			return
		}
		now := cl.now()
		conns = conns[:0]
		cl.mu.Lock()
		busy := make(map[*conn]bool, len(cl.conns))
		for c := range cl.conns {
			conns = append(conns, c)
			busy[c] = len(c.inflight) > 0
		}
		cl.mu.Unlock()
		ka := int64(cl.opts.KeepAlive)
		lt := int64(cl.opts.LeaderTimeout)
		for _, c := range conns {
			// How long commands have waited on it with nothing heard; it is left only once a ping
			// sent in that silence has had half a leader timeout to come back.
			waiting := now - max(c.lastRecv.Load(), c.busySince.Load())
			ps := c.pingSent.Load()
			if busy[c] && waiting > lt && ps != 0 && now-ps >= lt/2 {
				cl.mu.Lock()
				cl.stats.LeaderTimeouts++
				c.suspect = true
				cl.avoid[c.addr] = now + lt
				cl.mu.Unlock()
				c.kill(fmt.Errorf("leader timeout: commands outstanding and nothing heard for %v", cl.opts.LeaderTimeout))
				continue
			}
			if ps != 0 {
				if now-ps > int64(cl.opts.DeadAfter) {
					cl.mu.Lock()
					cl.stats.PingTimeouts++
					c.suspect = true
					cl.mu.Unlock()
					c.kill(fmt.Errorf("no answer to a ping for %v", cl.opts.DeadAfter))
				}
				continue
			}
			if now-c.lastSend.Load() < ka && !(busy[c] && waiting >= min(ka, lt/4)) {
				continue
			}
			if !c.wmu.TryLock() { // a send is under way: that is traffic enough
				continue
			}
			frame = wire.AppendRequest(frame[:0], &wire.Request{Type: wire.TypePing, Corr: pingCorrBit | cl.pingSeq.Add(1)})
			c.pingSent.Store(max(now, 1))
			err := c.writeLocked(frame)
			c.wmu.Unlock()
			c.lastSend.Store(cl.now())
			if err != nil {
				c.kill(fmt.Errorf("ping %s: %w", c.addr, err))
			}
		}
	}
}

// close drops every connection and waits for the readers; commands still in flight stay
// unanswered.
func (cl *client) close() {
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return
	}
	cl.closed = true
	conns := make([]*conn, 0, len(cl.conns))
	for c := range cl.conns {
		conns = append(conns, c)
	}
	cl.mu.Unlock()
	cl.cancel()
	close(cl.done)
	for _, c := range conns {
		c.kill(nil)
	}
	cl.wg.Wait()
}

func (cl *client) snapshot() rundir.ConnStats {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	s := cl.stats
	s.LeaderChanges = append([]rundir.LeaderChange(nil), cl.stats.LeaderChanges...)
	s.Timeline = append([]rundir.ConnSecond(nil), cl.stats.Timeline...)
	s.Holds = append([]rundir.Hold(nil), cl.stats.Holds...)
	return s
}
