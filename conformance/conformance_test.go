package conformance

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/target/local"
	"github.com/rig-dev/rig/target/targettest"
)

// onFake has the check start its cluster on tgt instead of the local target.
func onFake(t *testing.T, tgt *targettest.Target) {
	was := startLocal
	t.Cleanup(func() { startLocal = was })
	startLocal = func(ctx context.Context, _ local.Options, so target.StartOptions) (target.Cluster, error) {
		return tgt.Start(ctx, so)
	}
}

func threeServers(t *testing.T) *playbooks.Playbook {
	pb, err := playbooks.Parse("t.yaml", []byte("name: t\ncluster: {servers: 3}\nload: {probe_rate: 1/s}\nduration: 9s\n"), testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	return pb
}

// The check starts its cluster as a run of its own name, so the address locks, leases and disks
// it holds name it: a run refused beside it is told "in use by run 20260102-030405-check-t",
// not "in use by run  (pid N)".
func TestCheckStartsAsARunOfItsOwnName(t *testing.T) {
	stop := errors.New("stop here")
	tgt := &targettest.Target{StartErr: stop}
	onFake(t, tgt)
	dir := filepath.Join(t.TempDir(), "20260102-030405-check-t")
	if _, err := Run(t.Context(), Options{Playbook: threeServers(t), Dir: dir}); !errors.Is(err, stop) {
		t.Fatalf("Run: %v", err)
	}
	if asked := tgt.Asked(); len(asked) != 1 || asked[0].Run != "20260102-030405-check-t" {
		t.Errorf("the check's cluster starts as %+v; want one start as run named by its folder", asked)
	}
}

// An engine that exits as it launches fails the launch check naming the node, the checks that
// need a running cluster are skipped rather than failed one timeout after another, and the
// cluster is stopped.
func TestEngineExitingAtLaunchSkipsTheRest(t *testing.T) {
	c := targettest.NewCluster()
	c.ExitAtStart = "node-1"
	onFake(t, &targettest.Target{Cluster: c})
	rs, err := Run(t.Context(), Options{Playbook: threeServers(t), Dir: t.TempDir(), Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	byName := map[string]Result{}
	for _, r := range rs {
		byName[r.Check] = r
	}
	if r := byName[CheckLaunchPhases]; r.Pass || !strings.Contains(r.Seen, "node-1:  (no ready within") || !strings.Contains(r.Seen, "node-0: ready;") {
		t.Errorf("launch: %+v; want a failure naming node-1, and node-0 ready", r)
	}
	for _, check := range []string{CheckOneLeader, CheckLoadHashes, CheckSnapshotIndex, CheckStepDown, CheckFinalHashes} {
		if r, ok := byName[check]; !ok || !r.Skipped {
			t.Errorf("%s: %+v; want it skipped", check, r)
		}
	}
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		if !c.Called(n + " POST /engine/start") {
			t.Errorf("%s's engine was never started; calls %q", n, c.Calls())
		}
	}
	if !c.Stopped() || !slices.Contains(c.Calls(), " stop") {
		t.Error("the cluster was not stopped")
	}
}
