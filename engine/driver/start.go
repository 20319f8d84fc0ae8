package driver

import (
	"fmt"

	"github.com/rig-dev/rig/engine"
)

// Start is what a driver makes of the settings asked for an engine started with cfg: a
// Configurer writes them into the config (Config), a Templater renders them for its command's
// templates (Templated, with Settings).
type Start struct {
	Config    engine.Config
	Templated bool
	Settings  map[string]string
}

// Prepare is how d starts an engine with cfg and the asked settings (checked against table).
func Prepare(d Driver, table Table, asked Values, cfg engine.Config) (Start, error) {
	if c, ok := d.(Configurer); ok {
		if err := c.Configure(&cfg, asked); err != nil {
			return Start{}, fmt.Errorf("%s engine settings: %w", d.Name(), err)
		}
	}
	st := Start{Config: cfg}
	if t, ok := d.(Templater); ok {
		st.Templated, st.Settings = true, t.TemplateSettings(table, asked)
	}
	return st, nil
}
