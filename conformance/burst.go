package conformance

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/loadgen"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/runner/launch"
)

// checkBurst is the burst the suite sends: small enough for any engine, big enough for a p99.
var checkBurst = rundir.BurstSeries{Messages: 2_000, Size: 170, Count: 1, Senders: 1}

// burst sends one burst the way a run's `burst` action does on this engine: through the
// engine's own client where the playbook names one (engine.burst_client; every message must be
// answered and every server must serve its transport counters, GET engine.AdminTransport), else
// to the contract's UDP ingress (every datagram must reach the leader).
func (s *suite) burst(ctx context.Context) {
	if argv := s.o.Playbook.Engine.BurstClient(); argv != nil {
		s.clientBurst(ctx, argv)
		return
	}
	series := checkBurst
	series.UDP = true
	out := filepath.Join(s.o.Dir, "burst-check")
	bctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	st, err := loadgen.Burst(bctx, loadgen.BurstOptions{Servers: s.clientAddrs(), Series: series, Out: out, Logger: s.o.Logger})
	if err != nil {
		s.add(CheckBurst, false, "%d x %d B to the leader's UDP ingress (docs/wire.md): %v", series.Messages, series.Size, err)
		return
	}
	var got uint64
	deadline := time.Now().Add(s.o.Timeout)
	for got < uint64(st.Sent) && time.Now().Before(deadline) && ctx.Err() == nil {
		for _, stn := range s.statuses(ctx) {
			if stn.UDP == nil {
				continue
			}
			for _, b := range stn.UDP.Bursts {
				got = max(got, b.Received)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.add(CheckBurst, st.Sent > 0 && got == uint64(st.Sent), "%d of %d datagrams of %d B sent to the leader's UDP ingress received (GET /status?udp=1)",
		got, st.Sent, series.Size)
}

// clientBurst sends the check's burst through the engine's burst client on the client node.
func (s *suite) clientBurst(ctx context.Context, argv []string) {
	client := s.cl.Inventory().Clients()[0]
	peers := launch.EngineConfig(s.servers, s.servers[0], "").Peers
	before := s.transport(ctx)
	series := checkBurst
	err := launch.RunBurstClient(ctx, s.cl, s.o.Dir, client, argv, peers, series, time.Now().Add(launch.BurstClientLead))
	if err != nil {
		s.add(CheckBurst, false, "the engine's burst client (engine.burst_client): %v", err)
		return
	}
	var st rundir.BurstStats
	b, err := os.ReadFile(filepath.Join(s.o.Dir, filepath.FromSlash(rundir.RemoteBurstsDir(client.Name, series.FirstBurst)), rundir.BurstStatsFile))
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil || len(st.Bursts) != 1 {
		s.add(CheckBurst, false, "the burst client's figures (%s): %v, %d bursts", rundir.BurstStatsFile, err, len(st.Bursts))
		return
	}
	r := st.Bursts[0]
	after := s.transport(ctx)
	served := 0
	var naks int64
	for n, a := range after {
		if bf, ok := before[n]; ok && len(a.Counters) > 0 {
			served++
			naks += a.Counters["nak_messages_sent"] - bf.Counters["nak_messages_sent"]
		}
	}
	pass := r.Sent == series.Messages && r.Answered == r.Sent && served == len(s.servers)
	s.add(CheckBurst, pass, "%d of %d messages of %d B sent through the engine's own client, %d answered (p99 %s); transport counters (GET %s) from %d of %d servers, NAKs sent %+d",
		r.Sent, series.Messages, st.Size, r.Answered, time.Duration(r.P99LatencyNs), engine.AdminTransport, served, len(s.servers), naks)
}

// transport is every server's transport counters now (those that answer).
func (s *suite) transport(ctx context.Context) map[string]engine.TransportCounters {
	out := map[string]engine.TransportCounters{}
	for _, n := range s.servers {
		if tc, err := s.agent(n.Name).EngineTransport(ctx); err == nil {
			out[n.Name] = tc
		}
	}
	return out
}
