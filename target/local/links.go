package local

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/rig-dev/rig/linkproxy"
	"github.com/rig-dev/rig/target"
)

// Partitions: with StartOptions.Links, every engine link of a run goes through a user-space TCP
// proxy (linkproxy) on the dialing node's own address, since this kernel has no netem qdisc; with
// StartOptions.Placement, every link between two zones does, delayed by the placement's shape.
func (t *Target) Partitions() string {
	return "a user-space TCP proxy (linkproxy) on every raft peer and client link, in the controller"
}

// links is the cluster's mesh: the playbook's zones (or every node in one zone), with a link on
// every pair between zones and, when links are to be cut (StartOptions.Links), on every pair it
// is asked to route, so any node can be cut off from any other.
type links struct {
	mesh *linkproxy.Mesh
	mu   sync.Mutex
	cut  map[string]bool // nodes cut off and not healed yet
}

func (c *Cluster) startLinks(so target.StartOptions) error {
	zone := make([]string, 0, len(c.inv.Nodes))
	hosts := map[string]string{}
	for _, n := range c.inv.Nodes {
		zone = append(zone, n.Name)
		hosts[n.Name] = n.Address
	}
	pl := so.Placement
	if pl.IsZero() {
		pl = linkproxy.Placement{Zones: map[string][]string{"local": zone}}
	}
	m, err := linkproxy.NewMesh(linkproxy.MeshOptions{
		Placement: pl, Hosts: hosts, SameZone: so.Links, Logger: c.log.With("part", "linkproxy"),
	})
	if err != nil {
		return fmt.Errorf("link mesh: %w", err)
	}
	c.links = &links{mesh: m, cut: map[string]bool{}}
	return nil
}

var errNoLinks = errors.New("this cluster was started without routed links (StartOptions.Links)")

// Route is a proxy on from's address that forwards to addr (a service of node to).
func (c *Cluster) Route(ctx context.Context, from, to, addr string) (string, error) {
	if c.links == nil {
		return "", errNoLinks
	}
	return c.links.mesh.Route(ctx, from, to, addr)
}

// ProbeLinks measures every routed pair's round trip.
func (c *Cluster) ProbeLinks(ctx context.Context) []linkproxy.PairProbe {
	if c.links == nil {
		return nil
	}
	return c.links.mesh.Probe(ctx, linkproxy.ProbeOptions{})
}

// AddShape adds shape to the links between node and peers (every link of node without peers).
func (c *Cluster) AddShape(shape linkproxy.Shape, node string, peers ...string) ([]linkproxy.PairLink, func() int, error) {
	if c.links == nil {
		return nil, nil, errNoLinks
	}
	return c.links.mesh.AddShape(shape, node, peers...)
}

// Isolate cuts every link to or from the nodes.
func (c *Cluster) Isolate(nodes ...string) int {
	l := c.links
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range nodes {
		l.cut[n] = true
	}
	return l.mesh.Isolate(nodes...)
}

// Heal heals every link to or from the nodes, but for links to a node still cut off by another
// Isolate.
func (c *Cluster) Heal(nodes ...string) int {
	l := c.links
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range nodes {
		delete(l.cut, n)
	}
	healed := 0
	for _, pl := range l.mesh.Links() {
		if (slices.Contains(nodes, pl.From) || slices.Contains(nodes, pl.To)) && !l.cut[pl.From] && !l.cut[pl.To] {
			pl.Link.Heal()
			healed++
		}
	}
	return healed
}
