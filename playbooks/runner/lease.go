package runner

import (
	"context"
	"sync"
	"time"

	"github.com/rig-dev/rig/rundir"
)

// LeaseTTL is how long an agent keeps this run's lease without a renewal; the controller renews
// every quarter of it. When it lapses (the controller was killed, the network cut) each agent
// stops its engine and reverts its tuning by itself (agent/lease.go).
const LeaseTTL = 15 * time.Second

// holdLeases claims every agent for this run and renews the leases until the returned stop is
// called. An agent another run holds refuses the claim, naming that run.
func (r *run) holdLeases(ctx context.Context) (stop func(), err error) {
	for _, n := range r.inv.Nodes {
		if _, err := r.cl.Agent(n.Name).Lease(ctx, LeaseTTL); err != nil {
			return func() {}, err
		}
	}
	r.beat()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(LeaseTTL / 4)
		defer tick.Stop()
		failing := map[string]bool{}
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			for _, n := range r.inv.Nodes {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), LeaseTTL/4)
				_, err := r.cl.Agent(n.Name).Lease(rctx, LeaseTTL)
				cancel()
				if err != nil && !failing[n.Name] {
					r.warn("renew the lease on %s: %v", n.Name, err)
				}
				failing[n.Name] = err != nil
			}
			r.beat()
		}
	}()
	return func() { close(done); wg.Wait() }, nil
}

// releaseLeases stops renewing and gives every lease back (after the run's own revert).
func (r *run) releaseLeases(ctx context.Context) {
	if r.stopLeases == nil {
		return
	}
	r.stopLeases()
	r.stopLeases = nil
	for _, n := range r.inv.Nodes {
		if err := r.cl.Agent(n.Name).Release(ctx); err != nil {
			r.log.Warn("release lease", "node", n.Name, "err", err)
		}
	}
}

// beat records that the controller is alive (rundir.ControllerFile): rig report calls a run
// abandoned when the manifest says running but the beats stopped.
func (r *run) beat() {
	if err := rundir.WriteControllerBeat(r.dir, LeaseTTL/4); err != nil {
		r.log.Warn("controller heartbeat", "err", err)
	}
}
