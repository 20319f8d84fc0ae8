package playbooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rig-dev/rig/actions"
)

// MarshalJSON writes the entry as {"at", "kind", "<kind>": settings}, the settings omitted for a
// kind that has none.
func (a Action) MarshalJSON() ([]byte, error) {
	head, err := json.Marshal(struct {
		At   time.Duration `json:"at"`
		Kind string        `json:"kind"`
	}{a.At, a.Kind})
	if err != nil || a.Spec == nil || len(a.Spec.Fields()) == 0 {
		return head, err
	}
	kind, _ := json.Marshal(a.Kind)
	body, err := json.Marshal(a.Spec)
	if err != nil {
		return nil, fmt.Errorf("timeline entry %s: %w", a.Kind, err)
	}
	out := append(head[:len(head)-1], ',')
	out = append(append(append(out, kind...), ':'), body...)
	return append(out, '}'), nil
}

// UnmarshalJSON reads what MarshalJSON wrote, the settings into the kind's Spec.
func (a *Action) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*a = Action{}
	if at, ok := raw["at"]; ok {
		if err := json.Unmarshal(at, &a.At); err != nil {
			return fmt.Errorf("timeline entry at: %w", err)
		}
	}
	if err := json.Unmarshal(raw["kind"], &a.Kind); err != nil {
		return fmt.Errorf("timeline entry kind: %w", err)
	}
	spec, ok := actions.New(a.Kind)
	if !ok {
		return fmt.Errorf("timeline entry: unknown action kind %q; known: %v", a.Kind, actions.Names())
	}
	if body, ok := raw[a.Kind]; ok && !bytes.Equal(body, []byte("null")) {
		if err := json.Unmarshal(body, spec); err != nil {
			return fmt.Errorf("timeline entry %s: %w", a.Kind, err)
		}
	}
	a.Spec = spec
	return nil
}

// entryView is what an entry's plan line sees of the plan: its keys' values or matrix lists.
type entryView struct {
	a    Action
	path string // timeline[i].<kind>.
	v    func(path, base string) string
	c    actions.Context
}

func (e entryView) Context() actions.Context { return e.c }

func (e entryView) Value(key, base string) string { return e.v(e.path+key, base) }
func (e entryView) Varies(key string) bool        { return isVaried(e.v, e.path+key) }
func (e entryView) At() time.Duration             { return e.a.At }

// downSpan is one node a timeline entry takes down (actions.Downer), or holds while it lasts (a
// lasting actions.Toucher), by the nominal schedule: a wait_for can only delay later entries,
// and a stack's power loss may keep a node away longer.
type downSpan struct {
	idx         int    // the entry
	node        string // as the entry names it: node-N or a role
	kind        string // the entry's kind, for messages
	layer       actions.Layer
	from, until time.Duration
}

// downAt says whether the span has its node down at t; until < 0 is for the rest of the run.
func (d downSpan) downAt(t time.Duration) bool { return d.from <= t && (d.until < 0 || t < d.until) }

// sameNode says whether the span is certainly node: roles resolve when an entry runs, to a node
// that is up, so only node-N can name a node that is already down.
func (d downSpan) sameNode(node string) bool { return d.node == node && actions.IsNodeN(node) }

// downStep is one entry as the timeline's state sees it: what it acts on and needs (touch), what
// it takes down (down, nil for none), what is already down at its offset, and how many servers
// that leaves down.
type downStep struct {
	idx   int
	at    time.Duration
	touch actions.Touch
	down  *actions.Down
	still []downSpan // down at its offset before it acts
	again []downSpan // of still, those that have a layer the entry needs of a node-N it names down
	held  []downSpan // lasting entries that need a layer this takes down of a node-N, meanwhile
}

// count is how many servers are down once the entry has acted.
func (s downStep) count() int {
	if s.down == nil {
		return len(s.still)
	}
	return len(s.still) + len(s.down.Nodes)
}

// touchOf is what an entry acts on and needs, and what it takes down: a Downer touches the nodes
// it takes down, needing their links (a node that is down cannot be taken down again).
func touchOf(spec actions.Spec) (actions.Touch, *actions.Down, bool) {
	var down *actions.Down
	if dn, ok := spec.(actions.Downer); ok {
		d := dn.Down()
		if len(d.Nodes) == 0 {
			return actions.Touch{}, nil, false
		}
		if d.Takes == 0 {
			d.Takes = actions.LayerLinks // down is at least out of the majority
		}
		down = &d
	}
	if t, ok := spec.(actions.Toucher); ok {
		return t.Touches(), down, true
	}
	if down != nil {
		return actions.Touch{Nodes: down.Nodes, Needs: actions.LayerLinks}, down, true
	}
	return actions.Touch{}, nil, false
}

