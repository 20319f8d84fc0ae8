package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/internal/loadavg"
	"github.com/rig-dev/rig/linkproxy"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/target"
)

// linkers are the playbook's timeline entries that act on network links (actions.Linker).
func linkers(pb *playbooks.Playbook) []route {
	var out []route
	for i, a := range pb.Timeline {
		if l, ok := a.Spec.(actions.Linker); ok {
			out = append(out, route{a.Pos, fmt.Sprintf("timeline[%d] %s", i, l.Links())})
		}
	}
	return out
}

// route is what makes a run's links go through proxies, and where the playbook says so.
type route struct {
	pos  playbooks.Pos
	what string
}

// routes are what makes a run's links go through proxies: its placement and its linkers.
func routes(pb *playbooks.Playbook) []route {
	lk := linkers(pb)
	if !pb.Placement.IsZero() {
		lk = append([]route{{pb.PosOf("placement"), "placement: puts the nodes in zones (delays every link between zones)"}}, lk...)
	}
	return lk
}

// at is a place in the playbook as an error's prefix ("FILE:LINE:COLUMN: "), or "" where the
// playbook did not come from a file.
func at(p playbooks.Pos) string {
	if s := p.String(); s != "" {
		return s + ": "
	}
	return ""
}

// CheckTarget refuses a plan that needs what the target cannot do: a timeline that acts on
// network links, or a placement in zones, needs a target.Partitioner (the local target), and
// such a run's engines are reached through TCP proxies, which carry no UDP, so it cannot also
// send UDP bursts. rig run checks it before anything starts, rig validate for the target it is
// asked about.
func CheckTarget(plan *playbooks.Plan, t target.Target) error {
	var errs []error
	for _, pr := range plan.Runs {
		lk := routes(pr.Playbook)
		if len(lk) == 0 {
			continue
		}
		if _, ok := t.(target.Partitioner); !ok {
			errs = append(errs, fmt.Errorf("%s%s (run %d): target %s cannot cut or delay links between its nodes (it puts no proxy on them); run it on the local target, which routes every peer and client link through linkproxy",
				at(lk[0].pos), lk[0].what, pr.Index, t.Name()))
		}
		for i, a := range pr.Playbook.Timeline {
			if _, ok := a.Spec.(*actions.Burst); ok {
				errs = append(errs, fmt.Errorf("%stimeline[%d] burst (run %d): a run with %s cannot also burst: bursts are UDP datagrams, and the links are TCP proxies",
					at(a.Pos), i, pr.Index, lk[0].what))
			}
		}
		if len(errs) > 0 {
			break // every run of a plan has the same timeline kinds
		}
	}
	return errors.Join(append(errs, checkPowerCuts(plan, t)...)...)
}

// routeConfig puts server n's links to its peers through the cluster's proxies: each peer's raft
// address becomes n's route to it, and each peer's client address (what a follower hands a
// client in a NotLeader answer) the client's route to it, so a client that follows a redirect
// stays on its links. n's own addresses are the ones it listens on.
func (r *run) routeConfig(ctx context.Context, cfg engine.Config) (engine.Config, error) {
	lk, ok := r.cl.(target.Links)
	if !ok {
		return cfg, fmt.Errorf("the cluster of %s routes no links", r.opts.Target.Name())
	}
	peers := make([]engine.Peer, len(cfg.Peers))
	for i, p := range cfg.Peers {
		peers[i] = p
		if p.Node != cfg.Node {
			addr, err := lk.Route(ctx, cfg.Node, p.Node, p.RaftAddr)
			if err != nil {
				return cfg, fmt.Errorf("route %s's raft link to %s: %w", cfg.Node, p.Node, err)
			}
			peers[i].RaftAddr = addr
		}
		addr, err := lk.Route(ctx, r.client.Name, p.Node, p.ClientAddr)
		if err != nil {
			return cfg, fmt.Errorf("route %s's client link to %s: %w", r.client.Name, p.Node, err)
		}
		peers[i].ClientAddr = addr
	}
	cfg.Peers = peers
	return cfg, nil
}

// clientAddrs are the servers' client addresses as the load generator dials them: through its
// routes when the run's links are routed.
func (r *run) clientAddrs() []string {
	var out []string
	for _, s := range r.servers {
		addr := net.JoinHostPort(s.PrivateAddress, strconv.Itoa(clientPort))
		if r.routed {
			if lk, ok := r.cl.(target.Links); ok {
				// Made at engine start; asking again returns the same route.
				if ra, err := lk.Route(context.Background(), r.client.Name, s.Name, addr); err == nil {
					addr = ra
				}
			}
		}
		out = append(out, addr)
	}
	return out
}

