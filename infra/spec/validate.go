package spec

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/rig-dev/rig/internal/units"
)

// Volume limits. gp3 follows AWS as of the September 2025 increase (80,000 IOPS, 2,000 MiB/s,
// 64 TiB), except throughput: the pinned provider, pulumi-aws v6.83.4 (terraform-provider-aws
// v5), still validates gp3 throughput as 125-1,000 MiB/s and would fail the update after the
// network and instances exist, so the rig refuses it up front.
const (
	GP3MinIOPS              = 3000
	GP3MaxIOPS              = 80000
	GP3MinThroughput        = 125
	GP3MaxThroughputAWS     = 2000
	GP3MaxThroughput        = 1000
	GP3MaxIOPSPerGiB        = 500
	GP3MaxThroughputPerIOPS = 0.25 // MiB/s
	GP3MinSize              = 1
	GP3MaxSize              = 65536

	IO2MinIOPS       = 100
	IO2MaxIOPS       = 256000
	IO2MaxIOPSPerGiB = 1000
	IO2MinSize       = 4
	IO2MaxSize       = 65536

	MinRootVolumeSize = 8
	MaxRootVolumeSize = 16384
	MaxExpiresInHours = 720
	// MaxResultsExpireDays is ten years, far beyond any test's use.
	MaxResultsExpireDays = 3650
)

const throughputCapReason = "AWS allows gp3 up to 2,000 MiB/s, but the pinned pulumi-aws v6.83.4 provider predates that " +
	"limit and rejects more than 1,000; use io2 for more"

var (
	regionRE  = regexp.MustCompile(`^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-[0-9]+$`)
	amiRE     = regexp.MustCompile(`^ami-[0-9a-f]{8,17}$`)
	vpcRE     = regexp.MustCompile(`^vpc-[0-9a-f]{8,17}$`)
	subnetRE  = regexp.MustCompile(`^subnet-[0-9a-f]{8,17}$`)
	capResRE  = regexp.MustCompile(`^cr-[0-9a-f]{8,17}$`)
	userRE    = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)
	tagValRE  = regexp.MustCompile(`^[\p{L}\p{Z}\p{N}_.:/=+\-@]{1,256}$`)
	mibToMB   = 1.048576
	thousands = func(n int) string { return units.Group(strconv.Itoa(n)) }
)

