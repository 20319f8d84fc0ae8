package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/rundir"
)

// Lease lengths. An agent keeps this run's lease for the lease length without a renewal; the
// controller renews every quarter of it. When it lapses (the controller was killed, the network
// cut) each agent stops its engine and reverts its tuning by itself (agent/lease.go). 15 s by
// default: a dead controller leaves a node tuned and its engine running for at most that long,
// while three renewals in a row may fail (a GC pause, an SSH hiccup) without losing the run.
// `rig run --lease` takes MinLeaseTTL to MaxLeaseTTL: a slow link to remote nodes may want longer.
const (
	DefaultLeaseTTL = 15 * time.Second
	MinLeaseTTL     = 5 * time.Second
	MaxLeaseTTL     = agent.MaxLeaseTTL
)

// ErrLeaseLapsed classifies a run that lost an agent's lease: renewals kept failing until the
// lease lapsed, so that agent undid the run by itself. Its text is what that means.
var ErrLeaseLapsed = errors.New("its agent stopped the engine and reverted tuning")

// holdLeases claims every agent for this run and renews each lease until the returned stop is
// called. An agent another run holds refuses the claim, naming that run.
func (r *run) holdLeases(ctx context.Context) (stop func(), err error) {
	ttl := r.opts.LeaseTTL
	claimed := map[string]time.Time{}
	for _, n := range r.inv.Nodes {
		sent := time.Now()
		if _, err := r.agent(n.Name).Lease(ctx, ttl); err != nil {
			return func() {}, err
		}
		claimed[n.Name] = sent
	}
	r.beat()
	done := make(chan struct{})
	var wg sync.WaitGroup
	// One renewer per node, so that a node whose renewals hang does not hold back the others'.
	for _, n := range r.inv.Nodes {
		wg.Go(func() { r.renewLease(ctx, n.Name, claimed[n.Name], done) })
	}
	wg.Go(func() {
		tick := time.NewTicker(ttl / 4)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				r.beat()
			}
		}
	})
	return func() { close(done); wg.Wait() }, nil
}

// renewLease renews node's lease every quarter of its length until done. renewed is when the
// last claim or renewal the agent granted was sent: the agent started the lease no earlier, so
// it lapses no earlier than the lease length later, and the controller, counting from the
// send, never calls a node whose lease it still thinks held after the agent gave it up. When
// renewals keep failing until then, or the agent answers that the lease lapsed, the agent has
// undone the run by itself, and the run fails at once (leaseLapsed).
func (r *run) renewLease(ctx context.Context, node string, renewed time.Time, done <-chan struct{}) {
	ttl := r.opts.LeaseTTL
	tick := time.NewTicker(ttl / 4)
	defer tick.Stop()
	var failing error
	// paused reports whether renewals are paused for a reboot (the lease went with the agent's
	// boot, and its lapse is expected), and takes a claim made after one.
	paused := func() bool {
		p, reclaimed := r.leasePaused(node)
		if !reclaimed.IsZero() {
			renewed, failing = reclaimed, nil
		}
		return p
	}
	for {
		if paused() {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			continue
		}
		lapse := time.NewTimer(time.Until(renewed.Add(ttl)))
		select {
		case <-done:
			lapse.Stop()
			return
		case <-lapse.C:
			if paused() || time.Now().Before(renewed.Add(ttl)) {
				continue
			}
			r.leaseLapsed(node, renewed.Add(ttl), renewed, failing)
			return
		case <-tick.C:
			lapse.Stop()
			if paused() {
				continue
			}
			if !time.Now().Before(renewed.Add(ttl)) { // the tick and the lapse came together
				r.leaseLapsed(node, renewed.Add(ttl), renewed, failing)
				return
			}
		}
		// A renewal that arrives after the lease lapsed cannot save it: wait no longer than that.
		sent := time.Now()
		rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), earlier(sent.Add(ttl/4), renewed.Add(ttl)))
		_, err := r.agent(node).Lease(rctx, ttl)
		cancel()
		switch {
		case paused():
			// the power was cut meanwhile: the answer, if any, was the old boot's
		case err == nil:
			renewed, failing = sent, nil
		case errors.Is(err, agent.ErrLeaseLapsed):
			r.leaseLapsed(node, earlier(time.Now(), renewed.Add(ttl)), renewed, err)
			return
		case failing != nil && errors.Is(err, context.DeadlineExceeded):
			// cut off at the lapse: the failure to report is the one before
		default:
			if failing == nil {
				r.warn("renew the lease on %s: %v (it lapses at %s unless a renewal gets through)",
					node, err, renewed.Add(ttl).Format(clockFormat))
			}
			failing = err
		}
	}
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// clockFormat is how lease times are shown: the controller's wall clock, as in progress lines.
const clockFormat = "15:04:05.000"

// leaseLapsed fails the run at once with the cause named, rather than later with an engine the
// agent stopped. A lapse once the run is stopping only leaves a warning: what it measured is in.
func (r *run) leaseLapsed(node string, at, renewed time.Time, cause error) {
	why := "no answer"
	if cause != nil {
		why = cause.Error()
	}
	err := fmt.Errorf("lease on %s lapsed at %s (last renewed %s, renewals failing: %s): %w",
		node, at.Format(clockFormat), renewed.Format(clockFormat), why, ErrLeaseLapsed)
	r.mu.Lock()
	stopping, first := r.stopping, r.lapse == nil
	if !stopping && first {
		r.lapse = err
	}
	r.srv(node).lapsed = true
	r.notifyLocked()
	r.mu.Unlock()
	switch {
	case stopping:
		r.warn("%v", err)
	case first:
		r.progress("%v", err)
		r.abort(err)
	}
}

// releaseLeases stops renewing and gives every lease back (after the run's own revert).
func (r *run) releaseLeases(ctx context.Context) {
	if r.stopLeases == nil {
		return
	}
	r.stopLeases()
	r.stopLeases = nil
	for _, n := range r.liveNodes(r.inv.Nodes) {
		if err := r.cl.Agent(n.Name).Release(ctx); err != nil {
			r.log.Warn("release lease", "node", n.Name, "err", err)
		}
	}
}

// liveNodes is nodes without those whose lease lapsed: their agents undid the run by themselves
// and refuse anything more that would change the node, and one that stopped answering (a hung
// node, a cut link) would hold up the cleanup of every other node until its deadline.
func (r *run) liveNodes(nodes []inventory.Node) []inventory.Node {
	var live []inventory.Node
	for _, n := range nodes {
		if !r.lapsed(n.Name) {
			live = append(live, n)
		}
	}
	return live
}

func (r *run) lapsed(node string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.srv(node).lapsed
}

// beat records that the controller is alive (rundir.ControllerFile): rig report calls a run
// abandoned when the manifest says running but the beats stopped.
func (r *run) beat() {
	if err := rundir.WriteControllerBeat(r.dir, r.opts.LeaseTTL/4); err != nil {
		r.log.Warn("controller heartbeat", "err", err)
	}
}
