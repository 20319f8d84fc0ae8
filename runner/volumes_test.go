package runner

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rig-dev/rig/agent/disk"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/target/local"
	"github.com/rig-dev/rig/target/targettest"
)

const volumeYAML = `
name: v
cluster: {servers: 2, clients: 1}
load: {probe_rate: 100/s}
duration: 5s
rounds: 2
matrix:
  disk.volume: [gp3-125, gp3-1000]
`

// volumedTarget is a target whose servers have data volumes, as the SSH target reads them from a
// stack's inventory.
type volumedTarget struct {
	targettest.Target
	servers []inventory.Node
}

func (t *volumedTarget) Servers(context.Context) ([]inventory.Node, error) { return t.servers, nil }

var _ target.Volumed = (*volumedTarget)(nil)

func twoVolumes(name string) inventory.Node {
	return inventory.Node{Name: name, Role: inventory.RoleServer, Volumes: []inventory.Volume{
		{Name: "gp3-125", VolumeID: "vol-0a", Type: "gp3", IOPS: 3000, ThroughputMiBps: 125},
		{Name: "gp3-1000", VolumeID: "vol-0b", Type: "gp3", IOPS: 4000, ThroughputMiBps: 1000},
	}}
}

func TestCheckVolumes(t *testing.T) {
	plan := planOf(t, volumeYAML)
	if got := VolumesAsked(plan); strings.Join(got, ",") != "gp3-125,gp3-1000" {
		t.Fatalf("asked %v", got)
	}
	// The local target has none: refused, saying it has the disk model instead.
	err := CheckVolumes(t.Context(), plan, local.New(local.Options{}))
	if !errors.Is(err, ErrDiskVolume) || !strings.Contains(err.Error(), "disk model, which the local target has instead") {
		t.Errorf("local target: %v", err)
	}
	// A stack whose servers have both: accepted.
	both := &volumedTarget{servers: []inventory.Node{twoVolumes("node-0"), twoVolumes("node-1")}}
	if err := CheckVolumes(t.Context(), plan, both); err != nil {
		t.Errorf("both volumes: %v", err)
	}
	// One server lacks one: refused, naming the volume, the server and the valid names.
	one := twoVolumes("node-1")
	one.Volumes = one.Volumes[:1]
	lacking := &volumedTarget{servers: []inventory.Node{twoVolumes("node-0"), one}}
	err = CheckVolumes(t.Context(), plan, lacking)
	if !errors.Is(err, ErrDiskVolume) || !strings.Contains(err.Error(), `"gp3-1000": node-1 of fake has no such data volume; valid: gp3-125`) {
		t.Errorf("lacking: %v", err)
	}
	// Run refuses it before anything starts.
	_, err = Run(t.Context(), plan, Options{Target: local.New(local.Options{}), ResultsDir: t.TempDir()})
	if !errors.Is(err, ErrDiskVolume) {
		t.Errorf("Run on the local target: %v", err)
	}
	// A plan without disk.volume is not asked about volumes.
	if err := CheckVolumes(t.Context(), planOf(t, partitionYAML), local.New(local.Options{})); err != nil {
		t.Errorf("no disk.volume: %v", err)
	}
}

type fakeChecker struct {
	m    disk.Measured
	err  error
	asks []disk.CheckOptions
}

func (c *fakeChecker) DiskCheck(_ context.Context, o disk.CheckOptions) (disk.Measured, error) {
	c.asks = append(c.asks, o)
	return c.m, c.err
}

func TestCheckVolume(t *testing.T) {
	v := twoVolumes("node-0").Volumes[1] // 1,000 MiB/s, 4,000 IOPS
	ok := &fakeChecker{m: disk.Measured{SeqWriteMBps: 1040, RandWriteIOPS: 3990, FioVersion: "fio-3.33"}}
	vc, err := CheckVolume(t.Context(), ok, "node-0", v, disk.CheckOptions{Dir: "/data/gp3-1000", Reuse: true})
	if err != nil || !vc.Compared || vc.Volume != "gp3-1000" || vc.Provisioned.ThroughputMiBps != 1000 || vc.Error != "" {
		t.Fatalf("delivered: %+v, %v", vc, err)
	}
	if a := ok.asks[0]; a.Dir != "/data/gp3-1000" || !a.Reuse {
		t.Errorf("asked %+v", a)
	}
	// A volume restored from a snapshot, not initialised: half its throughput.
	slow := &fakeChecker{m: disk.Measured{SeqWriteMBps: 520, RandWriteIOPS: 3990, FioVersion: "fio-3.33"}}
	vc, err = CheckVolume(t.Context(), slow, "node-0", v, disk.CheckOptions{Dir: "/data/gp3-1000", Reuse: true})
	if !errors.Is(err, disk.ErrBelowProvisioned) || vc.Error == "" || !strings.Contains(err.Error(), "node-0's data volume gp3-1000") ||
		!strings.Contains(err.Error(), "sequential write 520.0 MB/s is 50 %") || !strings.Contains(err.Error(), "snapshot") {
		t.Fatalf("slow: %+v, %v", vc, err)
	}
	// An inventory that does not say what was provisioned: measured and recorded, not compared.
	vc, err = CheckVolume(t.Context(), slow, "node-0", inventory.Volume{Name: "data", VolumeID: "/dev/nvme1n1"}, disk.CheckOptions{Dir: "/data", Reuse: true})
	if err != nil || vc.Compared || vc.Measured.SeqWriteMBps != 520 {
		t.Fatalf("unknown provisioning: %+v, %v", vc, err)
	}
	// fio missing on the node: the run stops, saying so.
	_, err = CheckVolume(t.Context(), &fakeChecker{err: disk.ErrNoFio}, "node-0", v, disk.CheckOptions{Dir: "/data/gp3-1000", Reuse: true})
	if !errors.Is(err, disk.ErrNoFio) {
		t.Fatalf("no fio: %v", err)
	}
}
