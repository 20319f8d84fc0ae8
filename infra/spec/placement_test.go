package spec

import (
	"bytes"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func multiAZSpec() Spec {
	s := validSpec()
	s.Placement = PlacementMultiAZ
	return s
}

// A multi-az stack from the stack config: three AZs derived from the region, node-i in AZ i mod
// 3, the client in node-0's AZ, a spread group; or as configured.
func TestMultiAZFromConfig(t *testing.T) {
	raw := map[string]string{"owner": "alice", "operatorCidrs": `["203.0.113.7/32"]`, "publicKey": testPublicKey,
		"placement": "multi-az", "servers": "5"}
	s, probs := Resolve("t", "us-west-2", raw)
	if len(probs) != 0 {
		t.Fatalf("problems: %v", probs)
	}
	zones := map[string]string{}
	for _, n := range s.Nodes() {
		zones[n.Name] = n.Zone
	}
	want := map[string]string{"node-0": "us-west-2a", "node-1": "us-west-2b", "node-2": "us-west-2c", "node-3": "us-west-2a",
		"node-4": "us-west-2b", "client-0": "us-west-2a"}
	for k, v := range want {
		if zones[k] != v {
			t.Errorf("%s in %q, want %s (all: %v)", k, zones[k], v, zones)
		}
	}
	if s.AvailabilityZone != "us-west-2a" || s.GroupStrategy() != StrategySpread {
		t.Errorf("availabilityZone %s strategy %s", s.AvailabilityZone, s.GroupStrategy())
	}

	raw["availabilityZones"] = `["us-west-2d", "us-west-2b", "us-west-2c"]`
	raw["clientAvailabilityZone"] = "node-2"
	raw["placementStrategy"] = "partition"
	s, probs = Resolve("t", "us-west-2", raw)
	if len(probs) != 0 {
		t.Fatalf("problems: %v", probs)
	}
	if n := s.Nodes(); n[0].Zone != "us-west-2d" || n[len(n)-1].Zone != "us-west-2c" || s.AvailabilityZone != "us-west-2d" {
		t.Errorf("nodes %+v, availabilityZone %s", n, s.AvailabilityZone)
	}
	raw["clientAvailabilityZone"] = "us-west-2b"
	if s, _ = Resolve("t", "us-west-2", raw); s.Nodes()[5].Zone != "us-west-2b" {
		t.Errorf("client in %s", s.Nodes()[5].Zone)
	}
}

// Every combination AWS or the rig refuses is an error on the key that causes it, saying what
// would be valid; the single-az defaults and a plain multi-az stack have no problem at all.
func TestPlacementCombinations(t *testing.T) {
	cases := []struct {
		name         string
		mut          func(*Spec)
		field, allow string // "" field: no problem at all
	}{
		{"single-az defaults", func(s *Spec) {}, "", ""},
		{"single-az spelled out", func(s *Spec) { s.Placement, s.PlacementStrategy = PlacementSingleAZ, StrategyCluster }, "", ""},
		{"multi-az defaults", func(s *Spec) { s.Placement = PlacementMultiAZ }, "", ""},
		{"multi-az partition, client with node-2", func(s *Spec) {
			s.Placement, s.PlacementStrategy, s.ClientAvailabilityZone = PlacementMultiAZ, StrategyPartition, "node-2"
		}, "", ""},
		{"multi-az no group, client reserved", func(s *Spec) {
			s.Placement, s.PlacementStrategy, s.ClientCapacityReservationID = PlacementMultiAZ, StrategyNone, "cr-0123456789abcdef0"
		}, "", ""},
		{"unknown placement", func(s *Spec) { s.Placement = "two-az" }, "placement", "single-az or multi-az"},
		{"zones under single-az", func(s *Spec) { s.AvailabilityZones = []string{"us-east-1a", "us-east-1b", "us-east-1c"} },
			"availabilityZones", "[] with placement single-az"},
		{"client zone under single-az", func(s *Spec) { s.ClientAvailabilityZone = "us-east-1b" }, "clientAvailabilityZone", "with placement single-az"},
		{"spread under single-az", func(s *Spec) { s.PlacementStrategy = StrategySpread }, "placementStrategy", "cluster"},
		{"cluster across AZs", func(s *Spec) { s.Placement, s.PlacementStrategy = PlacementMultiAZ, StrategyCluster },
			"placementStrategy", "spread, partition or none with placement multi-az"},
		{"unknown strategy", func(s *Spec) { s.Placement, s.PlacementStrategy = PlacementMultiAZ, "rack" },
			"placementStrategy", "spread, partition or none"},
		{"two zones", func(s *Spec) {
			s.Placement, s.AvailabilityZones = PlacementMultiAZ, []string{"us-east-1a", "us-east-1b"}
		},
			"availabilityZones", "3 distinct AZs of us-east-1"},
		{"a zone twice", func(s *Spec) {
			s.Placement, s.AvailabilityZones = PlacementMultiAZ, []string{"us-east-1a", "us-east-1b", "us-east-1a"}
		}, "availabilityZones", "3 distinct AZs of us-east-1"},
		{"a zone of another region", func(s *Spec) {
			s.Placement, s.AvailabilityZones = PlacementMultiAZ, []string{"us-east-1a", "us-east-1b", "us-west-2c"}
		}, "availabilityZones", "AZs of us-east-1"},
		{"availabilityZone not node-0's", func(s *Spec) { s.Placement, s.AvailabilityZone = PlacementMultiAZ, "us-east-1c" },
			"availabilityZone", "us-east-1a (availabilityZones[0])"},
		{"two servers", func(s *Spec) { s.Placement, s.Servers = PlacementMultiAZ, 2 }, "servers", ">= 3 with placement multi-az"},
		{"client zone not of the stack", func(s *Spec) { s.Placement, s.ClientAvailabilityZone = PlacementMultiAZ, "us-east-1d" },
			"clientAvailabilityZone", "one of us-east-1a, us-east-1b, us-east-1c, or a server's name (node-0..node-2)"},
		{"client with a server that does not exist", func(s *Spec) { s.Placement, s.ClientAvailabilityZone = PlacementMultiAZ, "node-3" },
			"clientAvailabilityZone", "node-0..node-2"},
		{"eight per AZ in a spread group", func(s *Spec) { s.Placement, s.Servers = PlacementMultiAZ, 24 },
			"placementStrategy", "partition or none with 8 instances in us-east-1a"},
		{"server reservation across AZs", func(s *Spec) {
			s.Placement, s.ServerCapacityReservationID = PlacementMultiAZ, "cr-0123456789abcdef0"
		}, "serverCapacityReservationId", "with placement multi-az (or placement single-az)"},
		{"client reservation in a spread group", func(s *Spec) {
			s.Placement, s.ClientCapacityReservationID, s.ClientInPlacementGroup = PlacementMultiAZ, "cr-0123456789abcdef0", true
		}, "clientCapacityReservationId", "clientInPlacementGroup false or placementStrategy none"},
		{"reused subnet", func(s *Spec) {
			s.Placement, s.VPCID, s.SubnetID = PlacementMultiAZ, "vpc-0123456789abcdef0", "subnet-0123456789abcdef0"
		}, "subnetId", `"" (and vpcId "") with placement multi-az`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := validSpec()
			c.mut(&s)
			ps := Validate(s)
			if c.field == "" {
				if len(ps) != 0 {
					t.Fatalf("problems: %v", ps)
				}
				return
			}
			got := ps.Field(c.field).Errors()
			if len(got) == 0 || !strings.Contains(got[0].String(), c.allow) || !strings.Contains(got[0].String(), "rig:"+c.field) {
				t.Fatalf("want an error on %s allowing %q, got %v (all: %v)", c.field, c.allow, got, ps)
			}
		})
	}
}

