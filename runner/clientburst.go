package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/internal/ctxtime"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/runner/launch"
)

// sampleBefore is how long before each burst the servers' transport counters are sampled.
const sampleBefore = 300 * time.Millisecond

// clientBurst sends a burst series (starting at series.Start) through the engine's own client
// (engine.burst_client): each client node with a share of the senders runs the client with a
// request file; the servers' transport counters are sampled before each burst and after the
// last (rundir.TransportSamples).
func (e env) clientBurst(ctx context.Context, argv []string, share []int, series rundir.BurstSeries) error {
	r := e.r
	start := series.Start
	peers := launch.EngineConfig(r.servers, r.servers[0], "").Peers
	var wg sync.WaitGroup
	errs := make([]error, len(share))
	for i, c := range r.inv.Clients() {
		if share[i] == 0 {
			continue
		}
		s := series
		s.Senders = share[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = launch.BurstClient{Cluster: r.cl, Dir: r.dir, Node: c, Argv: argv, Peers: peers, Series: s,
				Start: start.Add(r.srv(c.Name).offset), Secret: r.secret}.Run(ctx)
		}()
	}
	samples := rundir.TransportSamples{FirstBurst: series.FirstBurst, Nodes: map[string][]engine.TransportCounters{}}
	for _, s := range r.servers {
		samples.Nodes[s.Name] = make([]engine.TransportCounters, series.Count+1)
	}
	for k := range series.Count {
		if err := ctxtime.Sleep(ctx, time.Until(start.Add(time.Duration(k)*series.Every-sampleBefore))); err != nil {
			break
		}
		r.sampleTransport(ctx, samples.Nodes, k)
	}
	wg.Wait()
	r.sampleTransport(ctx, samples.Nodes, series.Count)
	rel := rundir.RemoteBurstsDir(r.inv.Clients()[0].Name, series.FirstBurst)
	if err := os.MkdirAll(filepath.Join(r.dir, filepath.FromSlash(rel)), 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteJSON(filepath.Join(r.dir, filepath.FromSlash(rel), rundir.TransportFile), samples); err != nil {
		return err
	}
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("burst from %s: %w", r.inv.Clients()[i].Name, err)
		}
	}
	return nil
}

// sampleTransport sets sample k of every server's transport counters to now; a server that does
// not answer (down, or an engine without GET /transport) keeps a zero sample, which the analysis
// skips.
func (r *run) sampleTransport(ctx context.Context, into map[string][]engine.TransportCounters, k int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range r.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tc, err := r.agent(s.Name).EngineTransport(ctx)
			if err != nil {
				r.log.Debug("transport counters", "node", s.Name, "err", err)
				return
			}
			mu.Lock()
			into[s.Name][k] = tc
			mu.Unlock()
		}()
	}
	wg.Wait()
}
