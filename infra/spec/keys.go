// Package spec is the light half of the infrastructure code: the cluster Spec, its validation, the
// instance and price tables and the stack-config reader. Both the Pulumi program (infra/,
// infra/cluster) and the rig binary import it; it must never import pulumi-aws, so that building
// the rig does not pay for compiling the AWS provider SDK.
package spec

// Namespace is the Pulumi config namespace of the project (the project name in Pulumi.yaml).
const Namespace = "rig"

// Config value types, as Pulumi.yaml spells them.
const (
	TypeString  = "string"
	TypeInteger = "integer"
	TypeBoolean = "boolean"
	TypeArray   = "array" // of strings
)

// Key describes one config key of the stack. Pulumi.yaml declares the same keys with the same
// types and defaults; a test in infra/cluster keeps the two in step.
type Key struct {
	Name        string // camelCase, without the namespace
	Type        string
	Default     any    // nil: no default (required, unless Generated)
	Secret      bool   // stored encrypted in the stack config
	Generated   bool   // `rig up` sets it when the stack config lacks it
	Description string // one line, shown by Pulumi and in `rig validate` errors
	// Example is one item of an array key, as errors about its shape show it.
	Example string
	// EmptyRefused says, for an array key, why a stack config may not give it as an empty list
	// ("": it may).
	EmptyRefused string
}