// The subnets lie inside the VPC and never overlap; the first is the single-az stack's.
func TestSubnetCIDRs(t *testing.T) {
	vpc := netip.MustParsePrefix(VPCCIDR)
	for n := 1; n <= 3; n++ {
		got, err := SubnetCIDRs(VPCCIDR, n)
		if err != nil || len(got) != n || got[0] != "10.42.1.0/24" {
			t.Fatalf("%d: %v %v", n, got, err)
		}
		for i, a := range got {
			pa := netip.MustParsePrefix(a)
			if !vpc.Contains(pa.Addr()) || pa.Bits() < vpc.Bits() {
				t.Errorf("%s outside %s", a, VPCCIDR)
			}
			for _, b := range got[i+1:] {
				if pa.Overlaps(netip.MustParsePrefix(b)) {
					t.Errorf("%s overlaps %s", a, b)
				}
			}
		}
	}
	if got, _ := SubnetCIDRs(VPCCIDR, 3); !slices.Equal(got, []string{"10.42.1.0/24", "10.42.2.0/24", "10.42.3.0/24"}) {
		t.Errorf("subnets %v", got)
	}
	for _, bad := range []struct {
		vpc string
		n   int
	}{{"10.42.0.0/24", 1}, {"10.42.0.0/23", 2}, {"2001:db8::/48", 1}, {VPCCIDR, 0}} {
		if _, err := SubnetCIDRs(bad.vpc, bad.n); err == nil {
			t.Errorf("%s, %d subnets: no error", bad.vpc, bad.n)
		}
	}
}

