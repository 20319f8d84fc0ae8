// Package inventory is the shape every target yields (docs/architecture.md, "Inventory"): the same
// JSON from the local target and from Pulumi stack outputs, so the runner never knows which one it
// is talking to.
package inventory

import (
	"context"
	"encoding/json"
	"fmt"

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
	// Placement is the stack's rig:placement ("single-az" or "multi-az"); empty on the local
	// target and in inventories written before it was recorded.
	Placement string `json:"placement,omitempty"`
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
	InstanceType   string `json:"instance_type,omitempty"`
	// AvailabilityZone is where the stack put the node; empty off AWS.
	AvailabilityZone string `json:"availability_zone,omitempty"`
	// Dir is the node's root folder on the local target; empty on remote targets.
	Dir string `json:"dir,omitempty"`

	// Volumes are the node's data volumes (a stack's rig:dataVolumes, or its one volume); a
	// playbook's disk.volume picks one by name. DataDevice and DeviceName are the first's.
	Volumes []Volume `json:"volumes,omitempty"`
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
		if err := checkVolumes(i, n); err != nil {
			return err
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
