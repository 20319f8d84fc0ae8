package loadgen_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/replica"
	"github.com/rig-dev/rig/engine/server"
	"github.com/rig-dev/rig/internal/testaddr"
	"github.com/rig-dev/rig/loadgen"
	"github.com/rig-dev/rig/loadgen/loadspec"
)

// engineCluster is n reference-engine replicas in this process: real raft over loopback TCP,
// real log files and syncs.
type engineCluster struct {
	tb    testing.TB
	cfgs  []engine.Config
	nodes []*replica.Node
	stops []context.CancelFunc
	dones []chan struct{}
	// faileds hold a server's error (one, buffered) where it ended before its stop.
	faileds []chan error
	addrs   []string
	logger  *slog.Logger
}

// startEngines starts n replicas at syncLevel; install, if set, runs on each node's folder
// before it starts.
func startEngines(tb testing.TB, n, syncLevel int, install func(dir string)) *engineCluster {
	tb.Helper()
	var peers []engine.Peer
	for i := 0; i < n; i++ {
		peers = append(peers, engine.Peer{Node: fmt.Sprintf("node-%d", i), RaftAddr: testaddr.Free(tb), ClientAddr: testaddr.Free(tb)})
	}
	dir := tb.TempDir()
	c := &engineCluster{tb: tb, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	tb.Cleanup(func() {
		for i := range c.nodes {
			c.stop(i)
		}
	})
	for i := range peers {
		c.cfgs = append(c.cfgs, engine.Config{
			Node: peers[i].Node, Dir: filepath.Join(dir, peers[i].Node), RaftAddr: peers[i].RaftAddr,
			ClientAddr: peers[i].ClientAddr, AdminAddr: testaddr.Free(tb), Peers: peers, Bootstrap: true,
			SyncLevel: syncLevel, HeartbeatTimeout: "200ms", ElectionTimeout: "200ms",
		})
		c.addrs = append(c.addrs, peers[i].ClientAddr)
		c.nodes, c.stops, c.dones, c.faileds = append(c.nodes, nil), append(c.stops, nil), append(c.dones, nil), append(c.faileds, nil)
		if install != nil {
			install(c.cfgs[i].Dir)
		}
		c.start(i)
	}
	c.await("a leader", func(nd *replica.Node) bool { return nd.IsLeader() }, false)
	return c
}

func (c *engineCluster) start(i int) {
	cfg := c.cfgs[i] // a copy: startEngines appends to c.cfgs while this node's server runs
	nd, err := replica.Open(cfg, c.logger)
	if err != nil {
		c.tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	failed := make(chan error, 1)
	go func() {
		defer close(done)
		if err := server.New(nd, c.logger, "test-admin-secret").Run(ctx); err != nil && ctx.Err() == nil {
			failed <- err
		}
	}()
	c.nodes[i], c.stops[i], c.dones[i], c.faileds[i] = nd, cancel, done, failed
	// A listener that cannot bind (a free port taken meanwhile) leaves the node without a
	// client address, and a client would retry it until its deadline: fail here instead.
	deadline := time.Now().Add(20 * time.Second)
	for _, addr := range []string{cfg.ClientAddr, cfg.AdminAddr} {
		for {
			select {
			case err := <-failed:
				c.tb.Fatalf("%s: engine server: %v", cfg.Node, err)
			default:
			}
			if time.Now().After(deadline) {
				c.tb.Fatalf("%s: engine server not listening on %s after 20 s", cfg.Node, addr)
			}
			if nc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				nc.Close()
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func (c *engineCluster) stop(i int) {
	if c.nodes[i] == nil {
		return
	}
	c.stops[i]()
	<-c.dones[i]
	select {
	case err := <-c.faileds[i]: // after its start: a server that ended on its own
		c.tb.Errorf("%s: engine server: %v", c.cfgs[i].Node, err)
	default:
	}
	c.nodes[i].Shutdown()
	c.nodes[i] = nil
}

// await waits until cond holds for one node (all: for every running node).
func (c *engineCluster) await(what string, cond func(*replica.Node) bool, all bool) {
	c.tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, ok := 0, 0
		for _, nd := range c.nodes {
			if nd != nil {
				n++
				if cond(nd) {
					ok++
				}
			}
		}
		if (all && ok == n) || (!all && ok > 0) {
			return
		}
		if time.Now().After(deadline) {
			c.tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkPreload builds a resting book of b.N orders through the log of a real 3-node cluster
// (one process, so it shares the CPUs as the local target does) at each sync level with the
// default batch and pipeline depth, and reports orders/s, and cpu-ns/order: the process's CPU
// time (the three engines and the load generator, all threads), which a shared machine's load
// inflates less than wall time. Run (docs/engines.md, "Preload"):
//
//	go test ./loadgen -run '^$' -bench Preload -benchtime 1000000x
func BenchmarkPreload(b *testing.B) {
	for _, sync := range []int{0, 1, 2} {
		b.Run(fmt.Sprintf("sync=%d", sync), func(b *testing.B) {
			c := startEngines(b, 3, sync, nil)
			b.ReportAllocs()
			b.ResetTimer()
			c0 := cpuNow()
			st, err := loadgen.Preload(context.Background(), loadgen.PreloadOptions{BookShape: loadspec.BookShape{Orders: int64(b.N)}, Servers: c.addrs})
			b.StopTimer()
			b.ReportMetric(float64((cpuNow()-c0).Nanoseconds())/float64(b.N), "cpu-ns/order")
			if err != nil {
				b.Fatal(err)
			}
			if st.Orders != int64(b.N) || st.Filled != 0 {
				b.Fatalf("preload applied %d orders (filled %d), want %d resting", st.Orders, st.Filled, b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "orders/s")
		})
	}
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
