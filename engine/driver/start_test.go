package driver

import (
	"errors"
	"testing"

	"github.com/rig-dev/rig/engine"
)

type plainDriver struct{}

func (plainDriver) Name() string                    { return "plain" }
func (plainDriver) Settings(d Table) (Table, error) { return d, nil }
func (plainDriver) Configure(c *engine.Config, v Values) error {
	if v["bad"] != "" {
		return errors.New("no such knob")
	}
	c.Node += "+configured"
	return nil
}

type templDriver struct{ plainDriver }

func (templDriver) TemplateSettings(t Table, v Values) map[string]string { return nil }

// A Configurer's settings go into the config; a Templater is marked templated even with no
// settings (its command is what starts the engine); a refusal names the driver.
func TestPrepare(t *testing.T) {
	st, err := Prepare(plainDriver{}, nil, Values{}, engine.Config{Node: "n"})
	if err != nil || st.Config.Node != "n+configured" || st.Templated {
		t.Errorf("configurer: %+v, %v", st, err)
	}
	if st, err := Prepare(templDriver{}, nil, Values{}, engine.Config{}); err != nil || !st.Templated {
		t.Errorf("templater without settings: %+v, %v", st, err)
	}
	if _, err := Prepare(plainDriver{}, nil, Values{"bad": "1"}, engine.Config{}); err == nil || err.Error() != "plain engine settings: no such knob" {
		t.Errorf("refused: %v", err)
	}
}