// The plan names every node's AZ, the subnets, the group's strategy and the cross-AZ rate.
func TestPlanNamesZones(t *testing.T) {
	var b bytes.Buffer
	if err := WritePlan(&b, validSpec()); err != nil {
		t.Fatal(err)
	}
	single := b.String()
	for _, w := range []string{"availability zone us-east-1a, one cluster placement group",
		"zones: node-0 us-east-1a, node-1 us-east-1a, node-2 us-east-1a, client-0 us-east-1a", "subnet 10.42.1.0/24 (us-east-1a)"} {
		if !strings.Contains(single, w) {
			t.Errorf("single-az plan lacks %q:\n%s", w, single)
		}
	}
	if strings.Contains(single, "cross-AZ") {
		t.Errorf("single-az plan prices cross-AZ traffic:\n%s", single)
	}
	b.Reset()
	s := multiAZSpec()
	s.ClientAvailabilityZone = "node-1"
	if err := WritePlan(&b, s); err != nil {
		t.Fatal(err)
	}
	multi := b.String()
	for _, w := range []string{"multi-az us-east-1a, us-east-1b, us-east-1c, one spread placement group (rack level)",
		"zones: node-0 us-east-1a, node-1 us-east-1b, node-2 us-east-1c, client-0 us-east-1b",
		"subnet 10.42.1.0/24 (us-east-1a), 10.42.2.0/24 (us-east-1b), 10.42.3.0/24 (us-east-1c)",
		"$0.01/GB each way", "to its 2 followers in other AZs costs about $0.04", "outside us-east-1b $0.02/GB"} {
		if !strings.Contains(multi, w) {
			t.Errorf("multi-az plan lacks %q:\n%s", w, multi)
		}
	}
}

// A rule that a set key makes apply to a key left at its default points at the key
// that is set (rig:placement here), not at the file alone.
func TestPlacementProblemsOnDefaultsSayWhere(t *testing.T) {
	head := "config:\n  aws:region: us-east-1\n"
	for _, c := range []struct{ body, field, at, want string }{
		{"  rig:placement: multi-az\n  rig:servers: 30\n", "placementStrategy", "Pulumi.t.yaml:3:18", "rig:placementStrategy is not set: the rule follows rig:placement here"},
		{"  rig:placement: single-az\n  rig:subnetId: subnet-1\n", "vpcId", "Pulumi.t.yaml:4:17", "rig:vpcId is not set: the rule follows rig:subnetId here"},
	} {
		sc, err := ParseStackConfig("Pulumi.t.yaml", []byte(head+c.body))
		if err != nil {
			t.Fatal(err)
		}
		_, ps := sc.Spec()
		got := ps.Field(c.field)
		if len(got) == 0 || got[0].Pos != c.at || !strings.Contains(got[0].String(), c.want) {
			t.Errorf("%s: %v (all %v); want it at %s saying %q", c.field, got, ps, c.at, c.want)
		}
	}
}