// walkDowns is the one owner of "which nodes are down when": it walks p's timeline in order
// and calls visit for each entry that acts on nodes or takes them down (actions.Toucher,
// actions.Downer), with the spans down at its offset. skip(i) leaves an entry out (a node
// reference that failed to check). An entry refused here (again or held) adds nothing to the
// state, so it does not cascade into problems of the entries after it.
// It returns every span it took down.
func walkDowns(p *Playbook, skip func(i int) bool, visit func(s downStep)) []downSpan {
	var spans, holds []downSpan
	for i, a := range p.Timeline {
		t, d, ok := touchOf(a.Spec)
		if !ok || slices.Contains(t.Nodes, "") || (skip != nil && skip(i)) {
			continue
		}
		s := downStep{idx: i, at: a.At, touch: t, down: d}
		for _, o := range spans {
			if !o.downAt(a.At) {
				continue
			}
			s.still = append(s.still, o)
			if t.Needs > 0 && o.layer >= t.Needs && slices.ContainsFunc(t.Nodes, o.sameNode) {
				s.again = append(s.again, o)
			}
		}
		if d != nil {
			for _, h := range holds {
				if h.downAt(a.At) && d.Takes >= h.layer && slices.ContainsFunc(d.Nodes, h.sameNode) {
					s.held = append(s.held, h)
				}
			}
		}
		visit(s)
		if len(s.again) > 0 || len(s.held) > 0 {
			continue
		}
		if t.For > 0 && t.Needs > 0 {
			for _, n := range t.Nodes {
				holds = append(holds, downSpan{idx: i, node: n, kind: a.Kind, layer: t.Needs, from: a.At, until: a.At + t.For})
			}
		}
		if d == nil {
			continue
		}
		until := time.Duration(-1)
		if d.For > 0 {
			until = a.At + d.For
		}
		for _, n := range d.Nodes {
			spans = append(spans, downSpan{idx: i, node: n, kind: a.Kind, layer: d.Takes, from: a.At, until: until})
		}
	}
	return spans
}

// AllDown is a moment the timeline has every server down at once, which the playbook allows
// (allow_all_down) and the plan names.
type AllDown struct {
	At      time.Duration // when the last one goes down
	Until   time.Duration // when the first one is back; < 0: never, inside the run
	Entries []int         // the timeline entries that took them down
}

// AllDowns are the moments p's timeline has every server down at once.
func (p *Playbook) AllDowns() []AllDown {
	var out []AllDown
	walkDowns(p, nil, func(s downStep) {
		if s.down == nil || len(s.again) > 0 || len(s.held) > 0 || s.count() < p.Cluster.Servers {
			return
		}
		ad := AllDown{At: s.at, Until: -1, Entries: []int{}}
		if s.down.For > 0 {
			ad.Until = s.at + s.down.For
		}
		for _, o := range s.still {
			if o.until >= 0 && (ad.Until < 0 || o.until < ad.Until) {
				ad.Until = o.until
			}
			if !slices.Contains(ad.Entries, o.idx) {
				ad.Entries = append(ad.Entries, o.idx)
			}
		}
		out = append(out, AllDown{At: ad.At, Until: ad.Until, Entries: append(ad.Entries, s.idx)})
	})
	return out
}

// describeSpans lists spans for messages: "timeline[0] node-1, timeline[1] leader".
func describeSpans(spans []downSpan) string {
	names := make([]string, len(spans))
	for k, o := range spans {
		names[k] = fmt.Sprintf("timeline[%d] %s", o.idx, o.node)
	}
	return strings.Join(names, ", ")
}

// CPUCrowd is the moment a timeline's CPU hogs (actions.Spinner) on one host ask for the most
// busy threads at once, when that is more than the host has CPUs.
type CPUCrowd struct {
	At      time.Duration
	Entries []int // the hogs spinning then
	Threads int   // their busy threads together
	Nice    int   // the lowest nice among them
}

// CPUCrowd is that moment of p's timeline with every node on one host of cpus CPUs (the local
// target), if there is one.
func (p *Playbook) CPUCrowd(cpus int) (CPUCrowd, bool) {
	var best CPUCrowd
	for _, a := range p.Timeline {
		if _, ok := a.Spec.(actions.Spinner); !ok {
			continue
		}
		// The busiest moment starts with a hog: sum those spinning when entry i starts.
		c := CPUCrowd{At: a.At}
		first := true
		for j, b := range p.Timeline {
			sp, ok := b.Spec.(actions.Spinner)
			if !ok {
				continue
			}
			s := sp.Spins(cpus)
			if b.At > a.At || b.At+s.For <= a.At {
				continue
			}
			c.Entries = append(c.Entries, j)
			c.Threads += s.Threads
			if first || s.Nice < c.Nice {
				c.Nice, first = s.Nice, false
			}
		}
		if c.Threads > best.Threads {
			best = c
		}
	}
	return best, best.Threads > cpus
}
