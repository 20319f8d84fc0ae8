package playbooks

import (
	"github.com/rig-dev/rig/internal/units"

	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// tuningKey describes one kernel setting a playbook may change: how to check its value and how
// to write it in base units, which is what the agent writes to /proc/sys or /sys and reads back.
type tuningKey struct {
	help      string                       // what a valid value looks like
	normalize func(string) (string, error) // checks the value and returns it in base units
}

var tuningKeys = map[string]tuningKey{
	"thp":                          oneOf("always", "madvise", "never"),
	"thp_defrag":                   oneOf("always", "defer", "defer+madvise", "madvise", "never"),
	"vm.dirty_ratio":               intRange(0, 100, "a percentage of memory, 0..100"),
	"vm.dirty_background_ratio":    intRange(0, 100, "a percentage of memory, 0..100"),
	"vm.dirty_expire_centisecs":    intRange(0, 1<<31-1, "hundredths of a second, e.g. 3000"),
	"vm.dirty_writeback_centisecs": intRange(0, 1<<31-1, "hundredths of a second, e.g. 500 (0 turns periodic writeback off)"),
	"vm.swappiness":                intRange(0, 200, "0..200"),
	"net.core.rmem_max":            byteSize(),
	"net.core.wmem_max":            byteSize(),
	"net.core.rmem_default":        byteSize(),
	"net.core.netdev_max_backlog":  countRange(1, 1<<31-1, "packets, at least 1, e.g. 1000 or 250k"),
	"ena_rings":                    {help: `INTERFACE:rx=N,tx=N, e.g. "eth0:rx=8192,tx=1024" (either ring may be left out)`, normalize: enaRings},
}

// tuningKeyNames lists the allowed keys, sorted, for error messages.
func tuningKeyNames() string {
	return strings.Join(tuningKeyList(), ", ")
}

func oneOf(values ...string) tuningKey {
	return tuningKey{
		help: "one of " + strings.Join(values, ", "),
		normalize: func(s string) (string, error) {
			for _, v := range values {
				if s == v {
					return s, nil
				}
			}
			return "", fmt.Errorf("%q is not valid; want one of %s", s, strings.Join(values, ", "))
		},
	}
}

// numberKey is a whole-number setting written in one of internal/units' grammars (parse), in
// lo..hi, written back in base units.
func numberKey(parse func(string) (int64, error), lo, hi int64, help string) tuningKey {
	return tuningKey{
		help: help,
		normalize: func(s string) (string, error) {
			v, err := parse(s)
			if err != nil {
				return "", fmt.Errorf("%w; want %s", err, help)
			}
			if v < lo || v > hi {
				return "", fmt.Errorf("%s is out of range; want %s", s, help)
			}
			return strconv.FormatInt(v, 10), nil
		},
	}
}

func intRange(lo, hi int64, help string) tuningKey { return numberKey(units.ParseInt, lo, hi, help) }
func countRange(lo, hi int64, help string) tuningKey {
	return numberKey(units.ParseCount, lo, hi, help)
}

// byteSize is a socket buffer limit: the kernel keeps it in an int.
func byteSize() tuningKey {
	return numberKey(units.ParseSize, 4096, 1<<31-1, "bytes, 4096 to 2147483647, e.g. 212992, 128MiB")
}

var ifaceRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,15}$`)

// enaRings checks "eth0:rx=8192,tx=1024" and writes it back without spaces, rx before tx.
func enaRings(s string) (string, error) {
	const want = `want INTERFACE:rx=N,tx=N, e.g. "eth0:rx=8192,tx=1024"`
	iface, rings, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return "", fmt.Errorf("%q has no interface; %s", s, want)
	}
	iface = strings.TrimSpace(iface)
	if !ifaceRe.MatchString(iface) {
		return "", fmt.Errorf("%q is not an interface name (1-15 of A-Z a-z 0-9 _ . -); %s", iface, want)
	}
	sizes := map[string]int64{}
	for _, part := range strings.Split(rings, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || (k != "rx" && k != "tx") {
			return "", fmt.Errorf("%q: ring %q is not rx=N or tx=N; %s", s, part, want)
		}
		if _, dup := sizes[k]; dup {
			return "", fmt.Errorf("%q sets %s twice", s, k)
		}
		n, err := units.ParseInt(v)
		if err != nil || n < 64 || n > 65536 {
			return "", fmt.Errorf("%q: %s=%s is not a ring size; want a whole number of descriptors, 64..65536", s, k, v)
		}
		sizes[k] = n
	}
	out := iface + ":"
	sep := ""
	for _, k := range []string{"rx", "tx"} {
		if n, ok := sizes[k]; ok {
			out += fmt.Sprintf("%s%s=%d", sep, k, n)
			sep = ","
		}
	}
	return out, nil
}

// normalizeTuning checks a key and value and returns the value in base units.
func normalizeTuning(key, value string) (string, error) {
	tk, ok := tuningKeys[key]
	if !ok {
		return "", fmt.Errorf("unknown kernel setting%s; allowed: %s", suggest(key, tuningKeyList()), tuningKeyNames())
	}
	return tk.normalize(strings.TrimSpace(value))
}

func tuningKeyList() []string {
	names := make([]string, 0, len(tuningKeys))
	for k := range tuningKeys {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
