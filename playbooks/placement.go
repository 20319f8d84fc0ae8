package playbooks

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/linkproxy"
)

// The placement: block puts the cluster's nodes in zones with a distance between them
// (linkproxy.Placement; on the local target every link between zones goes through a delaying
// proxy). Its zones are fixed; the distance's fields are matrix axes (placement.between_zones.delay).
var placementKeys = []string{"zones", "between_zones"}

const betweenPath = "placement.between_zones"

// betweenKeys are the distance's fields (a section at betweenPath), and placementFields them
// as static fields.
var (
	betweenKeys     = []string{"delay", "jitter"}
	placementFields = map[string]field{
		betweenPath + ".delay": durationField(0, time.Second,
			"a duration from 0 to 1s: each way between two zones, so a round trip is twice it, e.g. 1ms",
			func(p *Playbook) *time.Duration { return &p.Placement.Between.Delay }),
		betweenPath + ".jitter": durationField(0, time.Second,
			"a duration from 0 to 1s, at most the delay: each chunk's delay is drawn uniformly within ± it, e.g. 100us",
			func(p *Playbook) *time.Duration { return &p.Placement.Between.Jitter }),
	}
)

// placement reads the placement: block. A node listed twice is reported here, where the file's
// order says which listing came first; the rules that depend on the cluster's size are check's.
func (r *reader) placement(p *Playbook, n ast.Node) {
	r.pos["placement"] = r.nodePos(n)
	pairs, ok := r.mapping(n, "placement", "a mapping with "+strings.Join(placementKeys, ", "))
	if !ok {
		r.failed["placement"] = true
		return
	}
	for _, kv := range pairs {
		key, ok := r.key(kv, "placement", placementKeys)
		if !ok {
			continue
		}
		switch key {
		case "zones":
			r.zones(p, kv.Value)
		case "between_zones":
			r.section(p, betweenPath, kv.Value)
		}
	}
	if len(p.Placement.Zones) == 0 && !r.failed["placement.zones"] {
		r.probs.add(r.pos["placement"], "placement.zones", "missing; want the zones and their nodes, e.g. zones: {a: [node-0, client-0], b: [node-1], c: [node-2]}")
		r.failed["placement.zones"] = true
	}
}

func (r *reader) zones(p *Playbook, n ast.Node) {
	const path = "placement.zones"
	pairs, ok := r.mapping(n, path, "a mapping of zone name to its nodes, e.g. {a: [node-0, client-0], b: [node-1], c: [node-2]}")
	if !ok {
		r.failed[path] = true
		return
	}
	p.Placement.Zones = map[string][]string{}
	first := map[string]string{} // node → the path of its first listing
	for _, kv := range pairs {
		name, ok := r.keyText(kv)
		if !ok {
			continue
		}
		zpath := path + "." + name
		r.pos[zpath] = r.nodePos(kv.Key)
		if !validName(name) {
			r.probs.add(r.nodePos(kv.Key), zpath, "%q is not a zone name; want 1-64 of a-z A-Z 0-9 . _ - starting with a letter or digit", name)
			r.failed[path] = true
		}
		vn := r.deref(kv.Value)
		seq, ok := vn.(*ast.SequenceNode)
		if !ok || len(seq.Values) == 0 {
			got := describe(vn)
			if ok {
				got = "an empty list"
			}
			r.probs.add(r.nodePos(kv.Value), zpath, "want a non-empty list of nodes, e.g. [node-0, client-0], got %s", got)
			r.failed[path] = true
			continue
		}
		members := []string{}
		for j, v := range seq.Values {
			mpath := fmt.Sprintf("%s[%d]", zpath, j)
			r.pos[mpath] = r.nodePos(v)
			m, ok := r.scalar(v, mpath)
			if !ok {
				r.failed[path] = true
				continue
			}
			if at, dup := first[m]; dup {
				r.probs.add(r.nodePos(v), mpath, "%s is already in %s; a node is in one zone", m, at)
				r.failed[path] = true
				continue
			}
			first[m] = mpath
			members = append(members, m)
		}
		p.Placement.Zones[name] = members
	}
}

