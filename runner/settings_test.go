package runner

import (
	"errors"
	"strings"
	"testing"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/playbooks"
)

// Effect is compared by kind: the forms an engine may report a value in are one value, and each
// setting that differs or is missing is named with the value asked and the value in effect.
func TestEffectErrorsByKind(t *testing.T) {
	table := driver.Table{
		{Name: "hb", Kind: driver.Duration, Render: driver.RenderNanos},
		{Name: "idle", Kind: driver.Duration},
		{Name: "block", Kind: driver.Bytes},
		{Name: "gc", Kind: driver.OneOf, Values: []string{"g1", "zgc"}},
		{Name: "spin", Kind: driver.Boolean},
	}
	asked := driver.Values{"hb": "200ms", "idle": "1ms", "block": "16777216", "gc": "zgc", "spin": "true"}
	same := engine.Reported{"hb": float64(200_000_000), "idle": "1000us", "block": float64(16 << 20), "gc": "zgc", "spin": true}
	if errs := EffectErrors(table, asked, same); len(errs) != 0 {
		t.Fatalf("the same values in other forms: %v", errs)
	}
	diff := engine.Reported{"hb": "100000000", "idle": "1ms", "block": float64(1 << 20), "spin": false}
	var got []string
	for _, e := range EffectErrors(table, asked, diff) {
		got = append(got, e.Error())
	}
	want := []string{
		"engine.block is 1MiB in effect (GET /status config.block), the playbook asked for 16MiB",
		`engine.gc is not reported in effect (GET /status config has no "gc"), the playbook asked for zgc`,
		"engine.hb is 100ms in effect (GET /status config.hb), the playbook asked for 200ms",
		"engine.spin is false in effect (GET /status config.spin), the playbook asked for true",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A setting the engine already reports at "starting" with another value fails the wait for
// readiness at once, naming node, setting, in effect and asked; one it does not report yet is
// left for the check after readiness, and a node that has not answered is not checked.
func TestEffectBeforeReady(t *testing.T) {
	pb, err := playbooks.Parse("hb.yaml", []byte("name: hb\ncluster: {servers: 3, clients: 1}\nengine: {heartbeat_timeout: 2s}\nload: {probe_rate: 100/s}\nduration: 10s\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := &run{pb: pb, status: map[string]engine.Status{
		"node-0": {Phase: engine.PhaseStarting, Config: engine.Reported{"heartbeat_timeout": "2000ns"}},
		"node-1": {Phase: engine.PhaseStarting, Config: engine.Reported{"node": "node-1"}},
		"node-2": {},
	}}
	check := r.effectBeforeReady()
	if check == nil {
		t.Fatal("no check for the reference engine's settings")
	}
	err = check("node-0")
	if !errors.Is(err, ErrSettingNotInEffect) {
		t.Fatalf("node-0 reports heartbeat_timeout 2µs: got %v, want ErrSettingNotInEffect", err)
	}
	want := "node-0: engine.heartbeat_timeout is 2µs in effect (GET /status config.heartbeat_timeout), the playbook asked for 2s"
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "phase starting") {
		t.Errorf("error %q does not say %q and the phase", err, want)
	}
	for _, n := range []string{"node-1", "node-2"} {
		if err := check(n); err != nil {
			t.Errorf("%s (setting not reported yet / no answer): %v", n, err)
		}
	}
}
