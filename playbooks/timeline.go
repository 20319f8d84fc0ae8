package playbooks

import (
	"bytes"
	"encoding/json"
	"fmt"
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
}

func (e entryView) Value(key, base string) string { return e.v(e.path+key, base) }
func (e entryView) Varies(key string) bool        { return isVaried(e.v, e.path+key) }
func (e entryView) At() time.Duration             { return e.a.At }
