package loadgen_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/replica"
	"github.com/rig-dev/rig/engine/server"
	"github.com/rig-dev/rig/internal/testaddr"
	"github.com/rig-dev/rig/loadgen"
)

// engineCluster starts n reference-engine replicas in this process (real raft over loopback TCP,
// real log files and syncs) and returns their client addresses once one of them leads.
func engineCluster(b *testing.B, n, syncLevel int) []string {
	b.Helper()
	var peers []engine.Peer
	for i := 0; i < n; i++ {
		peers = append(peers, engine.Peer{Node: fmt.Sprintf("node-%d", i), RaftAddr: testaddr.Free(b), ClientAddr: testaddr.Free(b)})
	}
	dir := b.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	var nodes []*replica.Node
	done := make(chan struct{}, n)
	b.Cleanup(func() {
		cancel()
		for range nodes {
			<-done
		}
		for _, nd := range nodes {
			nd.Shutdown()
		}
	})
	var addrs []string
	for i := range peers {
		nd, err := replica.Open(engine.Config{
			Node: peers[i].Node, Dir: filepath.Join(dir, peers[i].Node), RaftAddr: peers[i].RaftAddr,
			ClientAddr: peers[i].ClientAddr, AdminAddr: testaddr.Free(b), Peers: peers, Bootstrap: true,
			SyncLevel: syncLevel, HeartbeatTimeout: "200ms", ElectionTimeout: "200ms",
		}, log)
		if err != nil {
			b.Fatal(err)
		}
		nodes = append(nodes, nd)
		go func() { server.New(nd, log, "bench-admin-secret").Run(ctx); done <- struct{}{} }()
		addrs = append(addrs, peers[i].ClientAddr)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, nd := range nodes {
			if nd.IsLeader() {
				return addrs
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("no leader after 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkPreload builds a resting book of b.N orders through the log of a real 3-node cluster
// (one process, so it shares the CPUs as the local target does) at each sync level with the
// default batch and pipeline depth, and reports orders/s. Run:
//
//	go test ./loadgen -run '^$' -bench Preload -benchtime 1000000x
func BenchmarkPreload(b *testing.B) {
	for _, sync := range []int{0, 1, 2} {
		b.Run(fmt.Sprintf("sync=%d", sync), func(b *testing.B) {
			addrs := engineCluster(b, 3, sync)
			b.ResetTimer()
			st, err := loadgen.Preload(context.Background(), loadgen.PreloadOptions{Servers: addrs, Orders: int64(b.N)})
			b.StopTimer()
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
