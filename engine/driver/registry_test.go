package driver

import (
	"strings"
	"testing"

	"github.com/rig-dev/rig/engine"
)

type named string

func (n named) Name() string                  { return string(n) }
func (n named) Settings(Table) (Table, error) { return Contract, nil }

// A registry offers exactly the drivers it was built with, and says which when asked for another.
func TestRegistryOffersWhatItWasGiven(t *testing.T) {
	r := NewRegistry(named("b"), named("a"))
	if d, err := r.Lookup("a"); err != nil || d.Name() != "a" {
		t.Fatalf("Lookup(a) = %v, %v", d, err)
	}
	if _, err := r.Lookup("c"); err == nil || !strings.Contains(err.Error(), `"c" is not an engine driver; want a or b`) {
		t.Errorf("Lookup(c): %v", err)
	}
	if _, err := (*Registry)(nil).Lookup("a"); err == nil {
		t.Error("a nil registry offered a driver")
	}
	defer func() {
		if recover() == nil {
			t.Error("two drivers of one name did not panic")
		}
	}()
	NewRegistry(named("a"), named("a"))
}

// The value in effect is the servers' one, read by its kind; differing is said against the asked.
func TestResolvedInEffect(t *testing.T) {
	r := Resolved{Driver: "x", Table: Contract, Asked: Values{SyncLevel: "2", HeartbeatTimeout: "200ms"}}
	eff := map[string]engine.Reported{
		"node-0": {SyncLevel: float64(0), HeartbeatTimeout: float64(200_000_000)},
		"node-1": {SyncLevel: float64(0), HeartbeatTimeout: "200ms"},
	}
	if s, ok := r.InEffect(SyncLevel, eff); !ok || s.Value != "0" || !s.Differs() {
		t.Errorf("sync level: %+v", s)
	}
	if s, _ := r.InEffect(HeartbeatTimeout, eff); s.Value != "200ms" || s.Differs() {
		t.Errorf("heartbeat: %+v", s)
	}
	eff["node-1"][SyncLevel] = float64(2)
	if s, _ := r.InEffect(SyncLevel, eff); s.Value != "0, 2" || !s.Differs() {
		t.Errorf("servers that differ: %+v", s)
	}
	if s, ok := r.InEffect(EncodeThreads, eff); ok {
		t.Errorf("neither asked nor reported: %+v", s)
	}
	if s, ok := r.InEffect(SyncLevel, nil); !ok || s.Value != "2" || s.Differs() {
		t.Errorf("not reported: %+v", s)
	}
}