// Keys lists every config key the program reads, in the order plans print them.
var Keys = []Key{
	{Name: "serverInstanceType", Type: TypeString, Default: "c6in.16xlarge",
		Description: "EC2 instance type of the engine nodes (c6in.* or c7i.*; see infra/spec/instances.go)"},
	{Name: "clientInstanceType", Type: TypeString, Default: "c6in.4xlarge",
		Description: "EC2 instance type of the load-generator nodes"},
	{Name: "servers", Type: TypeInteger, Default: 3, Description: "number of engine nodes (>= 1)"},
	{Name: "clients", Type: TypeInteger, Default: 1, Description: "number of load-generator nodes (>= 1)"},
	{Name: "availabilityZone", Type: TypeString, Default: "",
		Description: "the one AZ every node and volume lives in (single-az; under multi-az node-0's, availabilityZones[0]); empty means <aws:region>a"},
	{Name: "placement", Type: TypeString, Default: "single-az",
		Description: "single-az (every node in availabilityZone, one cluster placement group) or multi-az (three AZs, a subnet each, node-i in availabilityZones[i mod 3])"},
	{Name: "availabilityZones", Type: TypeArray, Default: []string{}, Example: "us-east-1a",
		Description: "multi-az only: three distinct AZs of aws:region, e.g. [\"us-east-1a\", \"us-east-1b\", \"us-east-1c\"]; empty means <aws:region>a, b and c"},
	{Name: "placementStrategy", Type: TypeString, Default: "",
		Description: "the placement group's strategy: cluster (single-az, the only one allowed there), spread, partition or none (multi-az; a cluster group cannot span AZs); empty means cluster, or spread under multi-az"},
	{Name: "clientAvailabilityZone", Type: TypeString, Default: "",
		Description: "multi-az only: the clients' AZ, one of availabilityZones or a server's name (node-1: its AZ); empty means node-0's AZ"},
	{Name: "ami", Type: TypeString, Default: "",
		Description: "explicit AMI id (ami-...); empty means the latest AMI of amiFamily from the public SSM parameters"},
	{Name: "amiFamily", Type: TypeString, Default: "al2023", Description: "al2023 or ubuntu (x86_64); used when ami is empty"},
	{Name: "sshUser", Type: TypeString, Default: "",
		Description: "login user; empty means ec2-user (al2023, explicit ami) or ubuntu"},
	{Name: "volumeType", Type: TypeString, Default: "gp3", Description: "data volume type: gp3 or io2"},
	{Name: "volumeSize", Type: TypeInteger, Default: 200, Description: "data volume size in GiB"},
	{Name: "volumeIops", Type: TypeInteger, Default: 4000,
		Description: "provisioned IOPS of the data volume (gp3 3,000-80,000; io2 100-256,000)"},
	{Name: "volumeThroughput", Type: TypeInteger, Default: 1000,
		Description: "gp3 throughput in MiB/s (125-1,000 with the pinned provider); ignored for io2"},
	{Name: "dataVolumes", Type: TypeArray, Default: []string{}, Example: dataVolumeExample,
		EmptyRefused: "an empty list would quietly give every node the one default volume of the volume* keys; list the volumes, or remove rig:dataVolumes for that default",
		Description:  "several data volumes per node, each \"NAME type=gp3 size=GiB iops=N throughput=MiB/s\" (io2: no throughput); replaces the four volume keys above; a playbook picks one with disk.volume: NAME"},
	{Name: "rootVolumeSize", Type: TypeInteger, Default: 30, Description: "root volume (gp3) size in GiB"},
	{Name: "clientDataVolume", Type: TypeBoolean, Default: false,
		Description: "give the load-generator nodes a data volume like the servers'; by default they have only their root volume"},
	{Name: "operatorCidrs", Type: TypeArray, Example: "203.0.113.7/32",
		Description: "CIDRs allowed to reach TCP 22, e.g. [\"203.0.113.7/32\"]; the only ingress from outside the cluster"},
	{Name: "allowWideOperatorCidrs", Type: TypeBoolean, Default: false,
		Description: "accept operatorCidrs that together cover more than a /8 (16,777,216 IPv4 addresses, or 1/256 of IPv6); never the whole address space"},
	{Name: "publicKey", Type: TypeString,
		Description: "the operator's SSH public key (authorized_keys line) installed for the login user"},
	{Name: "owner", Type: TypeString, Description: "who to ask about these resources; goes into the owner tag"},
	{Name: "expiresInHours", Type: TypeInteger, Default: 8,
		Description: "hours after createdAt when `rig gc` may destroy the stack (1-720)"},
	{Name: "vpcId", Type: TypeString, Default: "", Description: "reuse this VPC (with subnetId) instead of creating one"},
	{Name: "subnetId", Type: TypeString, Default: "",
		Description: "reuse this subnet (with vpcId); it must be in availabilityZone and route to an internet gateway"},
	{Name: "retainBucket", Type: TypeBoolean, Default: true,
		Description: "keep the results bucket (and its archives) when the stack is destroyed"},
	{Name: "resultsExpireDays", Type: TypeInteger, Default: 30,
		Description: "days after which objects in the results bucket expire (S3 lifecycle rule); 0 keeps them for ever"},
	{Name: "serverCapacityReservationId", Type: TypeString, Default: "",
		Description: "launch the servers into this EC2 capacity reservation (cr-...): one for serverInstanceType in availabilityZone, made in the stack's placement group to reserve room in it"},
	{Name: "clientCapacityReservationId", Type: TypeString, Default: "",
		Description: "launch the clients into this EC2 capacity reservation (cr-...) for clientInstanceType in availabilityZone"},
	{Name: "clientInPlacementGroup", Type: TypeBoolean, Default: true,
		Description: "launch the clients in the servers' cluster placement group (lowest client latency); false trades that latency for fewer insufficient-capacity failures"},
	{Name: "createdAt", Type: TypeString, Default: "", Generated: true,
		Description: "RFC 3339 creation time, set once by `rig up`; empty means the time of the current update"},
	{Name: "generation", Type: TypeString, Default: "", Generated: true,
		Description: "id of the stack's current cluster, set by `rig up` when missing (with a new createdAt) and removed by `rig down`; in the rig-generation tag"},
	{Name: "hostKeySeed", Type: TypeString, Secret: true, Generated: true,
		Description: "secret seed of the nodes' SSH host keys; `rig up` generates it, or: pulumi config set --secret hostKeySeed $(openssl rand -hex 32)"},
}

// KeyByName returns the key with the given name (without namespace).
func KeyByName(name string) (Key, bool) {
	for _, k := range Keys {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

// ExternalKeys are keys of other namespaces the stack config may carry.
var ExternalKeys = map[string]bool{
	"aws:region":                    true,
	"aws:profile":                   true,
	"aws:sharedCredentialsFiles":    true,
	"aws:skipCredentialsValidation": true,
	"aws:skipMetadataApiCheck":      true,
	"aws:skipRequestingAccountId":   true,
	"aws:defaultTags":               true,
	"aws:assumeRole":                true,
}
