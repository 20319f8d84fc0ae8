package command

import (
	"fmt"

	"github.com/rig-dev/rig/engine/driver"
)

// Name is the command driver's name in playbooks.
const Name = "command"

// Driver is the command driver: any engine, started from the playbook's engine.command
// templates, with the engine contract's settings (driver.Contract) and those the playbook
// declares (engine.settings), names as the engine knows them. A declaration of a contract name
// replaces the contract's (to give it a default or a rendering).
type Driver struct{}

var _ driver.Templater = Driver{}

// Name implements driver.Driver.
func (Driver) Name() string { return Name }

// Settings implements driver.Driver: the contract's table and the playbook's.
func (Driver) Settings(declared driver.Table) (driver.Table, error) {
	seen := map[string]bool{}
	for _, s := range declared {
		if err := s.Check(); err != nil {
			return nil, fmt.Errorf("%s: %w", s.Name, err)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("%s: declared twice", s.Name)
		}
		seen[s.Name] = true
	}
	var out driver.Table
	for _, s := range driver.Contract {
		if !seen[s.Name] {
			out = append(out, s)
		}
	}
	return append(out, declared...), nil
}

// TemplateSettings implements driver.Templater.
func (Driver) TemplateSettings(t driver.Table, v driver.Values) map[string]string {
	out := make(map[string]string, len(v))
	for name, canon := range v {
		if s, ok := t.Lookup(name); ok {
			out[name] = s.RenderValue(canon)
		} else {
			out[name] = canon
		}
	}
	return out
}
