package units

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Package units is the one grammar of quantities across rig (playbooks, the load generator's
// config and flags, rig bench): durations with a unit, counts with k/M/G, sizes in B/KiB/MB…,
// rates per time unit. Every parser returns an error that says what a valid value looks like,
// because the message ends up in front of the user as is.

var (
	bareNumber = regexp.MustCompile(`^[+-]?[0-9][0-9_]*(\.[0-9]+)?$`)
	countRe    = regexp.MustCompile(`^([0-9][0-9_]*(?:\.[0-9]+)?)([a-zA-Z]*)$`)
	sizeRe     = regexp.MustCompile(`^([0-9][0-9_]*(?:\.[0-9]+)?)\s*([a-zA-Z]*)$`)
)

// ParseDuration reads a duration with a unit: 250ms, 5s, 1m30s, 2h. A bare number is refused
// (is 5 seconds or milliseconds?), except 0, which needs none. Negative values are refused.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty; want a duration with a unit, e.g. 5s, 250ms, 1m30s")
	}
	if bareNumber.MatchString(s) {
		if f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64); err == nil && f == 0 {
			return 0, nil
		}
		return 0, fmt.Errorf("%q has no unit; write %ss or %sms (units: ns, us, ms, s, m, h)", s, s, s)
	}
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("%q is negative; want a duration of 0 or more, e.g. 5s", s)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration; want a number with a unit, e.g. 5s, 250ms, 1m30s (units: ns, us, ms, s, m, h)", s)
	}
	return d, nil
}

var countSuffix = map[string]float64{"": 1, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6, "g": 1e9, "G": 1e9}

// ParseCount reads a count: 100000, 100_000, 100k, 1.5M, 5m, 2G (k/K = 1,000; m/M = 1,000,000;
// g/G = 1,000,000,000; a count has no milli). The result must be a whole number.
func ParseCount(s string) (int64, error) {
	v, err := parseScaled(s)
	if err != nil {
		return 0, err
	}
	if v != math.Trunc(v) {
		return 0, fmt.Errorf("%q is not a whole number", strings.TrimSpace(s))
	}
	return int64(v), nil
}

// parseScaled reads a number with an optional k/M/G suffix, fractions allowed.
func parseScaled(s string) (float64, error) {
	s = strings.TrimSpace(s)
	m := countRe.FindStringSubmatch(s)
	if m == nil {
		if strings.HasPrefix(s, "-") {
			return 0, fmt.Errorf("%q is negative; want a count of 0 or more, e.g. 100k", s)
		}
		return 0, fmt.Errorf("%q is not a count; want e.g. 100000, 100k, 5M", s)
	}
	mult, ok := countSuffix[m[2]]
	if !ok {
		return 0, fmt.Errorf("%q has an unknown suffix %q; want k (thousand), M (million) or G (billion), e.g. 100k, 5M", s, m[2])
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(m[1], "_", ""), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a count; want e.g. 100000, 100k, 5M", s)
	}
	v := f * mult
	if v > 1e15 {
		return 0, fmt.Errorf("%q is too large (at most 1e15)", s)
	}
	return v, nil
}

var sizeUnits = map[string]int64{
	"": 1, "B": 1,
	"kB": 1000, "KB": 1000, "MB": 1000 * 1000, "GB": 1000 * 1000 * 1000, "TB": 1000 * 1000 * 1000 * 1000,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
}

// ParseSize reads a byte size: 4096 (a bare number is bytes, as sysctl shows them), 64KiB,
// 16MiB, 1GiB (powers of 1024) or 1MB, 500kB (powers of 1000). Units are case-sensitive so
// that M (a count) is never mistaken for MB or MiB.
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	m := sizeRe.FindStringSubmatch(s)
	if m == nil {
		if strings.HasPrefix(s, "-") {
			return 0, fmt.Errorf("%q is negative; want a size, e.g. 16MiB", s)
		}
		return 0, fmt.Errorf("%q is not a size; want e.g. 4096, 64KiB, 16MiB, 1MB", s)
	}
	mult, ok := sizeUnits[m[2]]
	if !ok {
		hint := ""
		switch strings.ToUpper(m[2]) {
		case "K", "KI", "KIB":
			hint = fmt.Sprintf(" (did you mean %sKiB?)", m[1])
		case "M", "MI", "MIB":
			hint = fmt.Sprintf(" (did you mean %sMiB?)", m[1])
		case "G", "GI", "GIB":
			hint = fmt.Sprintf(" (did you mean %sGiB?)", m[1])
		}
		return 0, fmt.Errorf("%q has an unknown unit %q%s; want B, KiB, MiB, GiB, TiB (x1024) or kB, MB, GB, TB (x1000)", s, m[2], hint)
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(m[1], "_", ""), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size; want e.g. 4096, 64KiB, 16MiB", s)
	}
	v := f * float64(mult)
	if v > 1<<50 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	if v != math.Trunc(v) {
		return 0, fmt.Errorf("%q is not a whole number of bytes", s)
	}
	return int64(v), nil
}

var ratePer = map[string]float64{"s": 1, "ms": 1000, "min": 1.0 / 60}