// Validate checks a spec before any resource exists and returns every problem at once.
func Validate(s Spec) Problems {
	var ps Problems
	errf := func(field, value, allowed, reason string) {
		ps = append(ps, Problem{Severity: SeverityError, Field: field, Value: value, Allowed: allowed, Reason: reason})
	}
	warnf := func(field, value, allowed, reason string) {
		ps = append(ps, Problem{Severity: SeverityWarning, Field: field, Value: value, Allowed: allowed, Reason: reason})
	}

	// Counts.
	if s.Servers < 1 {
		errf("servers", strconv.Itoa(s.Servers), ">= 1", "")
	}
	if s.Clients < 1 {
		errf("clients", strconv.Itoa(s.Clients), ">= 1", "")
	}

	// Where.
	regionOK := regionRE.MatchString(s.Region)
	if !regionOK {
		ps = append(ps, Problem{Severity: SeverityError, Field: "aws:region", Value: strconv.Quote(s.Region),
			Allowed: "an AWS region such as us-east-1", Reason: "set aws:region in the stack config"})
	}
	if regionOK {
		if !zoneOf(s.Region, s.AvailabilityZone) {
			errf("availabilityZone", strconv.Quote(s.AvailabilityZone), "an AZ of "+s.Region+", e.g. "+s.Region+"a", "")
		}
	}

	// Instances.
	checkType := func(field, name string) (InstanceType, bool) {
		if why := clusterPlacementRefusal(name); why != "" {
			errf(field, name, "an instance family that supports cluster placement groups (c6in.*, c7i.*)", why)
			return InstanceType{}, false
		}
		it, ok := LookupInstance(name)
		if !ok {
			errf(field, strconv.Quote(name), "one of the types in infra/spec/instances.go: c6in.{large..32xlarge,metal}, c7i.{large..48xlarge,metal-24xl,metal-48xl}",
				"the rig checks each volume against its instance's EBS bandwidth and needs the type in its table")
			return InstanceType{}, false
		}
		return it, true
	}
	serverType, serverOK := checkType("serverInstanceType", s.ServerInstanceType)
	clientType, clientOK := checkType("clientInstanceType", s.ClientInstanceType)

	// Image and login.
	if s.AMI != "" && !amiRE.MatchString(s.AMI) {
		errf("ami", strconv.Quote(s.AMI), "empty or an AMI id like ami-0123456789abcdef0", "")
	}
	if s.AMIFamily != FamilyAL2023 && s.AMIFamily != FamilyUbuntu {
		errf("amiFamily", strconv.Quote(s.AMIFamily), "al2023 or ubuntu", "")
	}
	if s.SSHUser != "" && !userRE.MatchString(s.SSHUser) {
		errf("sshUser", strconv.Quote(s.SSHUser), "empty or a Linux user name ([a-z_][a-z0-9_-]*)", "")
	}

	// Data volumes, each on its own and then as a set against the instance they are attached
	// to, for each role that has them. The set is checked even when a volume is out of range,
	// so that all problems show at once.
	vols := s.Volumes()
	for _, v := range vols {
		checkVolume(v, errf)
	}
	if serverOK {
		checkVolumeSet(vols, "serverInstanceType", serverType, errf, warnf)
	}
	// Clients are checked only when they get the volumes: a client with only its root volume
	// must not make a valid server choice fail.
	if s.ClientDataVolume && clientOK && (!serverOK || clientType.Name != serverType.Name) {
		checkVolumeSet(vols, "clientInstanceType", clientType, errf, warnf)
	}

	if s.RootVolumeSize < MinRootVolumeSize || s.RootVolumeSize > MaxRootVolumeSize {
		errf("rootVolumeSize", thousands(s.RootVolumeSize)+" GiB", fmt.Sprintf("%d-%s GiB", MinRootVolumeSize, thousands(MaxRootVolumeSize)), "the AMIs need at least 8 GiB")
	}

	// Access.
	if len(s.OperatorCIDRs) == 0 {
		errf("operatorCidrs", "[]", `at least one CIDR, e.g. ["203.0.113.7/32"]`, "SSH from these is the only ingress from outside the cluster")
	}
	for _, c := range s.OperatorCIDRs {
		p, err := netip.ParsePrefix(strings.TrimSpace(c))
		switch {
		case err != nil:
			errf("operatorCidrs", strconv.Quote(c), "CIDRs like 203.0.113.7/32 or 2001:db8::/64", "")
		case p.Bits() == 0:
			errf("operatorCidrs", c, "a prefix longer than /0", "this would open SSH to the whole internet")
		case p.Masked() != p:
			errf("operatorCidrs", c, "a network address: "+p.Masked().String(), "host bits are set")
		}
	}
	ps = append(ps, checkCIDRUnion(s.OperatorCIDRs, s.AllowWideOperatorCIDRs)...)
	// The rig's VPC has no IPv6 CIDR and the instances get no IPv6 address, so an IPv6 operator
	// CIDR can never reach a node: with only IPv6 ones, nobody could log in.
	var v4, v6 []string
	for _, c := range s.OperatorCIDRs {
		if p, err := netip.ParsePrefix(strings.TrimSpace(c)); err == nil {
			if p.Addr().Is4() {
				v4 = append(v4, c)
			} else {
				v6 = append(v6, c)
			}
		}
	}
	switch {
	case len(v6) > 0 && len(v4) == 0:
		errf("operatorCidrs", "["+strings.Join(v6, ", ")+"]", `at least one IPv4 CIDR, e.g. ["203.0.113.7/32"]`,
			"the cluster's VPC has no IPv6 path (no IPv6 CIDR, no IPv6 addresses on the nodes), so SSH from IPv6 only could never connect")
	case len(v6) > 0:
		warnf("operatorCidrs", "["+strings.Join(v6, ", ")+"]", "IPv4 CIDRs",
			"the cluster's VPC has no IPv6 path; these entries open nothing that can be reached, SSH goes over IPv4")
	}
	if s.PublicKey == "" {
		errf("publicKey", `""`, "an SSH public key line (ssh-ed25519 AAAA... or ssh-rsa AAAA...)", "")
	} else if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(s.PublicKey)); err != nil {
		errf("publicKey", abbrev(s.PublicKey), "an SSH public key line (ssh-ed25519 AAAA... or ssh-rsa AAAA...)", err.Error())
	}
	if !tagValRE.MatchString(s.Owner) {
		errf("owner", strconv.Quote(s.Owner), "1-256 letters, digits, spaces and _ . : / = + - @", "it becomes the owner tag")
	}
	if s.ExpiresInHours < 1 || s.ExpiresInHours > MaxExpiresInHours {
		errf("expiresInHours", strconv.Itoa(s.ExpiresInHours), fmt.Sprintf("1-%d", MaxExpiresInHours), "")
	}

	if s.ResultsExpireDays < 0 || s.ResultsExpireDays > MaxResultsExpireDays {
		errf("resultsExpireDays", strconv.Itoa(s.ResultsExpireDays), fmt.Sprintf("0-%s (0 keeps results for ever)", thousands(MaxResultsExpireDays)), "")
	}
	for key, id := range map[string]string{"serverCapacityReservationId": s.ServerCapacityReservationID,
		"clientCapacityReservationId": s.ClientCapacityReservationID} {
		if id != "" && !capResRE.MatchString(id) {
			errf(key, strconv.Quote(id), "empty or a capacity reservation id like cr-0123456789abcdef0", "")
		}
	}
	ps = append(ps, checkPlacement(s, regionOK)...)

	// Network reuse.
	switch {
	case (s.VPCID == "") != (s.SubnetID == ""):
		if s.VPCID == "" {
			errf("vpcId", `""`, "set together with subnetId "+s.SubnetID, "the security group needs the subnet's VPC")
			ps[len(ps)-1].Because = "subnetId"
		} else {
			errf("subnetId", `""`, "set together with vpcId "+s.VPCID, "the rig creates a network only when it reuses none")
			ps[len(ps)-1].Because = "vpcId"
		}
	case s.VPCID != "":
		if !vpcRE.MatchString(s.VPCID) {
			errf("vpcId", strconv.Quote(s.VPCID), "a VPC id like vpc-0123456789abcdef0", "")
		}
		if !subnetRE.MatchString(s.SubnetID) {
			errf("subnetId", strconv.Quote(s.SubnetID), "a subnet id like subnet-0123456789abcdef0", "")
		}
	}
	return ps
}

func fmtMB(v float64) string {
	if v == float64(int(v)) {
		return thousands(int(v))
	}
	return units.Group(strconv.FormatFloat(v, 'f', 2, 64))
}

func abbrev(s string) string {
	if len(s) > 40 {
		return strconv.Quote(s[:37] + "...")
	}
	return strconv.Quote(s)
}
