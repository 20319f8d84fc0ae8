package driver

import (
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
)

// One value, however a playbook writes it or an engine reports it, is one canonical text; what
// a kind or a range refuses is refused naming what is valid.
func TestSettingCanonAndReported(t *testing.T) {
	hb := Setting{Name: "hb", Kind: Duration, Render: RenderNanos, Min: "5ms", Help: "5ms or more"}
	for _, v := range []string{"200ms", "0.2s", "200000us"} {
		if c, err := hb.Canon(v); err != nil || c != "200ms" {
			t.Errorf("Canon(%q) = %q, %v; want 200ms", v, c, err)
		}
	}
	for _, v := range []any{"200ms", float64(200_000_000), "200000000"} {
		if c, err := hb.Reported(v); err != nil || c != "200ms" {
			t.Errorf("Reported(%v) = %q, %v; want 200ms", v, c, err)
		}
	}
	if r := hb.RenderValue("200ms"); r != "200000000" {
		t.Errorf("renders as %q, want nanoseconds", r)
	}
	if _, err := hb.Canon("1ms"); err == nil || !strings.Contains(err.Error(), "at least 5ms") || !strings.Contains(err.Error(), "want 5ms or more") {
		t.Errorf("below the range: %v", err)
	}
	// A value the rendering would truncate is refused, not passed as 1.
	ms := Setting{Name: "t", Kind: Duration, Render: RenderMillis}
	if _, err := ms.Canon("1500us"); err == nil || !strings.Contains(err.Error(), "not a whole number of milliseconds") {
		t.Errorf("1500us rendered as millis: %v", err)
	}
	if r := ms.RenderValue("2s"); r != "2000" {
		t.Errorf("2s as millis: %q", r)
	}
	size := Setting{Name: "b", Kind: Bytes}
	if c, err := size.Canon("16MiB"); err != nil || c != "16777216" || size.Show(c) != "16MiB" {
		t.Errorf("16MiB: %q %v, shown %q", c, err, size.Show(c))
	}
	if c, err := size.Reported(float64(16 << 20)); err != nil || c != "16777216" {
		t.Errorf("reported bytes: %q %v", c, err)
	}
	gc := Setting{Name: "gc", Kind: OneOf, Values: []string{"g1", "zgc"}}
	if _, err := gc.Canon("shenandoah"); err == nil || !strings.Contains(err.Error(), "not one of g1, zgc") {
		t.Errorf("one-of: %v", err)
	}
	flag := Setting{Name: "f", Kind: Boolean}
	if c, err := flag.Reported(true); err != nil || c != "true" {
		t.Errorf("boolean: %q %v", c, err)
	}
	if _, err := hb.Reported(true); err == nil {
		t.Error("a boolean reported for a duration was accepted")
	}
	if _, err := hb.Reported(nil); err == nil || err.Error() != "not reported" {
		t.Errorf("nil: %v", err)
	}
}

// The longest duration any server reports in effect, in whatever form each reports it; nothing
// readable: 0.
func TestLongestInEffect(t *testing.T) {
	table := Table{{Name: HeartbeatTimeout, Kind: Duration, Render: RenderNanos}}
	eff := map[string]engine.Reported{
		"node-0": {HeartbeatTimeout: "200ms"},
		"node-1": {HeartbeatTimeout: float64(300_000_000)},
		"node-2": {HeartbeatTimeout: true}, // unreadable: skipped
	}
	if got := table.LongestInEffect(HeartbeatTimeout, eff); got != 300*time.Millisecond {
		t.Errorf("%v, want the longest in effect, 300ms", got)
	}
	if got := Table(nil).LongestInEffect(HeartbeatTimeout, map[string]engine.Reported{"node-0": {ElectionTimeout: "1s"}}); got != 0 {
		t.Errorf("%v with no heartbeat timeout reported, want 0", got)
	}
}
