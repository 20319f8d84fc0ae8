package analysis

import "testing"

// A figure's value reads with its unit: durations as the report writes them, counts whole.
func TestFigureFormat(t *testing.T) {
	for _, c := range []struct {
		f    Figure
		v    float64
		want string
	}{
		{Figure{Unit: "ms"}, 12.5, "12.5 ms"},
		{Figure{Unit: "ms"}, 0.25, "250 µs"},
		{Figure{Unit: "probes"}, 3, "3 probes"},
		{Figure{Unit: "share"}, 0.6667, "0.667 share"},
		{Figure{}, 7, "7"},
	} {
		if got := c.f.Format(c.v); got != c.want {
			t.Errorf("%v %s: %q, want %q", c.v, c.f.Unit, got, c.want)
		}
	}
}
