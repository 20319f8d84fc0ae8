// Package loadgentest is an in-process double of the reference engine's client protocol
// (engine/wire) for tests of clients: a few TCP servers on loopback sharing one sequenced
// "book". The leader applies commands in arrival order on one goroutine and answers after a
// configurable delay; followers answer NotLeader with the leader's address (or "" during an
// "election"); the apply goroutine can be stalled (a snapshot); connections can be dropped and
// nodes killed for good. It checks what a load generator must never do: cross the book.
package loadgentest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rig-dev/rig/engine/wire"
)

// Stats counts what the cluster saw.
type Stats struct {
	Applied  int64 // commands applied (log index)
	Orders   int64 // resting GTC orders
	IOC      int64 // IOC orders applied (probes; resends count again)
	Crossed  int64 // orders whose price crossed the other side of the book
	Rejected int64 // commands answered StatusRejected
	Errors   int64 // commands answered StatusError (leadership lost before apply)
	Pings    int64
}

// Cluster is a set of fake engine nodes.
type Cluster struct {
	nodes []*node
	apply chan *command
	done  chan struct{}
	wg    sync.WaitGroup

	mu         sync.Mutex
	leader     int // -1: none known (election)
	delay      time.Duration
	stallUntil time.Time
	resting    map[uint64]wire.Order
	order      []wire.Order // resting orders in apply order
	bestBid    map[uint32]int64
	bestAsk    map[uint32]int64
	stats      Stats
}

type node struct {
	c      *Cluster
	idx    int
	ln     net.Listener
	addr   string
	mu     sync.Mutex
	conns  map[*srvConn]struct{}
	dead   bool
	frozen chan struct{} // non-nil while frozen; closed to thaw
}

type srvConn struct {
	n    *node
	nc   net.Conn
	out  chan outFrame
	once sync.Once
	gone chan struct{}
}

type outFrame struct {
	due time.Time
	b   []byte
}

type command struct {
	conn *srvConn
	req  *wire.Request
}

// Start listens on n loopback ports; node 0 is the leader.
func Start(n int) (*Cluster, error) {
	c := &Cluster{
		apply:   make(chan *command, 1<<16),
		done:    make(chan struct{}),
		resting: make(map[uint64]wire.Order),
		bestBid: make(map[uint32]int64),
		bestAsk: make(map[uint32]int64),
	}
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("listen for fake node %d: %w", i, err)
		}
		nd := &node{c: c, idx: i, ln: ln, addr: ln.Addr().String(), conns: make(map[*srvConn]struct{})}
		c.nodes = append(c.nodes, nd)
		c.wg.Add(1)
		go nd.accept()
	}
	c.wg.Add(1)
	go c.fsm()
	return c, nil
}

// Addrs are the nodes' client addresses, by index.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.addr
	}
	return out
}

// SetLeader makes node i the leader; -1 means no leader is known (followers answer NotLeader
// with ""). Commands queued for the old leader and not yet applied are answered StatusError.
func (c *Cluster) SetLeader(i int) {
	c.mu.Lock()
	c.leader = i
	c.mu.Unlock()
}

// Leader is the current leader's index (-1: none).
func (c *Cluster) Leader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader
}

// SetDelay sets how long after applying a command its answer is written.
func (c *Cluster) SetDelay(d time.Duration) {
	c.mu.Lock()
	c.delay = d
	c.mu.Unlock()
}

// Stall stops the apply goroutine for d from now (as a snapshot stops the book) and returns the
// stall's start and end. Pings are still answered.
func (c *Cluster) Stall(d time.Duration) (start, end time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	start = time.Now()
	end = start.Add(d)
	c.stallUntil = end
	return start, end
}

// DropConns closes every connection of node i from the server side; answers not yet written
// are lost (the commands may or may not have been applied).
func (c *Cluster) DropConns(i int) {
	n := c.nodes[i]
	n.mu.Lock()
	conns := make([]*srvConn, 0, len(n.conns))
	for sc := range n.conns {
		conns = append(conns, sc)
	}
	n.mu.Unlock()
	for _, sc := range conns {
		sc.close()
	}
}