// probeLinks measures, before load, the round trip of every pair of a placement's nodes through
// its route, records it beside the asked one with the load average, and stops the run when one is
// off the asked by more than linkproxy.Tolerance (+ Floor): the run would measure another distance.
func (r *run) probeLinks(ctx context.Context) error {
	if r.pb.Placement.IsZero() {
		return nil
	}
	probes, la, err := r.measureLinks(ctx, "before load")
	r.updateManifest(func(m *rundir.Manifest) { m.LinkRTTs = probes })
	if err != nil {
		return fmt.Errorf("links before load (load average %v): %w", la, err)
	}
	return nil
}

// probeLinksUnderLoad measures the links again with the run's traffic going through them, for
// the record (link_rtts_load): a proxy short of CPU delivers late, and a figure of the run then
// holds more distance than was asked. It warns, and does not stop the run, when one is off.
func (r *run) probeLinksUnderLoad(ctx context.Context) {
	probes, la, err := r.measureLinks(ctx, "under load")
	if ctx.Err() != nil {
		return // the load ended first: a cut-short probe says nothing
	}
	r.updateManifest(func(m *rundir.Manifest) { m.LinkRTTsLoad = probes })
	if err != nil {
		r.warn("links under load (load average %v), which the run's figures include: %v", la, err)
	}
}

// measureLinks probes every routed pair, stamps the load average, and says which are off.
func (r *run) measureLinks(ctx context.Context, when string) ([]linkproxy.PairProbe, []float64, error) {
	lk, ok := r.cl.(target.Links)
	if !ok {
		return nil, nil, fmt.Errorf("the cluster of %s routes no links", r.opts.Target.Name())
	}
	probes := lk.ProbeLinks(ctx)
	la := loadavg.Now()
	var errs []error
	lo, hi, n := map[time.Duration]time.Duration{}, map[time.Duration]time.Duration{}, map[time.Duration]int{}
	for i := range probes {
		pp := &probes[i]
		pp.LoadAvg = la
		if err := pp.Check(linkproxy.Tolerance, linkproxy.Floor); err != nil {
			errs = append(errs, err)
			continue
		}
		set, med := pp.Probe.Set, pp.Probe.Median
		if l, ok := lo[set]; !ok || med < l {
			lo[set] = med
		}
		hi[set] = max(hi[set], med)
		n[set]++
	}
	for _, set := range slices.Sorted(maps.Keys(lo)) {
		r.progress("links %s: round trip asked %v, achieved medians %v..%v (%d pairs)", when, set,
			lo[set].Round(time.Microsecond), hi[set].Round(time.Microsecond), n[set])
	}
	return probes, la, errors.Join(errs...)
}

// Isolate and Heal act on the cluster's links (actions.Env).
func (e env) Isolate(_ context.Context, nodes ...string) (int, error) {
	lk, err := e.links()
	if err != nil {
		return 0, err
	}
	return lk.Isolate(nodes...), nil
}

func (e env) Heal(_ context.Context, nodes ...string) (int, error) {
	lk, err := e.links()
	if err != nil {
		return 0, err
	}
	return lk.Heal(nodes...), nil
}

// delayProbe is how a delay action measures the pairs it changed: a few round trips each, so the
// timeline is held up by little more than them.
var delayProbe = linkproxy.ProbeOptions{Count: actions.DelayProbeRounds}

func (e env) Delay(ctx context.Context, shape linkproxy.Shape, node string, peers ...string) ([]linkproxy.PairProbe, int, func() int, error) {
	lk, err := e.links()
	if err != nil {
		return nil, 0, nil, err
	}
	pls, undo, err := lk.AddShape(shape, node, peers...)
	if err != nil {
		return nil, 0, nil, err
	}
	rtts := linkproxy.ProbePairs(ctx, pls, delayProbe)
	la := loadavg.Now()
	for i := range rtts {
		rtts[i].LoadAvg = la
	}
	return rtts, len(pls), undo, nil
}

func (e env) links() (target.Links, error) {
	lk, ok := e.r.cl.(target.Links)
	if !e.r.routed || !ok {
		return nil, errors.New("this run's links are not routed through proxies (no action of its timeline acts on links, and it has no placement)")
	}
	return lk, nil
}
