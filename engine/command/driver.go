package command

import (
	"fmt"

	"github.com/rig-dev/rig/engine/driver"
)

// Name is the command driver's name in playbooks.
const Name = "command"

// Driver is the command driver: any engine, started from the playbook's engine.command
// templates, with the settings the playbook declares (engine.settings), names as the engine
// knows them.
type Driver struct{}

func init() { driver.Register(Driver{}) }

var _ driver.Templater = Driver{}

// Name implements driver.Driver.
func (Driver) Name() string { return Name }

// Settings implements driver.Driver: the table is the playbook's.
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
	return declared, nil
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