// Freeze makes node i stop reading and answering, pings included, with its connections left
// open: a hung process (SIGSTOP, a long GC) as its clients see it. Thaw undoes it.
func (c *Cluster) Freeze(i int) {
	n := c.nodes[i]
	n.mu.Lock()
	if n.frozen == nil {
		n.frozen = make(chan struct{})
	}
	n.mu.Unlock()
}

// Thaw lets a frozen node go on.
func (c *Cluster) Thaw(i int) {
	n := c.nodes[i]
	n.mu.Lock()
	if n.frozen != nil {
		close(n.frozen)
		n.frozen = nil
	}
	n.mu.Unlock()
}

// Kill closes node i's listener and connections for good.
func (c *Cluster) Kill(i int) {
	n := c.nodes[i]
	n.mu.Lock()
	n.dead = true
	n.mu.Unlock()
	n.ln.Close()
	c.DropConns(i)
}

// Seed rests orders directly, as if applied earlier.
func (c *Cluster) Seed(orders ...wire.Order) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range orders {
		c.restLocked(o)
	}
}

// Orders returns the resting orders in the order they were applied.
func (c *Cluster) Orders() []wire.Order {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]wire.Order(nil), c.order...)
}

// Stats returns the counters so far.
func (c *Cluster) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Close stops every node.
func (c *Cluster) Close() {
	for i := range c.nodes {
		c.Kill(i)
	}
	select {
	case <-c.done:
	default:
		close(c.done)
	}
	c.wg.Wait()
}

func (n *node) accept() {
	defer n.c.wg.Done()
	for {
		nc, err := n.ln.Accept()
		if err != nil {
			return
		}
		sc := &srvConn{n: n, nc: nc, out: make(chan outFrame, 1<<16), gone: make(chan struct{})}
		n.mu.Lock()
		if n.dead {
			n.mu.Unlock()
			nc.Close()
			continue
		}
		n.conns[sc] = struct{}{}
		n.mu.Unlock()
		n.c.wg.Add(2)
		go sc.read()
		go sc.write()
	}
}

func (sc *srvConn) close() {
	sc.once.Do(func() {
		close(sc.gone)
		sc.nc.Close()
		sc.n.mu.Lock()
		delete(sc.n.conns, sc)
		sc.n.mu.Unlock()
	})
}

// send queues an answer to be written at due; answers on one connection go out in order.
func (sc *srvConn) send(due time.Time, r *wire.Response) {
	select {
	case sc.out <- outFrame{due, wire.AppendResponse(nil, r)}:
	case <-sc.gone:
	}
}

func (sc *srvConn) write() {
	defer sc.n.c.wg.Done()
	w := bufio.NewWriter(sc.nc)
	for {
		var f outFrame
		select {
		case f = <-sc.out:
		case <-sc.gone:
			return
		}
		if d := time.Until(f.due); d > 0 {
			w.Flush()
			select {
			case <-time.After(d):
			case <-sc.gone:
				return
			}
		}
		w.Write(f.b)
		if len(sc.out) == 0 {
			if err := w.Flush(); err != nil {
				sc.close()
				return
			}
		}
	}
}

func (sc *srvConn) read() {
	defer sc.n.c.wg.Done()
	defer sc.close()
	c := sc.n.c
	br := bufio.NewReader(sc.nc)
	var buf []byte
	for {
		var err error
		buf, err = wire.ReadFrame(br, buf)
		if err != nil {
			return
		}
		sc.n.mu.Lock()
		frozen := sc.n.frozen
		sc.n.mu.Unlock()
		if frozen != nil {
			select {
			case <-frozen:
			case <-sc.gone:
				return
			}
		}
		req := new(wire.Request)
		if err := wire.DecodeRequest(buf, req); err != nil {
			return
		}
		if req.Type == wire.TypePing {
			c.mu.Lock()
			c.stats.Pings++
			c.mu.Unlock()
			sc.send(time.Now(), &wire.Response{Type: wire.TypePing, Corr: req.Corr})
			continue
		}
		c.mu.Lock()
		leader := c.leader
		c.mu.Unlock()
		if leader != sc.n.idx {
			text := ""
			if leader >= 0 {
				text = c.nodes[leader].addr
			}
			sc.send(time.Now(), &wire.Response{Type: req.Type, Corr: req.Corr, Status: wire.StatusNotLeader, Text: text})
			continue
		}
		select {
		case c.apply <- &command{conn: sc, req: req}:
		case <-c.done:
			return
		}
	}
}

