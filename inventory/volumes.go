package inventory

import (
	"fmt"
	"path"
)

// Volume is one data volume of a node: how to find its device (the EBS volume id in the
// NVMe serial, or a device path) and what the stack provisioned, which the disk check
// (agent/disk.Check, Compare) holds the measured figures against.
type Volume struct {
	Name            string `json:"name"`
	VolumeID        string `json:"volume_id"`             // vol-… (or a /dev path, for hosts not provisioned by rig)
	DeviceName      string `json:"device_name,omitempty"` // where it is attached, e.g. /dev/sdg
	Type            string `json:"type,omitempty"`        // gp3 or io2
	SizeGiB         int    `json:"size_gib,omitempty"`
	IOPS            int    `json:"iops,omitempty"`
	ThroughputMiBps int    `json:"throughput_mibps,omitempty"` // gp3 only; 0: not provisioned
}

// DataVolumes are the node's data volumes: Volumes, or for an inventory that names only a
// data_device (written before volumes were listed, or by hand) that one, named "data" with
// nothing known of what was provisioned.
func (n Node) DataVolumes() []Volume {
	if len(n.Volumes) > 0 || n.DataDevice == "" {
		return n.Volumes
	}
	return []Volume{{Name: "data", VolumeID: n.DataDevice, DeviceName: n.DeviceName}}
}

// MountPoint is where volume v of the node is mounted under base (rig run --data-mount): base
// itself for the one data_device of an inventory that lists no volumes (as before volumes were
// listed), base/NAME for each listed volume, so that every volume has a folder of its own.
func (n Node) MountPoint(base string, v Volume) string {
	if len(n.Volumes) == 0 {
		return base
	}
	return path.Join(base, v.Name)
}

// Volume returns the node's data volume of that name.
func (n Node) Volume(name string) (Volume, bool) {
	for _, v := range n.DataVolumes() {
		if v.Name == name {
			return v, true
		}
	}
	return Volume{}, false
}

// VolumeNames lists the names of the node's data volumes.
func (n Node) VolumeNames() []string {
	var out []string
	for _, v := range n.DataVolumes() {
		out = append(out, v.Name)
	}
	return out
}

// checkVolumes checks node i's volumes: each name becomes a mount point, and each needs an id.
func checkVolumes(i int, n Node) error {
	seen := map[string]bool{}
	for j, v := range n.Volumes {
		at := fmt.Sprintf("nodes[%d].volumes[%d]", i, j)
		if err := CheckName(at+".name", v.Name); err != nil {
			return fmt.Errorf("inventory: %w", err)
		}
		if seen[v.Name] || v.VolumeID == "" {
			return fmt.Errorf("inventory: %s (%s): a volume needs a volume_id and a name no other volume of %s has", at, v.Name, n.Name)
		}
		seen[v.Name] = true
	}
	return nil
}
