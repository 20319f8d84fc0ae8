// Package inventory is the shape every target yields (docs/architecture.md, "Inventory"): the same
// JSON from the local target and from Pulumi stack outputs, so the runner never knows which one it
// is talking to.
package inventory

import (
	"context"
	"encoding/json"
	"fmt"
	"path"

	"github.com/rig-dev/rig/internal/untrusted"
)

// Roles a node can have.
const (
	RoleServer = "server"
	RoleClient = "client"
)

// TargetLocal is the Target of an inventory whose nodes are folders and loopback addresses on
// this machine (target/local); any other is reached over SSH.
const TargetLocal = "local"

// Inventory lists the nodes of one test cluster.
type Inventory struct {
	Target    string `json:"target"` // TargetLocal or "aws"
	Nodes     []Node `json:"nodes"`
	Bucket    string `json:"bucket,omitempty"`
	ExpiresAt string `json:"expires_at,omitempty"`
}

// Node is one host (or, on the local target, one folder and loopback address).
type Node struct {
	Name           string `json:"name"`
	Role           string `json:"role"`
	Address        string `json:"address"`
	PrivateAddress string `json:"private_address,omitempty"`
	SSH            *SSH   `json:"ssh,omitempty"`
	DataDevice     string `json:"data_device,omitempty"`
	DeviceName     string `json:"device_name,omitempty"`
	// Volumes are the node's data volumes (a stack's rig:dataVolumes, or its one volume); a
	// playbook's disk.volume picks one by name. DataDevice and DeviceName are the first's.
	Volumes      []Volume `json:"volumes,omitempty"`
	InstanceType string   `json:"instance_type,omitempty"`
	// Dir is the node's root folder on the local target; empty on remote targets.
	Dir string `json:"dir,omitempty"`
}

// Volume is one data volume of a node: how to find its device (the EBS volume id in the
// NVMe serial, or a device path) and what the stack provisioned, which the disk check
// (agent/diskcheck) holds the measured figures against.
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

// SSH says how to reach a node and which host key it must present.
type SSH struct {
	User    string `json:"user"`
	Port    int    `json:"port"`
	HostKey string `json:"host_key"` // authorized_keys format, e.g. "ssh-ed25519 AAAA..."
}

// Target yields the inventory of a cluster: the local target builds one on this machine, the
// Pulumi target reads stack outputs.
type Target interface {
	Name() string
	Inventory(ctx context.Context) (*Inventory, error)
}

// Servers returns the server nodes in inventory order.
func (inv *Inventory) Servers() []Node { return inv.byRole(RoleServer) }

// Clients returns the client nodes in inventory order.
func (inv *Inventory) Clients() []Node { return inv.byRole(RoleClient) }

func (inv *Inventory) byRole(role string) []Node {
	var out []Node
	for _, n := range inv.Nodes {
		if n.Role == role {
			out = append(out, n)
		}
	}
	return out
}

// Node returns the node with the given name.
func (inv *Inventory) Node(name string) (Node, bool) {
	for _, n := range inv.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// Validate checks the fields every consumer relies on.
func (inv *Inventory) Validate() error {
	if len(inv.Nodes) == 0 {
		return fmt.Errorf("inventory: no nodes")
	}
	seen := map[string]bool{}
	for i, n := range inv.Nodes {
		switch {
		case CheckName(fmt.Sprintf("nodes[%d].name", i), n.Name) != nil:
			return fmt.Errorf("inventory: %w", CheckName(fmt.Sprintf("nodes[%d].name", i), n.Name))
		case seen[n.Name]:
			return fmt.Errorf("inventory: nodes[%d].name %q appears twice", i, n.Name)
		case n.Role != RoleServer && n.Role != RoleClient:
			return fmt.Errorf("inventory: nodes[%d].role is %q, want %q or %q", i, n.Role, RoleServer, RoleClient)
		case n.Address == "":
			return fmt.Errorf("inventory: nodes[%d].address is empty", i)
		case inv.Target != TargetLocal && (n.SSH == nil || n.SSH.HostKey == ""):
			return fmt.Errorf("inventory: nodes[%d] (%s) has no ssh.host_key: host keys must be known before the first connection", i, n.Name)
		}
		seen[n.Name] = true
		vols := map[string]bool{}
		for j, v := range n.Volumes {
			at := fmt.Sprintf("nodes[%d].volumes[%d]", i, j)
			if err := CheckName(at+".name", v.Name); err != nil {
				return fmt.Errorf("inventory: %w", err) // it becomes a mount point
			}
			if vols[v.Name] || v.VolumeID == "" {
				return fmt.Errorf("inventory: %s (%s): a volume needs a volume_id and a name no other volume of %s has", at, v.Name, n.Name)
			}
			vols[v.Name] = true
		}
	}
	return nil
}

// Load reads an inventory JSON file and validates it.
func Load(path string) (*Inventory, error) {
	b, err := untrusted.ReadFile(path, "inventory") // a regular file of at most 1 MiB
	if err == nil {
		err = untrusted.Check(path, b) // JSON is YAML: nesting and values bounded before decoding
	}
	if err != nil {
		return nil, fmt.Errorf("read inventory: %w", err)
	}
	var inv Inventory
	if err := json.Unmarshal(b, &inv); err != nil {
		return nil, fmt.Errorf("parse inventory %s: %w", path, err)
	}
	if err := inv.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &inv, nil
}

// FileTarget is an existing cluster described by an inventory JSON file (e.g. written by
// `rig up`, or by hand for machines provisioned elsewhere).
type FileTarget struct{ Path string }

// Name is "inventory:<path>".
func (f FileTarget) Name() string { return "inventory:" + f.Path }

// Inventory loads and validates the file.
func (f FileTarget) Inventory(context.Context) (*Inventory, error) { return Load(f.Path) }
