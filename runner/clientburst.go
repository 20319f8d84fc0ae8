package runner

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/internal/ctxtime"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/runner/launch"
	"github.com/rig-dev/rig/transport"
)

// clientBurstLead is how far ahead a burst through the engine's own client starts: the client
// is a JVM with a media driver of its own per sender, which must be up and connected by then.
const clientBurstLead = 8 * time.Second

// sampleBefore is how long before each burst the servers' transport counters are sampled.
const sampleBefore = 300 * time.Millisecond

// burstRequest is what the engine's burst client reads (properties, one key a line): the
// cluster's members, the series on the client node's clock, and where to write its BurstStats.
func burstRequest(peers []engine.Peer, host string, s rundir.BurstSeries, start time.Time, out string) string {
	var b strings.Builder
	for i, p := range peers {
		fmt.Fprintf(&b, "peer.%d=%s,%s,%s\n", i, p.Node, p.RaftAddr, p.ClientAddr)
	}
	fmt.Fprintf(&b, "host=%s\nmessages=%d\nsize=%d\ncount=%d\nevery_ns=%d\nstart_unix_ns=%d\nsenders=%d\nfirst_burst=%d\nout=%s\n",
		host, s.Messages, s.Size, s.Count, s.Every.Nanoseconds(), start.UnixNano(), s.Senders, s.FirstBurst, out)
	return b.String()
}

// clientBurst sends a burst series (starting at series.Start) through the engine's own client (engine.burst_client): each client
// node with a share of the senders runs the client with a request file; the servers' transport
// counters are sampled before each burst and after the last (rundir.TransportSamples).
func (e env) clientBurst(ctx context.Context, b actions.Burst, argv []string, share []int, series rundir.BurstSeries) error {
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
			errs[i] = r.runBurstClient(ctx, c, argv, peers, s, start.Add(r.srv(c.Name).offset))
		}()
	}
	samples := rundir.TransportSamples{FirstBurst: series.FirstBurst, Nodes: map[string][]engine.TransportCounters{}}
	for k := range b.Count {
		if err := ctxtime.Sleep(ctx, time.Until(start.Add(time.Duration(k)*b.Every-sampleBefore))); err != nil {
			break
		}
		r.sampleTransport(ctx, samples.Nodes)
	}
	wg.Wait()
	r.sampleTransport(ctx, samples.Nodes)
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

// sampleTransport appends every server's transport counters now; a server that does not answer
// (down, or an engine without GET /transport) gets no sample.
func (r *run) sampleTransport(ctx context.Context, into map[string][]engine.TransportCounters) {
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
			into[s.Name] = append(into[s.Name], tc)
			mu.Unlock()
		}()
	}
	wg.Wait()
}

// runBurstClient runs the engine's burst client on client node n for its share of series
// (starting at start on n's clock), then gathers the BurstStats it wrote into the run folder.
func (r *run) runBurstClient(ctx context.Context, n inventory.Node, argv []string, peers []engine.Peer, series rundir.BurstSeries, start time.Time) error {
	rel := rundir.RemoteBurstsDir(n.Name, series.FirstBurst)
	req := burstRequest(peers, n.PrivateAddress, series, start, r.cl.OutputPath(n, path.Join(rel, rundir.BurstStatsFile)))
	name := fmt.Sprintf("burst-client-%s-%d", n.Name, series.FirstBurst)
	local := filepath.Join(r.dir, name+".properties")
	if err := os.WriteFile(local, []byte(req), 0o644); err != nil {
		return err
	}
	remote := r.cl.NodePath(n, name+".properties")
	if err := r.cl.Transport().Upload(ctx, n, local, remote, 0o644); err != nil {
		return fmt.Errorf("upload burst request: %w", err)
	}
	logf, err := os.Create(filepath.Join(r.dir, name+".log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	args := append(append([]string(nil), argv...), remote)
	if _, err := r.cl.Transport().Exec(ctx, n, transport.Cmd{Args: args, Stdout: logf, Stderr: logf}); err != nil {
		return fmt.Errorf("%s: %w (log: %s.log)", strings.Join(args, " "), err, name)
	}
	return r.cl.Gather(ctx, n, path.Join(rel, rundir.BurstStatsFile))
}
