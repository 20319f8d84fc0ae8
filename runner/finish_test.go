package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rig-dev/rig/internal/testfs"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/target/targettest"
)

// A results disk that fills up mid-run (a real tmpfs, filled to its last byte) fails the run,
// and its manifest says so: failed, with the error, not `running` as the last write that fit
// left it. The reserve that made room for that write is gone once the run ends.
func TestFullResultsDiskLeavesTheManifestFailed(t *testing.T) {
	results := testfs.Tmpfs(t, 8<<20)
	c := targettest.NewCluster()
	var fill sync.Once
	c.OnCall = func(node, call string) {
		if strings.HasPrefix(call, "POST /engine/start") {
			fill.Do(func() { testfs.Fill(t, filepath.Join(results, "filler"), 0) })
		}
	}
	res := runFake(t, context.Background(), &targettest.Target{Cluster: c}, plan(t, "1s", "timeline:\n  - {at: 100ms, kill: {node: node-1, signal: KILL}}\n"),
		func(o *Options) { o.ResultsDir = results })
	if res.err == nil || !strings.Contains(res.err.Error(), "no space left on device") {
		t.Fatalf("run error %v; want it to name ENOSPC", res.err)
	}
	if res.man.Status != rundir.StatusFailed || !strings.Contains(res.man.Error, "no space left on device") {
		t.Errorf("manifest status %q error %q; want failed naming ENOSPC", res.man.Status, res.man.Error)
	}
	if _, err := os.Stat(filepath.Join(res.outs[0].Dir, recordReserveFile)); !os.IsNotExist(err) {
		t.Errorf("the reserve is left in the run folder: %v", err)
	}
}
