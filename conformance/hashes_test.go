package conformance

import (
	"strings"
	"testing"

	"github.com/rig-dev/rig/engine"
)

// TestCompareHashes: hashes are compared at one log position; differing snapshot bytes say what
// they are; a figure the engine does not count is never printed as a zero.
func TestCompareHashes(t *testing.T) {
	names := []string{"node-0", "node-1", "node-2"}
	noIntro := []string{engine.UnsupportedStateHash, engine.UnsupportedOrders}
	snap := func(hash string, at uint64) engine.Status {
		return engine.Status{AppliedIndex: 9000, StateHash: hash, StateHashIndex: at, Unsupported: noIntro}
	}
	live := func(hash string, applied uint64, orders int) engine.Status {
		return engine.Status{AppliedIndex: applied, StateHash: hash, Orders: orders, Unsupported: []string{engine.UnsupportedOrders}}
	}
	for _, c := range []struct {
		name      string
		sts       []engine.Status
		met, pass bool
		want      []string // in the detail
		not       []string // never in the detail
	}{
		{"snapshot bytes differ (a clock in the snapshot)", []engine.Status{snap("a", 100), snap("b", 100), snap("c", 100)}, true, false,
			[]string{"node-0 snapshot bytes at 100 hash a", engine.SnapshotHashNote}, nil},
		{"snapshot bytes agree", []engine.Status{snap("a", 100), snap("a", 100), snap("a", 100)}, true, true,
			[]string{"node-2 snapshot bytes at 100 hash a"}, []string{engine.SnapshotHashNote}},
		{"no snapshot hashed yet", []engine.Status{snap("", 0), snap("", 0), snap("", 0)}, true, false,
			[]string{"node-0 no snapshot hashed yet"}, []string{"snapshot bytes at 9000"}},
		{"snapshots of different positions", []engine.Status{snap("a", 100), snap("a", 100), snap("b", 200)}, false, false, nil, nil},
		{"live state without order counts", []engine.Status{live("h", 7, 0), live("h", 7, 0), live("h", 7, 0)}, true, true,
			[]string{"node-0 state at 7 orders " + engine.NotSupported + " hash h"}, []string{"orders 0"}},
		{"live state differs", []engine.Status{live("h", 7, 0), live("h", 7, 0), live("x", 7, 0)}, true, false,
			[]string{"node-2 state at 7"}, []string{engine.SnapshotHashNote}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sts := map[string]engine.Status{}
			for i, st := range c.sts {
				sts[names[i]] = st
			}
			met, pass, detail := compareHashes(names, sts, 10)
			if met != c.met || pass != c.pass {
				t.Errorf("met %v pass %v, want %v %v: %s", met, pass, c.met, c.pass, detail)
			}
			for _, w := range c.want {
				if !strings.Contains(detail, w) {
					t.Errorf("detail lacks %q: %s", w, detail)
				}
			}
			for _, w := range c.not {
				if strings.Contains(detail, w) {
					t.Errorf("detail has %q: %s", w, detail)
				}
			}
		})
	}
}
