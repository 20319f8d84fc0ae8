package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/target"
)

// linkers are the playbook's timeline entries that act on network links (actions.Linker), as
// "timeline[i] what it does".
func linkers(pb *playbooks.Playbook) []string {
	var out []string
	for i, a := range pb.Timeline {
		if l, ok := a.Spec.(actions.Linker); ok {
			out = append(out, fmt.Sprintf("timeline[%d] %s", i, l.Links()))
		}
	}
	return out
}

// CheckTarget refuses a plan that needs what the target cannot do: a timeline that acts on
// network links needs a target.Partitioner (the local target), and such a run's engines are
// reached through TCP proxies, which carry no UDP, so it cannot also send UDP bursts. rig run
// checks it before anything starts, rig validate for the target it is asked about.
func CheckTarget(plan *playbooks.Plan, t target.Target) error {
	var errs []error
	for _, pr := range plan.Runs {
		lk := linkers(pr.Playbook)
		if len(lk) == 0 {
			continue
		}
		if _, ok := t.(target.Partitioner); !ok {
			errs = append(errs, fmt.Errorf("run %d: %s: target %s cannot cut links between its nodes (it puts no proxy on them); run it on the local target, which routes every peer and client link through linkproxy",
				pr.Index, lk[0], t.Name()))
		}
		for i, a := range pr.Playbook.Timeline {
			if _, ok := a.Spec.(*actions.Burst); ok {
				errs = append(errs, fmt.Errorf("run %d: timeline[%d] burst: a timeline that %s cannot also burst: bursts are UDP datagrams, and the links are TCP proxies",
					pr.Index, i, lk[0]))
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

func (e env) links() (target.Links, error) {
	lk, ok := e.r.cl.(target.Links)
	if !e.r.routed || !ok {
		return nil, errors.New("this run's links are not routed through proxies (no action of its timeline acts on links)")
	}
	return lk, nil
}
