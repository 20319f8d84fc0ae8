package spec

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Volume types the rig provisions.
const (
	VolumeGP3 = "gp3"
	VolumeIO2 = "io2"
)

// AMI families resolved through the public SSM parameters.
const (
	FamilyAL2023 = "al2023"
	FamilyUbuntu = "ubuntu"
)

// DataDeviceName is where a node's first data volume is attached (the others: DataVolume.Device).
// On Nitro instances it shows up as an NVMe device whose serial is the volume id, which is how
// the agent finds it.
const DataDeviceName = "/dev/sdf"

// Spec is one test cluster: what Deploy builds and what Validate checks.
type Spec struct {
	Stack  string // stack name; goes into names and the rig-stack tag
	Region string // aws:region
	// Profile is aws:profile: Pulumi, preflight, gc and the archive all use it (infra/awsconf).
	Profile string

	ServerInstanceType string
	ClientInstanceType string
	Servers            int
	Clients            int
	AvailabilityZone   string
	// Placement is PlacementSingleAZ ("" too: every node in AvailabilityZone) or PlacementMultiAZ
	// (node-i in Zones()[i mod 3]); placement.go has the rules.
	Placement string
	// AvailabilityZones are multi-az's three AZs; empty means <region>a, b and c (Zones).
	AvailabilityZones []string
	// PlacementStrategy of the placement group: cluster, spread, partition or none; "" means the
	// placement's default (GroupStrategy).
	PlacementStrategy string
	// ClientAvailabilityZone is, under multi-az, the clients' AZ or the server whose AZ they share;
	// "" means node-0's.
	ClientAvailabilityZone string

	AMI       string
	AMIFamily string
	SSHUser   string

	VolumeType       string
	VolumeSize       int // GiB
	VolumeIOPS       int
	VolumeThroughput int // MiB/s, gp3 only
	RootVolumeSize   int // GiB
	// ClientDataVolume gives the clients a data volume like the servers'; by default they have
	// only their root volume (the load generator writes little, and a volume costs money).
	ClientDataVolume bool
	// DataVolumes, when given, replace the one volume of the four volume keys (Volumes).
	DataVolumes []DataVolume

	OperatorCIDRs []string
	// AllowWideOperatorCIDRs accepts operator CIDRs whose union is wider than a /8 (see
	// MaxOperatorPrefixShare); it is set in the stack config, so the choice stays recorded there.
	AllowWideOperatorCIDRs bool
	PublicKey              string
	Owner                  string

	ExpiresInHours int
	CreatedAt      time.Time // zero: not pinned yet (rig up pins it)
	// Generation tells apart the successive clusters of one stack name: `rig up` makes a new one
	// when the stack has none (and sets CreatedAt anew), `rig down` clears it. "": not set yet.
	Generation string

	VPCID        string
	SubnetID     string
	RetainBucket bool
	// ResultsExpireDays is the lifecycle of the results bucket's objects; 0 keeps them.
	ResultsExpireDays int
	// ServerCapacityReservationID and ClientCapacityReservationID launch each role into an EC2
	// capacity reservation: a reservation matches one instance type in one AZ, so one per role.
	ServerCapacityReservationID string
	ClientCapacityReservationID string
	// ClientInPlacementGroup puts the clients in the servers' cluster placement group.
	ClientInPlacementGroup bool

	HostKeySeed string // secret; never printed
}

// Severity of a problem: errors stop the deployment, warnings are printed and allowed.
type Severity int

const (
	SeverityError Severity = iota
	SeverityWarning
)

func (s Severity) String() string {
	if s == SeverityWarning {
		return "warning"
	}
	return "error"
}

// Problem is one thing wrong with a spec, naming the field, the value and what would be valid.
type Problem struct {
	Severity Severity
	Field    string // config key without namespace, e.g. "volumeThroughput"
	Value    string
	Allowed  string // the valid range or values
	Reason   string // why, when the range alone does not say it
	Pos      string // "file:line:column" when the value came from a file
	// Because is the config key whose value makes the rule apply (placement for the keys a
	// multi-az placement constrains): where the problem points when Field is left at its default.
	Because string
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.Severity.String())
	b.WriteString(": ")
	if p.Pos != "" {
		b.WriteString(p.Pos)
		b.WriteString(": ")
	}
	b.WriteString(QualifiedKey(p.Field))
	b.WriteString(" = ")
	b.WriteString(p.Value)
	if p.Allowed != "" {
		b.WriteString(": allowed ")
		b.WriteString(p.Allowed)
	}
	if p.Reason != "" {
		b.WriteString(" (")
		b.WriteString(p.Reason)
		b.WriteString(")")
	}
	return b.String()
}

