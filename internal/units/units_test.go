package units

import (
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	good := map[string]time.Duration{"5s": 5 * time.Second, "250ms": 250 * time.Millisecond, "1m30s": 90 * time.Second,
		"0": 0, "0s": 0, "1.5s": 1500 * time.Millisecond, "2h": 2 * time.Hour, "100us": 100 * time.Microsecond}
	for in, want := range good {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	bad := map[string]string{"5": "has no unit; write 5s or 5ms", "1.5": "has no unit", "-1s": "negative",
		"5 s": "not a duration", "5sec": "not a duration", "": "empty"}
	for in, want := range bad {
		if _, err := ParseDuration(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseDuration(%q) err = %v; want it to say %q", in, err, want)
		}
	}
}

func TestParseSize(t *testing.T) {
	good := map[string]int64{"4096": 4096, "16MiB": 16 << 20, "1MB": 1_000_000, "64KiB": 64 << 10, "500kB": 500_000,
		"1GiB": 1 << 30, "1.5MiB": 3 << 19, "100B": 100, "1_048_576": 1 << 20}
	for in, want := range good {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	bad := map[string]string{"16M": "did you mean 16MiB?", "16mb": "unknown unit", "-1MiB": "negative",
		"1.5": "not a whole number of bytes", "lots": "not a size", "4k": "did you mean 4KiB?"}
	for in, want := range bad {
		if _, err := ParseSize(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSize(%q) err = %v; want it to say %q", in, err, want)
		}
	}
}

func TestParseCount(t *testing.T) {
	good := map[string]int64{"100000": 100_000, "100_000": 100_000, "100k": 100_000, "100K": 100_000, "5M": 5_000_000,
		"1.5M": 1_500_000, "2G": 2_000_000_000, "0": 0}
	for in, want := range good {
		if got, err := ParseCount(in); err != nil || got != want {
			t.Errorf("ParseCount(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	bad := map[string]string{"1.5": "not a whole number", "-3": "negative", "1e6": "not a count",
		"five": "not a count", "2T": "unknown suffix"}
	for in, want := range bad {
		if _, err := ParseCount(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseCount(%q) err = %v; want it to say %q", in, err, want)
		}
	}
}

func TestParseRate(t *testing.T) {
	good := map[string]float64{"1000/s": 1000, "5k/s": 5000, "5/ms": 5000, "600/min": 10, "0.5/s": 0.5, "1.5k/s": 1500}
	for in, want := range good {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	bad := map[string]string{"1000": "no time unit; write 1000/s", "-5/s": "negative", "5/h": "unknown time unit",
		"fast/s": "not a rate", "5k": "no time unit; write 5k/s"}
	for in, want := range bad {
		if _, err := ParseRate(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRate(%q) err = %v; want it to say %q", in, err, want)
		}
	}
}

// What the formatters write parses back to the same value: plans and matrix settings print them.
func TestFormatRoundTrips(t *testing.T) {
	for _, n := range []int64{0, 7, 1500, 100_000, 5_000_000, 2_000_000_000, 1_234_567} {
		if got, err := ParseCount(FormatCount(n)); err != nil || got != n {
			t.Errorf("count %d -> %q -> %d, %v", n, FormatCount(n), got, err)
		}
	}
	for _, b := range []int64{4096, 212992, 16 << 20, 1 << 30, 1_000_000, 3 << 19} {
		if got, err := ParseSize(FormatSize(b)); err != nil || got != b {
			t.Errorf("size %d -> %q -> %d, %v", b, FormatSize(b), got, err)
		}
	}
	for _, r := range []float64{1, 500, 5000, 1500, 0.5, 1e6} {
		if got, err := ParseRate(FormatRate(r)); err != nil || got != r {
			t.Errorf("rate %v -> %q -> %v, %v", r, FormatRate(r), got, err)
		}
	}
}

func TestParseByteRate(t *testing.T) {
	good := map[string]int64{"125MB/s": 125e6, "1GB/s": 1e9, "500MiB/s": 500 << 20, "1MB/ms": 1e9, "60MB/min": 1e6, "0/s": 0, "4096/s": 4096}
	for in, want := range good {
		if got, err := ParseByteRate(in); err != nil || got != want {
			t.Errorf("ParseByteRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	bad := map[string]string{"125MB": "has no time unit; write 125MB/s", "125M/s": "unknown unit \"M\"", "125MB/h": "unknown time unit",
		"fast": "not a byte rate", "-1MB/s": "negative"}
	for in, want := range bad {
		if _, err := ParseByteRate(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseByteRate(%q) err = %v; want it to say %q", in, err, want)
		}
	}
	for _, r := range []int64{125e6, 1e9, 500 << 20, 1234, 1500, 0} {
		if got, err := ParseByteRate(FormatByteRate(r)); err != nil || got != r {
			t.Errorf("rate %v -> %q -> %v, %v", r, FormatByteRate(r), got, err)
		}
	}
}
