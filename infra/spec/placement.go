package spec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Placements: where the nodes go.
const (
	PlacementSingleAZ = "single-az" // every node in AvailabilityZone (today's stacks)
	PlacementMultiAZ  = "multi-az"  // three AZs, a subnet each, node-i in Zones()[i mod 3]
)

// MultiAZZones is how many AZs a multi-az stack spans: the three replicas of a raft cluster, one
// per AZ, so that losing an AZ loses one vote.
const MultiAZZones = 3

// Placement group strategies (EC2 CreatePlacementGroup; the provider's aws.ec2.PlacementGroup).
const (
	StrategyCluster   = "cluster"   // one AZ only: lowest latency, what single-az uses
	StrategySpread    = "spread"    // rack level: may span the AZs of a region, at most 7 running instances per AZ
	StrategyPartition = "partition" // may span AZs, at most 7 partitions per AZ
	StrategyNone      = "none"      // no placement group
)

// Limits of EC2 placement groups (Amazon EC2 User Guide, "Placement group rules and limitations").
const (
	SpreadMaxPerZone = 7 // running instances per AZ in a rack-level spread group
	// PartitionCount is the partitions of a multi-az partition group: one per AZ's server
	// (the provider accepts 1-7; AWS allows at most 7 per AZ).
	PartitionCount = MultiAZZones
)

// CrossAZPerGB is AWS's charge for data between AZs of one region, in USD per GB and per
// direction: a GB sent from one AZ to another is billed once leaving and once arriving.
const CrossAZPerGB = 0.01

// MultiAZ reports whether the stack spreads its servers over several AZs.
func (s Spec) MultiAZ() bool { return s.Placement == PlacementMultiAZ }

// Zones are the AZs the stack uses: AvailabilityZone alone, or multi-az's three (the configured
// ones, else <region>a, b and c).
func (s Spec) Zones() []string {
	if !s.MultiAZ() {
		return []string{s.AvailabilityZone}
	}
	if len(s.AvailabilityZones) > 0 {
		return s.AvailabilityZones
	}
	return []string{s.Region + "a", s.Region + "b", s.Region + "c"}
}

// serverZone is node-i's AZ: Zones()[i mod len].
func (s Spec) serverZone(i int) string {
	z := s.Zones()
	if len(z) == 0 {
		return ""
	}
	return z[i%len(z)]
}

// ClientZone is the clients' AZ: under multi-az the configured AZ, or the AZ of the server it
// names, or node-0's; ok is false when ClientAvailabilityZone names neither.
func (s Spec) ClientZone() (zone string, ok bool) {
	c := s.ClientAvailabilityZone
	switch {
	case !s.MultiAZ() || c == "":
		return s.serverZone(0), true
	case slices.Contains(s.Zones(), c):
		return c, true
	}
	if n, found := strings.CutPrefix(c, "node-"); found {
		if i, err := strconv.Atoi(n); err == nil && i >= 0 && i < s.Servers && strconv.Itoa(i) == n {
			return s.serverZone(i), true
		}
	}
	return s.serverZone(0), false
}

// GroupStrategy is the placement group's strategy: PlacementStrategy, else cluster for
// single-az and spread for multi-az (the one that keeps the replicas on distinct racks).
func (s Spec) GroupStrategy() string {
	switch {
	case s.PlacementStrategy != "":
		return s.PlacementStrategy
	case s.MultiAZ():
		return StrategySpread
	default:
		return StrategyCluster
	}
}

// zoneOf reports whether az is spelled as an AZ of region (region plus one letter); preflight
// asks AWS whether it exists.
func zoneOf(region, az string) bool {
	return strings.HasPrefix(az, region) && len(az) == len(region)+1 && az[len(az)-1] >= 'a' && az[len(az)-1] <= 'z'
}

