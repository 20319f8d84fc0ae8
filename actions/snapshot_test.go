package actions

import (
	"slices"
	"strings"
	"testing"

	"github.com/rig-dev/rig/actions/actionstest"
	"github.com/rig-dev/rig/engine"
)

// The snapshot line prints a figure the engine leaves out as not supported, never as a zero.
func TestSnapshotLineNamesUncounted(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"index":1216,"take_ms":2.5,"bytes":4096}`, "(orders n/a (not supported by the engine), 4096 bytes, syncs n/a (not supported by the engine))"},
		{`{"index":1216,"take_ms":2.5,"bytes":4096,"orders":0,"syncs":3}`, "(orders 0, 4096 bytes, syncs 3)"},
	} {
		env := actionstest.NewEnv()
		env.OnAdmin = func(node, path string) ([]byte, error) { return []byte(c.body), nil }
		if err := (&Snapshot{}).Run(t.Context(), env); err != nil {
			t.Fatal(err)
		}
		if got := env.Calls(); !slices.Equal(got, []string{"admin node-0 " + engine.AdminSnapshot, "record snapshot"}) {
			t.Errorf("answer %s: calls %q; want the leader asked, then the event", c.body, got)
		}
		if evs := env.Events(); len(evs) != 1 || evs[0].Node != "node-0" || SnapshotOf(evs[0]) == nil ||
			SnapshotOf(evs[0]).Index == nil || *SnapshotOf(evs[0]).Index != 1216 {
			t.Errorf("answer %s: events %+v; want node-0's snapshot at index 1216", c.body, evs)
		}
		if lines := env.Lines(); len(lines) != 1 || !strings.Contains(lines[0], c.want) {
			t.Errorf("answer %s: progress %q, want %q", c.body, lines, c.want)
		}
	}
}