// ParseRate reads a rate per unit of time: 1000/s, 5k/s, 5/ms, 600/min. The result is per
// second. A bare number is refused: a rate needs its time unit.
func ParseRate(s string) (float64, error) {
	s = strings.TrimSpace(s)
	num, per, ok := strings.Cut(s, "/")
	if !ok {
		if _, err := parseScaled(s); err == nil {
			return 0, fmt.Errorf("%q has no time unit; write %s/s", s, s)
		}
		if strings.HasPrefix(s, "-") {
			return 0, fmt.Errorf("%q is negative; want a rate such as 1000/s", s)
		}
		return 0, fmt.Errorf("%q is not a rate; want e.g. 1000/s, 5k/s, 5/ms", s)
	}
	mult, ok := ratePer[strings.TrimSpace(per)]
	if !ok {
		return 0, fmt.Errorf("%q has an unknown time unit %q; want /s, /ms or /min, e.g. 1000/s", s, per)
	}
	n, err := parseScaled(strings.TrimSpace(num))
	if err != nil {
		if strings.HasPrefix(strings.TrimSpace(num), "-") {
			return 0, fmt.Errorf("%q is negative; want a rate such as 1000/s", s)
		}
		return 0, fmt.Errorf("%q is not a rate; want e.g. 1000/s, 5k/s, 5/ms", s)
	}
	return n * mult, nil
}

// ParseByteRate reads a byte rate: 125MB/s, 1GB/s, 500MiB/s (a size, as ParseSize, per s, ms
// or min), as a disk's throughput is written. The result is bytes per second, rounded down.
// A size without its time unit is refused, as is a count (125M/s: M of what?).
func ParseByteRate(s string) (int64, error) {
	s = strings.TrimSpace(s)
	num, per, ok := strings.Cut(s, "/")
	if !ok {
		if _, err := ParseSize(s); err == nil {
			return 0, fmt.Errorf("%q has no time unit; write %s/s", s, s)
		}
		return 0, fmt.Errorf("%q is not a byte rate; want e.g. 125MB/s, 1GB/s, 500MiB/s", s)
	}
	mult, ok := ratePer[strings.TrimSpace(per)]
	if !ok {
		return 0, fmt.Errorf("%q has an unknown time unit %q; want /s, /ms or /min, e.g. 125MB/s", s, per)
	}
	n, err := ParseSize(strings.TrimSpace(num))
	if err != nil {
		return 0, fmt.Errorf("%q is not a byte rate (%v); want e.g. 125MB/s, 1GB/s, 500MiB/s", s, err)
	}
	v := float64(n) * mult
	if v > 1<<50 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(v), nil
}

// FormatByteRate writes bytes per second as ParseByteRate reads it: 125MB/s, 500MiB/s, 1234/s.
func FormatByteRate(bps int64) string {
	for _, u := range []struct {
		name string
		n    int64
	}{{"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}} {
		if bps != 0 && bps%u.n == 0 {
			return strconv.FormatInt(bps/u.n, 10) + u.name + "/s"
		}
	}
	if s := FormatSize(bps); s != strconv.FormatInt(bps, 10) {
		return s + "/s"
	}
	return strconv.FormatInt(bps, 10) + "B/s"
}

// ParseInt reads a plain whole number (underscores allowed), for fields that are not counts.
func ParseInt(s string) (int64, error) {
	s = strings.TrimSpace(s)
	v, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a whole number", s)
	}
	return v, nil
}

// FormatCount writes n the way a playbook would: 5M, 100k, 1500.
func FormatCount(n int64) string {
	switch {
	case n != 0 && n%1_000_000_000 == 0:
		return strconv.FormatInt(n/1_000_000_000, 10) + "G"
	case n != 0 && n%1_000_000 == 0:
		return strconv.FormatInt(n/1_000_000, 10) + "M"
	case n != 0 && n%1_000 == 0:
		return strconv.FormatInt(n/1_000, 10) + "k"
	}
	return strconv.FormatInt(n, 10)
}

// FormatSize writes b in the largest binary unit that divides it, else in bytes.
func FormatSize(b int64) string {
	for _, u := range []struct {
		name string
		n    int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b != 0 && b%u.n == 0 {
			return strconv.FormatInt(b/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(b, 10)
}

// FormatRate writes a per-second rate: 5k/s, 1000.5/s.
func FormatRate(r float64) string {
	if r == math.Trunc(r) && r < 1e15 {
		return FormatCount(int64(r)) + "/s"
	}
	return strconv.FormatFloat(r, 'f', -1, 64) + "/s"
}

// MaxDuration is the longest duration a playbook may give anything (a run, an action's time):
// a day. The agent refuses a longer CPU hog too (agent/hog), so no run-supplied duration
// reaches time arithmetic big enough to overflow.
const MaxDuration = 24 * time.Hour

// FormatDuration writes d as a playbook would, with 0 as "0s".
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	return d.String()
}

// Group writes an integer (or decimal) with thousands separators: 80000 -> 80,000.
func Group(s string) string {
	intPart, frac, hasFrac := strings.Cut(s, ".")
	neg := strings.HasPrefix(intPart, "-")
	intPart = strings.TrimPrefix(intPart, "-")
	var b strings.Builder
	for i, r := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	out := b.String()
	if neg {
		out = "-" + out
	}
	if hasFrac {
		out += "." + frac
	}
	return out
}
