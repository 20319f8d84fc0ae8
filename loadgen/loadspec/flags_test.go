package loadspec

import (
	"encoding/json"
	"testing"
)

// Every flag sets a field of the file (the config it gives differs from the empty one), names
// are unique within a command, and a value is read as the file reads the field.
func TestFlagsSetTheFile(t *testing.T) {
	sample := map[string]string{"count": "5k", "size": "200B", "rate": "100/s", "duration": "3s", "int": "7", "int64": "7", "uint64": "7", "string": "x", "bool": "true"}
	empty, _ := json.Marshal(Config{})
	for cmd, flags := range map[string][]Flag{"preload": PreloadFlags, "probe": ProbeFlags, "burst": BurstFlags} {
		seen := map[string]bool{}
		for _, f := range flags {
			if seen[f.Name] {
				t.Errorf("%s: --%s twice", cmd, f.Name)
			}
			seen[f.Name] = true
			v, ok := sample[f.Type]
			if !ok {
				t.Fatalf("%s --%s: no sample for type %q", cmd, f.Name, f.Type)
			}
			var c Config
			if err := f.Set(&c, v); err != nil {
				t.Errorf("%s --%s %s: %v", cmd, f.Name, v, err)
			}
			if got, _ := json.Marshal(c); string(got) == string(empty) {
				t.Errorf("%s --%s %s set nothing the file has", cmd, f.Name, v)
			}
			if err := f.Set(&c, "not-a-value-%"); err == nil && f.Type != "string" {
				t.Errorf("%s --%s took a bad value", cmd, f.Name)
			}
		}
	}
	var c Config
	for _, f := range PreloadFlags {
		if f.Name == "orders" {
			f.Set(&c, "5M")
		}
	}
	if c.Preload.Orders != 5_000_000 {
		t.Errorf("--orders 5M: %d", c.Preload.Orders)
	}
}
