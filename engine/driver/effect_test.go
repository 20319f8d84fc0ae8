package driver

import (
	"strings"
	"testing"

	"github.com/rig-dev/rig/engine"
)

// Effect is compared by kind: the forms an engine may report a value in are one value, and each
// setting that differs or is missing is named with the value asked and the value in effect.
func TestEffectErrorsByKind(t *testing.T) {
	table := Table{
		{Name: "hb", Kind: Duration, Render: RenderNanos},
		{Name: "idle", Kind: Duration},
		{Name: "block", Kind: Bytes},
		{Name: "gc", Kind: OneOf, Values: []string{"g1", "zgc"}},
		{Name: "spin", Kind: Boolean},
	}
	asked := Values{"hb": "200ms", "idle": "1ms", "block": "16777216", "gc": "zgc", "spin": "true"}
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
