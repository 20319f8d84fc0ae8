package driver

import (
	"maps"
	"slices"
	"strings"

	"github.com/rig-dev/rig/engine"
)

// Resolved is a run's engine settings as its plan resolved them, once: the driver, its table and
// the values asked, canonical (Setting.Canon). The manifest keeps it beside the values the run
// read back in effect (rundir.Manifest.Engines), so whatever reads a run folder types and
// compares settings without the driver that ran it.
type Resolved struct {
	Driver string `json:"driver"`
	Table  Table  `json:"table"`
	Asked  Values `json:"asked,omitempty"`
}

// InEffect is one setting of a run: the value asked and the value the servers reported in
// effect, both canonical.
type InEffect struct {
	Name  string
	Asked string // "" when the run did not ask for it
	// Value is the value in effect: the servers' one value; several, joined by ", ", when they
	// differ; the asked value when no server reports it (Reported false).
	Value    string
	Reported bool
}

// Differs says the value in effect is not the one asked.
func (s InEffect) Differs() bool { return s.Reported && s.Asked != "" && s.Value != s.Asked }

// InEffect is setting name as asked and as eff (per server, GET /status config) reports it,
// read by its kind in r's table (Text when the table lacks it); ok is false when it was neither
// asked nor reported.
func (r Resolved) InEffect(name string, eff map[string]engine.Reported) (InEffect, bool) {
	s, ok := r.Table.Lookup(name)
	if !ok {
		s = Setting{Name: name, Kind: Text}
	}
	out := InEffect{Name: name, Asked: r.Asked[name]}
	seen := map[string]bool{}
	for _, node := range slices.Sorted(maps.Keys(eff)) {
		v, present := eff[node][name]
		if !present {
			continue
		}
		if c, err := s.Reported(v); err == nil {
			seen[c] = true
		}
	}
	if len(seen) > 0 {
		out.Value, out.Reported = strings.Join(slices.Sorted(maps.Keys(seen)), ", "), true
	} else {
		out.Value = out.Asked
	}
	return out, out.Value != ""
}
