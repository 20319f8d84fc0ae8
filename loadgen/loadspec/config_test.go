package loadspec

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseConfigErrorsSayWhere(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"{\n  \"servers\": [\"a:1\"],\n  \"probe\": {\"rat\": 5}\n}", `lg.json:3:13: unknown key "rat" in probe`},
		{"{\n  \"servers\": [\"a:1\"],\n  \"probe\": {\"rate\": \"fast\"}\n}", `lg.json:3:21: probe.rate: "fast" is not a rate`},
		{"{\n  \"instruments\": \"many\"\n}", "lg.json:2:18: instruments: string where int is wanted"},
		{"{\n  \"servers\": [\"a:1\"],,\n}", "lg.json:2:"},
		{"{\n  \"preload\": {\"levels\": 3},\n  \"probe\": {\"duration\": \"30 seconds\"}\n}", "lg.json:3:25: probe.duration: duration \"30 seconds\": want a Go duration"},
		{"{\"extra\": 1}", `lg.json:1:2: unknown key "extra" in the top level`},
		{"{} {}", "text after"},
	} {
		_, err := ParseConfig("lg.json", []byte(tc.text))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want ErrConfig mentioning %q", tc.text, err, tc.want)
		}
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// Counts and rates in the config file: numbers, or text in the grammar of internal/units.
func TestCountAndRateJSON(t *testing.T) {
	for in, want := range map[string]Count{`100000`: 100_000, `"100k"`: 100_000, `"5M"`: 5_000_000, `"1.5m"`: 1_500_000, `0`: 0} {
		var c Count
		if err := json.Unmarshal([]byte(in), &c); err != nil || c != want {
			t.Errorf("Count %s = %d, %v, want %d", in, c, err, want)
		}
	}
	for _, in := range []string{`""`, `-1`, `1.5`, `"k"`, `"5X"`} {
		var c Count
		if err := json.Unmarshal([]byte(in), &c); err == nil {
			t.Errorf("Count %s accepted", in)
		}
	}
	for in, want := range map[string]Rate{`1000`: 1000, `"1000/s"`: 1000, `"5k/s"`: 5000, `0.5`: 0.5} {
		var r Rate
		if err := json.Unmarshal([]byte(in), &r); err != nil || r != want {
			t.Errorf("Rate %s = %v, %v, want %v", in, r, err, want)
		}
	}
	for _, in := range []string{`""`, `0`, `-5`, `"-5/s"`, `"fast"`, `"1000"`} {
		var r Rate
		if err := json.Unmarshal([]byte(in), &r); err == nil {
			t.Errorf("Rate %s accepted", in)
		}
	}
}

func TestConfigCheckProbePriceBelowAsks(t *testing.T) {
	c := Config{Servers: []string{"a:1"}}
	if err := c.Check(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	c.ProbePrice = DefaultMid + DefaultGap
	if err := c.Check(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "probe_price") {
		t.Errorf("probe at the best ask: %v, want ErrConfig naming probe_price", err)
	}
	c.ProbePrice, c.Preload.Mid, c.Preload.Gap = 500, 400, 50
	if err := c.Check(); !errors.Is(err, ErrConfig) {
		t.Errorf("probe above a custom book's asks: %v", err)
	}
}

// The controller writes the config with encoding/json; it must read back identically.
func TestConfigRoundTrip(t *testing.T) {
	in := Config{
		Servers: []string{"a:1", "b:2"}, Instruments: 4, StartTimeout: Duration(30 * time.Second),
		Preload: PreloadConfig{Orders: 5_000_000, Out: "/r/loadgen"},
		Probe:   ProbeConfig{Rate: 5000, Duration: Duration(230 * time.Second), Out: "/r/loadgen", Control: "/r/ctl/loadgen.sock"},
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ParseConfig("written.json", b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip:\n%+v\n%+v\n%s", in, out, b)
	}
}
