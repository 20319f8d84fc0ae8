package linkproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sort"
	"sync"
	"time"
)

// Placement puts members (node names) in zones: every pair of members in different zones is
// Between apart, each way (a round trip between zones is twice Between's delay).
type Placement struct {
	Zones   map[string][]string `json:"zones"`
	Between Shape               `json:"between_zones"`
}

// IsZero reports a placement with no zones: every member side by side, nothing delayed.
func (p Placement) IsZero() bool { return len(p.Zones) == 0 && p.Between == Shape{} }

// ErrPlacement is the class of every error in a placement.
var ErrPlacement = errors.New("placement")

// Validate checks that every member is in exactly one zone and that names are given.
func (p Placement) Validate() error {
	seen := map[string]string{}
	for _, z := range slices.Sorted(maps.Keys(p.Zones)) {
		if z == "" {
			return fmt.Errorf("%w: a zone has no name", ErrPlacement)
		}
		if len(p.Zones[z]) == 0 {
			return fmt.Errorf("%w: zone %q has no members", ErrPlacement, z)
		}
		for _, m := range p.Zones[z] {
			if m == "" {
				return fmt.Errorf("%w: zone %q has a member with no name", ErrPlacement, z)
			}
			if other, ok := seen[m]; ok {
				return fmt.Errorf("%w: %s is in zone %q and in zone %q; a member is in one zone", ErrPlacement, m, other, z)
			}
			seen[m] = z
		}
	}
	if err := p.Between.Validate(); err != nil {
		return fmt.Errorf("%w: between_zones: %v", ErrPlacement, err)
	}
	return nil
}

// ZoneOf is the zone a member is in ("" when it is in none).
func (p Placement) ZoneOf(member string) string {
	for z, ms := range p.Zones {
		if slices.Contains(ms, member) {
			return z
		}
	}
	return ""
}

// MeshOptions configure a Mesh.
type MeshOptions struct {
	Placement Placement
	// Hosts is each member's own address (an IP): the links a member dials out through listen
	// there. Every member of the placement needs one.
	Hosts map[string]string
	// SameZone also puts an undelayed link between members of one zone, so that Cut can
	// isolate any member from any other.
	SameZone bool
	Seed     uint64
	Logger   *slog.Logger
}

// PairLink is the link a member (From) dials to reach Target, a service of member To.
type PairLink struct {
	From, To, Target string
	Link             *Link
}

// Mesh holds the links of a placement, made as routes are asked for.
type Mesh struct {
	o     MeshOptions
	log   *slog.Logger
	mu    sync.Mutex
	links []PairLink
	byKey map[[2]string]*Link // (from, target)
	seq   uint64
	added map[*Link][]*Shape // shapes added on top of a link's zone shape (AddShape), not yet taken off
}

// NewMesh checks the placement; links are made by Route.
func NewMesh(o MeshOptions) (*Mesh, error) {
	if err := o.Placement.Validate(); err != nil {
		return nil, err
	}
	for _, ms := range o.Placement.Zones {
		for _, m := range ms {
			h, ok := o.Hosts[m]
			if !ok || net.ParseIP(h) == nil {
				return nil, fmt.Errorf("%w: member %s has no host address (got %q)", ErrPlacement, m, h)
			}
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Mesh{o: o, log: o.Logger, byKey: map[[2]string]*Link{}, added: map[*Link][]*Shape{}}, nil
}

// Route is the address member from dials to reach target, a service of member to: target
// itself for two members of one zone (unless SameZone), else a link's address on from's host
// that forwards to target with the between-zones shape each way.
func (m *Mesh) Route(ctx context.Context, from, to, target string) (string, error) {
	zf, zt := m.o.Placement.ZoneOf(from), m.o.Placement.ZoneOf(to)
	if zf == "" || zt == "" {
		return "", fmt.Errorf("%w: route %s → %s: %s is in no zone", ErrPlacement, from, to, map[bool]string{true: from, false: to}[zf == ""])
	}
	if zf == zt && !m.o.SameZone {
		return target, nil
	}
	shape := m.zoneShape(from, to)
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.byKey[[2]string{from, target}]; ok {
		return l.Addr(), nil
	}
	m.seq++
	l, err := Start(ctx, Options{Listen: net.JoinHostPort(m.o.Hosts[from], "0"), Target: target,
		Up: shape, Down: shape, Seed: m.o.Seed + m.seq, Logger: m.log.With("from", from, "to", to)})
	if err != nil {
		return "", fmt.Errorf("route %s → %s (%s): %w", from, to, target, err)
	}
	m.byKey[[2]string{from, target}] = l
	m.links = append(m.links, PairLink{From: from, To: to, Target: target, Link: l})
	return l.Addr(), nil
}

// zoneShape is what the placement puts on each way between two members: nothing within a zone.
func (m *Mesh) zoneShape(from, to string) Shape {
	if m.o.Placement.ZoneOf(from) == m.o.Placement.ZoneOf(to) {
		return Shape{}
	}
	return m.o.Placement.Between
}

// AddShape adds s (delay and jitter) to each way of every link between member and any of peers
// (no peers: every link to or from member), on top of the shape the placement gives it. It
// returns the pairs it changed and a function that takes s off them again (once), which
// returns how many links it changed back. Added shapes add up: two at once on a link delay it
// by both. Only links made so far are changed (a run makes every route before its timeline).
func (m *Mesh) AddShape(s Shape, member string, peers ...string) ([]PairLink, func() int, error) {
	if err := s.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%w: added shape: %v", ErrPlacement, err)
	}
	between := func(pl PairLink) bool {
		if len(peers) == 0 {
			return pl.From == member || pl.To == member
		}
		return (pl.From == member && slices.Contains(peers, pl.To)) || (pl.To == member && slices.Contains(peers, pl.From))
	}
	add := &s
	var changed []PairLink
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, pl := range m.links {
		if between(pl) {
			m.added[pl.Link] = append(m.added[pl.Link], add)
			m.reshape(pl)
			changed = append(changed, pl)
		}
	}
	var once sync.Once
	undo := func() int {
		n := 0
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, pl := range changed {
				m.added[pl.Link] = slices.DeleteFunc(m.added[pl.Link], func(a *Shape) bool { return a == add })
				m.reshape(pl)
				n++
			}
		})
		return n
	}
	return changed, undo, nil
}

