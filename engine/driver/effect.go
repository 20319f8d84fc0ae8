package driver

import (
	"fmt"
	"maps"
	"slices"

	"github.com/rig-dev/rig/engine"
)

// EffectErrors compares every asked setting with what the engine reports in effect (GET /status
// config), by the setting's kind: "200ms", 200000000 (a duration rendered as nanos) and "0.2s"
// are one value. One error per setting that differs or is not reported, naming it, the value
// asked and the value in effect.
func EffectErrors(table Table, asked Values, reported engine.Reported) []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(asked)) {
		s, ok := table.Lookup(name)
		if !ok {
			s = Setting{Name: name, Kind: Text}
		}
		want := asked[name]
		v, present := reported[name]
		if !present {
			errs = append(errs, fmt.Errorf("engine.%s is not reported in effect (GET /status config has no %q), the playbook asked for %s", name, name, s.Show(want)))
			continue
		}
		got, err := s.Reported(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("engine.%s in effect (GET /status config.%s): %v; the playbook asked for %s", name, name, err, s.Show(want)))
			continue
		}
		if got != want {
			errs = append(errs, fmt.Errorf("engine.%s is %s in effect (GET /status config.%s), the playbook asked for %s", name, s.Show(got), name, s.Show(want)))
		}
	}
	return errs
}
