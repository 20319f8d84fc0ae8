package playbooks

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// engine.preload_rate is the rate an engine declares it preloads at, for estimates with no earlier
// run of it; bad values are refused where they stand.
func TestPreloadRate(t *testing.T) {
	const cmd = "engine:\n  driver: command\n  command: {binary: /bin/true, args: [-Xmx1g, '--x={{.Node}}']}\n  preload_rate: %s\n"
	p := mustParse(t, base+fmt.Sprintf(cmd, "250k/s"))
	if p.Engine.PreloadRate != 250_000 {
		t.Errorf("PreloadRate = %v, want 250000", p.Engine.PreloadRate)
	}
	p.Preload.Orders = 1_000_000
	if e := p.Estimate(nil, "local"); e.Stage("preload") != 4*time.Second || e.Stages[1].From != "declared rate (engine.preload_rate 250000 orders/s; no run of engine command /bin/true -Xmx1g in the history)" {
		t.Errorf("estimate's preload from %q", e.Stages[1].From)
	}
	b, err := json.Marshal(p.Engine)
	if err != nil {
		t.Fatal(err)
	}
	var back Engine
	if err := json.Unmarshal(b, &back); err != nil || back.PreloadRate != 250_000 {
		t.Errorf("JSON round trip: %s -> %+v, %v", b, back, err)
	}
	if k := mustParse(t, base).Engine.EstimateKey(); k != "reference" {
		t.Errorf("reference engine's key %q", k)
	}
	wantProblem(t, problemsOf(t, base+fmt.Sprintf(cmd, "0/s")), "t.yaml:8:17", "engine.preload_rate: 0/s is out of range")
	wantProblem(t, problemsOf(t, base+fmt.Sprintf(cmd, "250000")), "t.yaml:8:17", `engine.preload_rate: "250000" has no time unit`)
}