// QualifiedKey adds the rig namespace to a key that has none.
func QualifiedKey(name string) string {
	if strings.Contains(name, ":") {
		return name
	}
	return Namespace + ":" + name
}

// Problems is every problem found at once.
type Problems []Problem

// ErrInvalid marks a spec with at least one error-level problem.
var ErrInvalid = errors.New("invalid cluster spec")

// Errors returns the error-level problems.
func (ps Problems) Errors() Problems { return ps.filter(SeverityError) }

// Warnings returns the warning-level problems.
func (ps Problems) Warnings() Problems { return ps.filter(SeverityWarning) }

func (ps Problems) filter(s Severity) Problems {
	var out Problems
	for _, p := range ps {
		if p.Severity == s {
			out = append(out, p)
		}
	}
	return out
}

// Err returns nil when there are no errors, else an error wrapping ErrInvalid that lists them all.
func (ps Problems) Err() error {
	errs := ps.Errors()
	if len(errs) == 0 {
		return nil
	}
	lines := make([]string, len(errs))
	for i, p := range errs {
		lines[i] = p.String()
	}
	return fmt.Errorf("%w: %d problem(s):\n  %s", ErrInvalid, len(errs), strings.Join(lines, "\n  "))
}

// Field returns the problems about one field.
func (ps Problems) Field(name string) Problems {
	var out Problems
	for _, p := range ps {
		if p.Field == name {
			out = append(out, p)
		}
	}
	return out
}

// FromConfig builds a Spec from raw config values keyed by name without namespace, the way the
// Pulumi Go SDK returns them: scalars as their text, arrays as JSON. Missing keys take their
// default. Values that do not parse are problems, reported all at once; region and stack come
// from outside the rig namespace.
func FromConfig(stack, region string, raw map[string]string) (Spec, Problems) {
	var probs Problems
	str := func(name string) string {
		if v, ok := raw[name]; ok {
			return strings.TrimSpace(v)
		}
		k, _ := KeyByName(name)
		if d, ok := k.Default.(string); ok {
			return d
		}
		return ""
	}
	integer := func(name string) int {
		v, ok := raw[name]
		if !ok {
			k, _ := KeyByName(name)
			d, _ := k.Default.(int)
			return d
		}
		// Exactly what the Pulumi engine accepts for an integer (strconv.Atoi, no trimming), so a
		// value rig accepts is never refused by pulumi up.
		n, err := strconv.Atoi(v)
		if err != nil {
			probs = append(probs, Problem{Field: name, Value: strconv.Quote(v), Allowed: "an integer"})
		}
		return n
	}
	boolean := func(name string) bool {
		v, ok := raw[name]
		if !ok {
			k, _ := KeyByName(name)
			d, _ := k.Default.(bool)
			return d
		}
		// The engine accepts only these two spellings for a boolean.
		if v != "true" && v != "false" {
			probs = append(probs, Problem{Field: name, Value: strconv.Quote(v), Allowed: "true or false"})
		}
		return v == "true"
	}
	strings_ := func(name string) []string {
		v, ok := raw[name]
		if !ok || strings.TrimSpace(v) == "" {
			return nil
		}
		var out []string
		if err := json.Unmarshal([]byte(v), &out); err != nil {
			k, _ := KeyByName(name)
			probs = append(probs, Problem{Field: name, Value: v, Allowed: fmt.Sprintf("a list of strings, e.g. [%q]", k.Example)})
		}
		return out
	}

	s := Spec{
		Stack:                       stack,
		Region:                      strings.TrimSpace(region),
		ServerInstanceType:          str("serverInstanceType"),
		ClientInstanceType:          str("clientInstanceType"),
		Servers:                     integer("servers"),
		Clients:                     integer("clients"),
		AvailabilityZone:            str("availabilityZone"),
		Placement:                   str("placement"),
		AvailabilityZones:           strings_("availabilityZones"),
		PlacementStrategy:           str("placementStrategy"),
		ClientAvailabilityZone:      str("clientAvailabilityZone"),
		AMI:                         str("ami"),
		AMIFamily:                   str("amiFamily"),
		SSHUser:                     str("sshUser"),
		VolumeType:                  str("volumeType"),
		VolumeSize:                  integer("volumeSize"),
		VolumeIOPS:                  integer("volumeIops"),
		VolumeThroughput:            integer("volumeThroughput"),
		RootVolumeSize:              integer("rootVolumeSize"),
		ClientDataVolume:            boolean("clientDataVolume"),
		OperatorCIDRs:               strings_("operatorCidrs"),
		AllowWideOperatorCIDRs:      boolean("allowWideOperatorCidrs"),
		PublicKey:                   str("publicKey"),
		Owner:                       str("owner"),
		ExpiresInHours:              integer("expiresInHours"),
		VPCID:                       str("vpcId"),
		SubnetID:                    str("subnetId"),
		RetainBucket:                boolean("retainBucket"),
		ResultsExpireDays:           integer("resultsExpireDays"),
		ServerCapacityReservationID: str("serverCapacityReservationId"),
		ClientCapacityReservationID: str("clientCapacityReservationId"),
		ClientInPlacementGroup:      boolean("clientInPlacementGroup"),
		HostKeySeed:                 raw["hostKeySeed"],
		Generation:                  str("generation"),
	}
	var vprobs Problems
	s.DataVolumes, vprobs = parseDataVolumes(raw)
	probs = append(probs, vprobs...)
	if s.Generation != "" && !generationPattern.MatchString(s.Generation) {
		probs = append(probs, Problem{Field: "generation", Value: strconv.Quote(s.Generation),
			Allowed: "what rig up generates, e.g. " + NewGeneration(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)),
			Reason:  "remove it and rig up makes a new one"})
	}
	if s.AvailabilityZone == "" && s.Region != "" {
		s.AvailabilityZone = s.Region + "a"
		if s.MultiAZ() {
			s.AvailabilityZone = s.Zones()[0] // node-0's
		}
	}
	if v := str("createdAt"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			probs = append(probs, Problem{Field: "createdAt", Value: strconv.Quote(v), Allowed: "an RFC 3339 time, e.g. 2025-06-01T12:00:00Z"})
		}
		s.CreatedAt = t.UTC()
	}
	return s, probs
}

