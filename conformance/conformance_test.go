package conformance

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/target/local"
)

// The check starts its cluster as a run of its own name, so the address locks, leases and disks
// it holds name it: a run refused beside it is told "in use by run 20260102-030405-check-t",
// not "in use by run  (pid N)".
func TestCheckStartsAsARunOfItsOwnName(t *testing.T) {
	pb, err := playbooks.Parse("t.yaml", []byte("name: t\ncluster: {servers: 3}\nload: {probe_rate: 1/s}\nduration: 9s\n"), testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	var got target.StartOptions
	stop := errors.New("stop here")
	was := startLocal
	t.Cleanup(func() { startLocal = was })
	startLocal = func(_ context.Context, _ local.Options, so target.StartOptions) (target.Cluster, error) {
		got = so
		return nil, stop
	}
	dir := filepath.Join(t.TempDir(), "20260102-030405-check-t")
	if _, err := Run(t.Context(), Options{Playbook: pb, Dir: dir}); !errors.Is(err, stop) {
		t.Fatalf("Run: %v", err)
	}
	if got.Run != "20260102-030405-check-t" {
		t.Errorf("the check's cluster starts as run %q; want its folder's name", got.Run)
	}
}