// checkPlacement is the placement's rules against the cluster: every member is one of its nodes
// and every node is in a zone; and the jitter is within the delay (a matrix may vary either).
func checkPlacement(p *Playbook, add func(path, rule string, deps []string, format string, args ...any)) {
	pl := p.Placement
	if pl.IsZero() {
		return
	}
	if pl.Between.Jitter > pl.Between.Delay {
		add(betweenPath+".jitter", "zone-jitter", []string{betweenPath + ".delay"},
			"%s is more than the delay (%s); want at most the delay, so that no chunk is due before it was sent and the mean stays the delay",
			units.FormatDuration(pl.Between.Jitter), units.FormatDuration(pl.Between.Delay))
	}
	nodes := map[string]bool{}
	for i := range p.Cluster.Servers {
		nodes[inventory.ServerName(i)] = false
	}
	for i := range p.Cluster.Clients {
		nodes[inventory.ClientName(i)] = false
	}
	deps := []string{"cluster.servers", "cluster.clients"}
	for _, z := range slices.Sorted(maps.Keys(pl.Zones)) {
		for j, m := range pl.Zones[z] {
			if _, ok := nodes[m]; !ok {
				add(fmt.Sprintf("placement.zones.%s[%d]", z, j), "zone-member", deps,
					"%q is not a node of the cluster; want one of %s", m, clusterNodes(p))
				continue
			}
			nodes[m] = true
		}
	}
	var missing []string
	for i := range p.Cluster.Servers {
		if n := inventory.ServerName(i); !nodes[n] {
			missing = append(missing, n)
		}
	}
	for i := range p.Cluster.Clients {
		if n := inventory.ClientName(i); !nodes[n] {
			missing = append(missing, n)
		}
	}
	// The links are probed before load (and again under load): its round trips between zones
	// must stay within MaxLinkProbe, or the run's start waits minutes for them.
	if len(missing) == 0 {
		if _, between, least, _ := p.linkProbe(); least > MaxLinkProbe {
			most := MaxLinkProbe / time.Duration(between*linkproxy.DefaultProbeCount*2)
			add(betweenPath+".delay", "zone-probe", append(deps, "placement.zones"),
				"the links' probe before load measures %d round trips on each of %d pairs between zones, at least %s at this delay, more than the %s it may take; want delay at most %s",
				linkproxy.DefaultProbeCount, between, units.FormatDuration(least), units.FormatDuration(MaxLinkProbe), units.FormatDuration(most.Truncate(time.Microsecond)))
		}
	}
	if len(missing) > 0 {
		verb := "is"
		if len(missing) > 1 {
			verb = "are"
		}
		add("placement.zones", "zone-missing", deps, "%s %s in no zone; with a placement every node of the cluster (%s) is in one zone",
			strings.Join(missing, ", "), verb, clusterNodes(p))
	}
}

// MaxLinkProbe is the longest a placement's probe of its links before load may take by its round
// trips alone (they are measured one pair after the other).
const MaxLinkProbe = 60 * time.Second

// linkProbe is what the probe of a placement's links costs (runner probeLinks: every routed
// pair, DefaultProbeCount round trips each, before load and again halfway through it): the
// pairs (every server to every other, each client to every server), those between zones, the
// least time its round trips take, and its bound (linkproxy.ProbeTimeout a pair).
func (p *Playbook) linkProbe() (pairs, between int, least, bound time.Duration) {
	zone := map[string]string{}
	for z, ms := range p.Placement.Zones {
		for _, m := range ms {
			zone[m] = z
		}
	}
	d := p.Placement.Between
	pair := func(a, b string) {
		pairs++
		rtt := time.Duration(0)
		if zone[a] != zone[b] {
			between++
			least += time.Duration(linkproxy.DefaultProbeCount) * 2 * d.Delay
			rtt = 2 * (d.Delay + d.Jitter)
		}
		bound += linkproxy.ProbeTimeout(linkproxy.DefaultProbeCount, rtt)
	}
	for i := range p.Cluster.Servers {
		for j := range p.Cluster.Servers {
			if i != j {
				pair(inventory.ServerName(i), inventory.ServerName(j))
			}
		}
		for c := range p.Cluster.Clients {
			pair(inventory.ClientName(c), inventory.ServerName(i))
		}
	}
	return pairs, between, least, bound
}

// clusterNodes names the cluster's nodes, e.g. "node-0..node-2, client-0".
func clusterNodes(p *Playbook) string {
	span := func(name func(int) string, n int) string {
		if n == 1 {
			return name(0)
		}
		return name(0) + ".." + name(n-1)
	}
	return span(inventory.ServerName, p.Cluster.Servers) + ", " + span(inventory.ClientName, p.Cluster.Clients)
}
