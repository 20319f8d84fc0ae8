package bufferchain

import (
	"strings"
	"testing"
	"time"
)

func TestPredictTheGuidesExample(t *testing.T) {
	// 50K × 170 B from one sender through Aeron's ingress: 170 + 32 + 32 = 234, aligned 256.
	c := Predict(Burst{Messages: 50_000, Senders: 1, Size: 170, Aeron: true})
	if c.Wire != 256 || c.PerMs != 50_000 {
		t.Fatalf("S %d P %g; want 256 and 50000", c.Wire, c.PerMs)
	}
	if c.SoRcvbuf != 12_800_000 || c.Window != 1_280_000 || c.Term != 25_600_000 || c.RTT != SameZoneRTT {
		t.Errorf("chain %+v; want SO_RCVBUF 12.8 MB, window 1.28 MB at 100 µs, term 25.6 MB", c)
	}
	// Plain datagrams carry no frame; senders compound; a longer round trip needs a larger window.
	d := Predict(Burst{Messages: 10_000, Senders: 4, Size: 170, RTT: time.Millisecond})
	if d.Wire != 170 || d.SoRcvbuf != 6_800_000 || d.Window != 6_800_000 {
		t.Errorf("datagrams %+v; want S 170, SO_RCVBUF = window = 40000 × 170", d)
	}
}

func TestGrantedIsTheClampDoubled(t *testing.T) {
	if g := Granted(64<<20, 212992); g != 425984 {
		t.Errorf("granted %d; want 2 × 212992", g)
	}
	if g := Granted(4<<20, 128<<20); g != 8<<20 {
		t.Errorf("granted %d; want 2 × 4 MiB", g)
	}
}

func TestMeasureBrackets(t *testing.T) {
	const lo, hi = 212992, 64 << 20
	for _, tc := range []struct {
		name   string
		pts    []Point
		want   Bracket
		within bool
		why    string
	}{
		{"bracketed far apart", []Point{{lo, 59288}, {hi, 0}, {lo, 100}}, Bracket{Passed: hi, Failed: lo}, false, "prediction lies between them"},
		{"all below", []Point{{lo, 5}, {hi, 1}}, Bracket{Failed: hi}, false, "all settings below"},
		{"all above", []Point{{lo, 0}, {hi, 0}}, Bracket{Passed: lo}, false, "all settings above"},
		{"inverted", []Point{{lo, 0}, {hi, 3}}, Bracket{Passed: lo, Inverted: hi}, false, "disagree"},
		{"close", []Point{{8 << 20, 7}, {16 << 20, 0}}, Bracket{Passed: 16 << 20, Failed: 8 << 20}, true, ""},
	} {
		b := Measure(tc.pts)
		if b != tc.want {
			t.Errorf("%s: %+v; want %+v", tc.name, b, tc.want)
		}
		ok, why := b.Within(12_800_000, 2)
		if ok != tc.within || !strings.Contains(why, tc.why) {
			t.Errorf("%s: within %v %q; want %v %q", tc.name, ok, why, tc.within, tc.why)
		}
	}
}