// LoginUser is the SSH user of the nodes.
func (s Spec) LoginUser() string {
	switch {
	case s.SSHUser != "":
		return s.SSHUser
	case s.AMI == "" && s.AMIFamily == FamilyUbuntu:
		return "ubuntu"
	default:
		return "ec2-user"
	}
}

// ExpiresAt is CreatedAt plus ExpiresInHours.
func (s Spec) ExpiresAt() time.Time {
	return s.CreatedAt.Add(time.Duration(s.ExpiresInHours) * time.Hour)
}

// Node is one host the spec asks for.
type Node struct {
	Name         string // node-0.. for servers, client-0.. for clients
	Role         string // "server" or "client"
	InstanceType string
	DataVolume   bool   // gets a data volume (servers always; clients when ClientDataVolume)
	Zone         string // its availability zone (Spec.NodeZone)
}

// Nodes lists the hosts in inventory order: servers first, then clients.
func (s Spec) Nodes() []Node {
	var out []Node
	for i := 0; i < s.Servers; i++ {
		out = append(out, Node{Name: fmt.Sprintf("node-%d", i), Role: "server", InstanceType: s.ServerInstanceType, DataVolume: true,
			Zone: s.serverZone(i)})
	}
	client, _ := s.ClientZone()
	for i := 0; i < s.Clients; i++ {
		out = append(out, Node{Name: fmt.Sprintf("client-%d", i), Role: "client", InstanceType: s.ClientInstanceType,
			DataVolume: s.ClientDataVolume, Zone: client})
	}
	return out
}

// NodesWithData is how many nodes get the data volumes.
func (s Spec) NodesWithData() int {
	n := s.Servers
	if s.ClientDataVolume {
		n += s.Clients
	}
	return n
}

// Tag keys the rig puts on every taggable resource; cloud-side gc reads them.
const (
	TagStack      = "rig-stack"
	TagGeneration = "rig-generation"
	TagOwner      = "owner"
	TagCreatedAt  = "created-at"
	TagExpiresAt  = "expires-at"
)

// Tags are put on every taggable resource, so that an account's owner can see what a resource
// belongs to, which cluster of that stack name it is, who to ask and when it may go.
func (s Spec) Tags() map[string]string {
	t := map[string]string{
		TagStack:     s.Stack,
		TagOwner:     s.Owner,
		TagCreatedAt: s.CreatedAt.UTC().Format(time.RFC3339),
		TagExpiresAt: s.ExpiresAt().UTC().Format(time.RFC3339),
	}
	if s.Generation != "" {
		t[TagGeneration] = s.Generation
	}
	return t
}

var generationPattern = regexp.MustCompile(`^g[0-9]{8}t[0-9]{6}-[0-9a-f]{8}$`)

// NewGeneration makes a generation id: its creation time (so that ids sort by age and say
// when) and 32 random bits (so that two ups in one second differ).
func NewGeneration(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "g" + strings.ToLower(now.UTC().Format("20060102T150405")) + "-" + hex.EncodeToString(b[:])
}
