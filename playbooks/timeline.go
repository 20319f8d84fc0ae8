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

// downSpan is one node a timeline entry takes down (actions.Downer), by the nominal schedule: a
// wait_for can only delay later entries, and a stack's power loss may keep a node away longer.
type downSpan struct {
	idx         int    // the entry
	node        string // as the entry names it: node-N or a role
	kind        string // the entry's kind, for messages
	from, until time.Duration
}

// downAt says whether the span has its node down at t; until < 0 is for the rest of the run.
func (d downSpan) downAt(t time.Duration) bool { return d.from <= t && (d.until < 0 || t < d.until) }

// sameNode says whether the span is certainly node: roles resolve when an entry runs, to a node
// that is up, so only node-N can name a node that is already down.
func (d downSpan) sameNode(node string) bool { return d.node == node && actions.IsNodeN(node) }

// downStep is one Downer entry as the timeline's state sees it: what it takes down, what is
// already down at its offset, and how many servers that leaves down.
type downStep struct {
	idx   int
	at    time.Duration
	down  actions.Down
	still []downSpan // down at its offset before it acts
	again []downSpan // of still, those that hold a node the entry names (it cannot take it again)
}

// count is how many servers are down once the entry has acted.
func (s downStep) count() int { return len(s.still) + len(s.down.Nodes) }

// walkDowns is the one owner of "which nodes are down when": it walks p's timeline in order
// and calls visit for each entry that takes nodes down (actions.Downer), with the spans down at
// its offset. skip(i) leaves an entry out (a node reference that failed to check). An entry
// that names a node already down adds nothing to the state, so a refused entry does not
// cascade into problems of the entries after it.
// It returns every span it added.
func walkDowns(p *Playbook, skip func(i int) bool, visit func(s downStep)) []downSpan {
	var spans []downSpan
	for i, a := range p.Timeline {
		dn, ok := a.Spec.(actions.Downer)
		if !ok || (skip != nil && skip(i)) {
			continue
		}
		d := dn.Down()
		if len(d.Nodes) == 0 || slices.Contains(d.Nodes, "") {
			continue
		}
		s := downStep{idx: i, at: a.At, down: d}
		for _, o := range spans {
			if !o.downAt(a.At) {
				continue
			}
			s.still = append(s.still, o)
			for _, n := range d.Nodes {
				if o.sameNode(n) {
					s.again = append(s.again, o)
				}
			}
		}
		visit(s)
		if len(s.again) > 0 {
			continue
		}
		until := time.Duration(-1)
		if d.For > 0 {
			until = a.At + d.For
		}
		for _, n := range d.Nodes {
			spans = append(spans, downSpan{idx: i, node: n, kind: a.Kind, from: a.At, until: until})
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
		if len(s.again) > 0 || s.count() < p.Cluster.Servers {
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
