package playbooks

import (
	"encoding/json"
	"fmt"
	"testing"
)

// engine.bytes_per_order is what a command-driven engine's resting order costs; the reference
// engine measures its own, so there it is refused, as are sizes that are not one.
func TestBytesPerOrder(t *testing.T) {
	const cmd = "engine:\n  driver: command\n  command: {binary: /bin/true}\n  bytes_per_order: %s\n"
	p := mustParse(t, base+fmt.Sprintf(cmd, "120"))
	if n, src := p.Engine.BytesPerOrder(); n != 120 || src != "as engine.bytes_per_order says" {
		t.Errorf("declared 120: BytesPerOrder() = %d, %q", n, src)
	}
	if n, src := mustParse(t, base+"engine:\n  driver: command\n  command: {binary: /bin/true}\n").Engine.BytesPerOrder(); n != 0 || src != "" {
		t.Errorf("undeclared: BytesPerOrder() = %d, %q; want 0 (not checked)", n, src)
	}
	if n, src := mustParse(t, base).Engine.BytesPerOrder(); n != 80 || src != "as measured for the reference engine" {
		t.Errorf("reference: BytesPerOrder() = %d, %q", n, src)
	}
	// It survives the manifest's JSON.
	b, err := json.Marshal(p.Engine)
	if err != nil {
		t.Fatal(err)
	}
	var back Engine
	if err := json.Unmarshal(b, &back); err != nil || back.OrderBytes != 120 {
		t.Errorf("JSON round trip: %s -> %+v, %v", b, back, err)
	}
	// The nearest thing to its place in a file: the value, matrix values included.
	if pos := p.PosOf("engine.bytes_per_order"); pos.Line != 8 || pos.Column != 20 {
		t.Errorf("PosOf(engine.bytes_per_order) = %v; want t.yaml:8:20", pos)
	}

	wantProblem(t, problemsOf(t, base+fmt.Sprintf(cmd, "0")), "t.yaml:8:20", "engine.bytes_per_order: 0 is out of range; want 1..1MiB")
	wantProblem(t, problemsOf(t, base+fmt.Sprintf(cmd, "2MiB")), "t.yaml:8:20", "engine.bytes_per_order: 2MiB is out of range")
	wantProblem(t, problemsOf(t, base+fmt.Sprintf(cmd, "lots")), "t.yaml:8:20", `engine.bytes_per_order: "lots" is not a size`)
	wantProblem(t, problemsOf(t, base+"engine: {bytes_per_order: 64}\n"), "t.yaml:5:27",
		"engine.bytes_per_order: is set, but the reference engine measures its own (80 B per resting order)")
}