// fsm applies commands one at a time, in arrival order, like a raft FSM.
func (c *Cluster) fsm() {
	defer c.wg.Done()
	for {
		var cmd *command
		select {
		case cmd = <-c.apply:
		case <-c.done:
			return
		}
		for {
			c.mu.Lock()
			wait := time.Until(c.stallUntil)
			c.mu.Unlock()
			if wait <= 0 {
				break
			}
			time.Sleep(wait)
		}
		r := &wire.Response{Type: cmd.req.Type, Corr: cmd.req.Corr}
		c.mu.Lock()
		delay := c.delay
		if c.leader != cmd.conn.n.idx {
			r.Status, r.Text = wire.StatusError, "leadership lost"
			c.stats.Errors++
		} else {
			c.applyLocked(cmd.req, r)
		}
		c.mu.Unlock()
		cmd.conn.send(time.Now().Add(delay), r)
	}
}

var errDuplicate = errors.New("duplicate order id")

func (c *Cluster) applyLocked(req *wire.Request, r *wire.Response) {
	switch req.Type {
	case wire.TypeBatch:
		for _, o := range req.Batch {
			if _, dup := c.resting[o.ID]; dup {
				r.Status, r.Text = wire.StatusRejected, fmt.Sprintf("%v %d", errDuplicate, o.ID)
				c.stats.Rejected++
				return
			}
		}
		for _, o := range req.Batch {
			r.Rested += o.Qty
			if c.crossesLocked(o) {
				r.Filled += o.Qty
			}
			c.restLocked(o)
		}
	case wire.TypeOrder:
		o := req.Order
		if c.crossesLocked(o) {
			r.Filled = o.Qty
		}
		if o.TIF == wire.IOC {
			c.stats.IOC++
			break
		}
		if _, dup := c.resting[o.ID]; dup {
			r.Status, r.Text = wire.StatusRejected, fmt.Sprintf("%v %d", errDuplicate, o.ID)
			c.stats.Rejected++
			return
		}
		r.Rested = o.Qty
		c.restLocked(o)
	case wire.TypeCancel:
		if _, ok := c.resting[req.Cancel]; !ok {
			r.Status, r.Text = wire.StatusRejected, "unknown order"
			c.stats.Rejected++
			return
		}
		delete(c.resting, req.Cancel)
	}
	c.stats.Applied++
	r.Index = uint64(c.stats.Applied)
}

// crossesLocked reports whether o would trade against the resting book. The double does not
// match; it counts, because a load generator must never cross.
func (c *Cluster) crossesLocked(o wire.Order) bool {
	var crossed bool
	if o.Side == wire.Buy {
		ask, ok := c.bestAsk[o.Instrument]
		crossed = ok && (o.Market || o.Price >= ask)
	} else {
		bid, ok := c.bestBid[o.Instrument]
		crossed = ok && (o.Market || o.Price <= bid)
	}
	if crossed {
		c.stats.Crossed++
	}
	return crossed
}

func (c *Cluster) restLocked(o wire.Order) {
	c.resting[o.ID] = o
	c.order = append(c.order, o)
	c.stats.Orders++
	if o.Side == wire.Buy {
		if b, ok := c.bestBid[o.Instrument]; !ok || o.Price > b {
			c.bestBid[o.Instrument] = o.Price
		}
	} else {
		if a, ok := c.bestAsk[o.Instrument]; !ok || o.Price < a {
			c.bestAsk[o.Instrument] = o.Price
		}
	}
}
