// Package loadavg reads /proc/loadavg: the one reader the runner, the agent's facts and sampler
// and the benchmarks share.
package loadavg

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LoadAvg is the 1, 5 and 15 minute load averages.
type LoadAvg struct {
	Load1, Load5, Load15 float64
}

// Read reads proc/loadavg under root ("/" on a node; a test folder in tests).
func Read(root string) (LoadAvg, error) {
	path := filepath.Join(root, "proc", "loadavg")
	b, err := os.ReadFile(path)
	if err != nil {
		return LoadAvg{}, fmt.Errorf("read load average: %w", err)
	}
	la, err := Parse(string(b))
	if err != nil {
		return LoadAvg{}, fmt.Errorf("%s: %w", path, err)
	}
	return la, nil
}

// Parse reads the first three fields of /proc/loadavg's content ("0.25 0.65 0.47 1/97 13445").
func Parse(s string) (LoadAvg, error) {
	f := strings.Fields(s)
	if len(f) < 3 {
		return LoadAvg{}, fmt.Errorf("%q: want at least three load averages", s)
	}
	var v [3]float64
	for i := range v {
		x, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return LoadAvg{}, fmt.Errorf("field %d %q: not a number", i+1, f[i])
		}
		v[i] = x
	}
	return LoadAvg{v[0], v[1], v[2]}, nil
}

// Slice is the three averages as [1 min, 5 min, 15 min], as manifests record them.
func (l LoadAvg) Slice() []float64 { return []float64{l.Load1, l.Load5, l.Load15} }

// Now is this machine's load average as a slice, or nil when it cannot be read (a figure left
// out, not a failure).
func Now() []float64 {
	la, err := Read("/")
	if err != nil {
		return nil
	}
	return la.Slice()
}
