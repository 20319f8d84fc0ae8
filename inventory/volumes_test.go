package inventory

import (
	"strings"
	"testing"
)

func TestNodeVolumes(t *testing.T) {
	listed := Node{Name: "node-0", Volumes: []Volume{{Name: "gp3-125", VolumeID: "vol-0a"}, {Name: "gp3-1000", VolumeID: "vol-0b"}},
		DataDevice: "vol-0a"}
	if got := strings.Join(listed.VolumeNames(), ","); got != "gp3-125,gp3-1000" {
		t.Errorf("names %s", got)
	}
	v, ok := listed.Volume("gp3-1000")
	if !ok || listed.MountPoint("/data", v) != "/data/gp3-1000" {
		t.Errorf("gp3-1000: %+v %v at %s", v, ok, listed.MountPoint("/data", v))
	}
	// An inventory written before volumes were listed (or by hand): its data_device is the one
	// volume, named data, mounted at the base itself as before.
	old := Node{Name: "node-0", DataDevice: "/dev/nvme1n1"}
	vols := old.DataVolumes()
	if len(vols) != 1 || vols[0].Name != "data" || vols[0].VolumeID != "/dev/nvme1n1" || old.MountPoint("/data", vols[0]) != "/data" {
		t.Errorf("data_device only: %+v", vols)
	}
	if len((Node{Name: "node-0"}).DataVolumes()) != 0 {
		t.Error("a node without data has a volume")
	}
}

func TestValidateVolumes(t *testing.T) {
	for name, c := range map[string]struct {
		vols []Volume
		want string
	}{
		"a path as name": {[]Volume{{Name: "../etc", VolumeID: "vol-0a"}}, "nodes[0].volumes[0].name"},
		"same name":      {[]Volume{{Name: "a", VolumeID: "vol-0a"}, {Name: "a", VolumeID: "vol-0b"}}, "nodes[0].volumes[1] (a)"},
		"no id":          {[]Volume{{Name: "a"}}, "needs a volume_id"},
	} {
		inv := Inventory{Target: TargetLocal, Nodes: []Node{{Name: "node-0", Role: RoleServer, Address: "127.0.0.1", Volumes: c.vols}}}
		if err := inv.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}