// reshape sets a link's shapes to its zone shape plus every shape added to it (m.mu held).
func (m *Mesh) reshape(pl PairLink) {
	s := m.zoneShape(pl.From, pl.To)
	for _, a := range m.added[pl.Link] {
		s.Delay += a.Delay
		s.Jitter += a.Jitter
	}
	if len(m.added[pl.Link]) == 0 {
		delete(m.added, pl.Link)
	}
	// Each term has its jitter within its delay, so the sum does too: SetShapes cannot refuse it.
	_ = pl.Link.SetShapes(s, s)
}

// Links are the links made so far, by from, to, target.
func (m *Mesh) Links() []PairLink {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.links)
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.From != b.From {
			return a.From < b.From
		}
		if a.To != b.To {
			return a.To < b.To
		}
		return a.Target < b.Target
	})
	return out
}

// Isolate cuts every link to or from one of the members; it returns how many it cut.
func (m *Mesh) Isolate(members ...string) int {
	n := 0
	for _, pl := range m.Links() {
		if slices.Contains(members, pl.From) || slices.Contains(members, pl.To) {
			pl.Link.Cut()
			n++
		}
	}
	return n
}

// Heal heals every link.
func (m *Mesh) Heal() {
	for _, pl := range m.Links() {
		pl.Link.Heal()
	}
}

// PairProbe is the measured round trip from one member to another: Probe.Set and Jitter are
// what was asked (the link's shapes), the rest what it achieved. It is also how a run folder
// keeps it, with the host's load average after the probe.
type PairProbe struct {
	From    string    `json:"from"`
	To      string    `json:"to"`
	Target  string    `json:"target"`
	Probe   Probe     `json:"probe"`
	Error   string    `json:"error,omitempty"`
	LoadAvg []float64 `json:"load_avg,omitempty"` // 1, 5, 15 min, filled by whoever records it
}

// Check says how a pair's measured round trip misses the asked one (nil: within tolerance).
func (pp PairProbe) Check(tolerance float64, floor time.Duration) error {
	if pp.Error != "" {
		return fmt.Errorf("round trip %s → %s: %s", pp.From, pp.To, pp.Error)
	}
	if err := pp.Probe.Check(tolerance, floor); err != nil {
		return fmt.Errorf("round trip %s → %s: %w", pp.From, pp.To, err)
	}
	return nil
}

// Probe measures every pair's round trip, one link per ordered pair (the first made), one pair
// after the other so they do not share the CPU.
func (m *Mesh) Probe(ctx context.Context, o ProbeOptions) []PairProbe {
	return ProbePairs(ctx, m.Links(), o)
}

// ProbePairs measures the round trip of each ordered pair of pls through its first link, one
// pair after the other.
func ProbePairs(ctx context.Context, pls []PairLink, o ProbeOptions) []PairProbe {
	var out []PairProbe
	done := map[[2]string]bool{}
	for _, pl := range pls {
		k := [2]string{pl.From, pl.To}
		if done[k] {
			continue
		}
		done[k] = true
		p, err := pl.Link.Probe(ctx, o)
		pp := PairProbe{From: pl.From, To: pl.To, Target: pl.Target, Probe: p}
		if err != nil {
			pp.Error = err.Error()
		}
		out = append(out, pp)
	}
	return out
}

// Close closes every link.
func (m *Mesh) Close() error {
	m.mu.Lock()
	links := m.links
	m.links, m.byKey = nil, map[[2]string]*Link{}
	m.mu.Unlock()
	var errs []error
	for _, pl := range links {
		errs = append(errs, pl.Link.Close())
	}
	return errors.Join(errs...)
}