// checkPlacement holds the placement keys to what AWS allows together (Validate calls it).
func checkPlacement(s Spec, regionOK bool) Problems {
	var ps Problems
	errf := func(field, value, allowed, reason string) {
		ps = append(ps, Problem{Severity: SeverityError, Field: field, Value: value, Allowed: allowed, Reason: reason, Because: "placement"})
	}
	strategy := s.GroupStrategy()
	switch s.Placement {
	case "", PlacementSingleAZ:
		if len(s.AvailabilityZones) > 0 {
			errf("availabilityZones", "["+strings.Join(s.AvailabilityZones, ", ")+"]", "[] with placement single-az",
				"single-az uses availabilityZone; set placement multi-az to spread the servers over these")
		}
		if s.ClientAvailabilityZone != "" {
			errf("clientAvailabilityZone", strconv.Quote(s.ClientAvailabilityZone), `"" with placement single-az`,
				"every node is in availabilityZone "+s.AvailabilityZone)
		}
		if strategy != StrategyCluster {
			errf("placementStrategy", strconv.Quote(s.PlacementStrategy), `cluster (or "") with placement single-az`,
				"single-az stacks are for the lowest latency, which is what a cluster placement group gives")
		}
		return ps
	case PlacementMultiAZ:
	default:
		errf("placement", strconv.Quote(s.Placement), "single-az or multi-az", "")
		return ps
	}

	zones := s.Zones()
	if regionOK {
		list := "[" + strings.Join(zones, ", ") + "]"
		var bad []string
		for _, z := range zones {
			if !zoneOf(s.Region, z) {
				bad = append(bad, z)
			}
		}
		distinct := slices.Compact(slices.Sorted(slices.Values(zones)))
		switch {
		case len(zones) != MultiAZZones || len(distinct) != len(zones):
			errf("availabilityZones", list, fmt.Sprintf("%d distinct AZs of %s, e.g. [%sa, %sb, %sc] (or [] for those)",
				MultiAZZones, s.Region, s.Region, s.Region, s.Region), "multi-az puts node-i in availabilityZones[i mod 3]")
		case len(bad) > 0:
			errf("availabilityZones", list, "AZs of "+s.Region+", e.g. "+s.Region+"a",
				strings.Join(bad, ", ")+" is not in "+s.Region)
		}
		if len(zones) > 0 && s.AvailabilityZone != zones[0] {
			errf("availabilityZone", strconv.Quote(s.AvailabilityZone), `"" or `+zones[0]+" (availabilityZones[0]) with placement multi-az",
				"under multi-az availabilityZone is node-0's AZ")
		}
	}
	if s.Servers < MultiAZZones {
		errf("servers", strconv.Itoa(s.Servers), fmt.Sprintf(">= %d with placement multi-az", MultiAZZones),
			"multi-az puts one server in each of three AZs")
	}
	if _, ok := s.ClientZone(); !ok {
		errf("clientAvailabilityZone", strconv.Quote(s.ClientAvailabilityZone),
			fmt.Sprintf(`"" (node-0's AZ), one of %s, or a server's name (node-0..node-%d)`, strings.Join(zones, ", "), max(s.Servers-1, 0)), "")
	}
	switch strategy {
	case StrategyCluster:
		errf("placementStrategy", StrategyCluster, "spread, partition or none with placement multi-az",
			"a cluster placement group is in one AZ and cannot span availability zones")
	case StrategySpread:
		// At most seven running instances per AZ in a rack-level spread group.
		per := map[string]int{}
		for _, n := range s.Nodes() {
			if n.Role == "server" || s.ClientInPlacementGroup {
				per[n.Zone]++
			}
		}
		for _, z := range zones {
			if per[z] > SpreadMaxPerZone {
				errf("placementStrategy", StrategySpread, fmt.Sprintf("partition or none with %d instances in %s", per[z], z),
					fmt.Sprintf("a spread placement group holds at most %d running instances per AZ", SpreadMaxPerZone))
				break
			}
		}
	case StrategyPartition, StrategyNone:
	default:
		errf("placementStrategy", strconv.Quote(s.PlacementStrategy), "spread, partition or none with placement multi-az", "")
	}
	// A capacity reservation is one instance type in one AZ, and spread and partition groups do
	// not support capacity reservations (Amazon EC2 User Guide, "Use Capacity Reservations
	// with placement groups"): of the strategies rig uses, only cluster groups do.
	if s.ServerCapacityReservationID != "" {
		errf("serverCapacityReservationId", s.ServerCapacityReservationID, `"" with placement multi-az (or placement single-az)`,
			"a capacity reservation covers one AZ and multi-az spreads the servers over three")
	}
	if s.ClientCapacityReservationID != "" && strategy != StrategyNone && s.ClientInPlacementGroup {
		errf("clientCapacityReservationId", s.ClientCapacityReservationID,
			"a reservation in the clients' AZ with clientInPlacementGroup false or placementStrategy none",
			strategy+" placement groups do not support capacity reservations")
	}
	if s.VPCID != "" || s.SubnetID != "" {
		errf("subnetId", strconv.Quote(s.SubnetID), `"" (and vpcId "") with placement multi-az`,
			"multi-az creates its own VPC with a subnet in each AZ; a reused subnet is in one AZ")
	}
	return ps
}

// CrossAZFollowers is how many servers are outside node-0's AZ: the followers a leader there
// sends every log entry to across AZs.
func (s Spec) CrossAZFollowers() int {
	n := 0
	for _, node := range s.Nodes() {
		if node.Role == "server" && node.Zone != s.serverZone(0) {
			n++
		}
	}
	return n
}

// describePlacement is the plan's header words for where the stack is: its AZs and group.
func describePlacement(s Spec) string {
	group := "no placement group"
	switch st := s.GroupStrategy(); st {
	case StrategySpread:
		group = "one spread placement group (rack level)"
	case StrategyPartition:
		group = fmt.Sprintf("one partition placement group (%d partitions)", PartitionCount)
	case StrategyCluster:
		group = "one cluster placement group"
	}
	if !s.MultiAZ() {
		return "availability zone " + s.AvailabilityZone + ", " + group
	}
	return "multi-az " + strings.Join(s.Zones(), ", ") + ", " + group
}

// writeZones prints the AZ of every node and, under multi-az, what traffic between AZs costs.
func writeZones(b *strings.Builder, s Spec) {
	var parts []string
	for _, n := range s.Nodes() {
		parts = append(parts, n.Name+" "+n.Zone)
	}
	fmt.Fprintf(b, "  zones: %s\n", strings.Join(parts, ", "))
	if !s.MultiAZ() {
		return
	}
	client, _ := s.ClientZone()
	followers := s.CrossAZFollowers()
	fmt.Fprintf(b, "  cross-AZ traffic: $%.2f/GB each way ($%.2f per GB that crosses); every GB of log node-0 replicates as leader "+
		"to its %d followers in other AZs costs about $%.2f, and client traffic to a leader outside %s $%.2f/GB (not in the hourly estimate)\n",
		CrossAZPerGB, 2*CrossAZPerGB, followers, 2*CrossAZPerGB*float64(followers), client, 2*CrossAZPerGB)
}
