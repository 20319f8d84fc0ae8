package spec

import (
	"regexp"
	"sort"
	"strings"
)

// InstanceType is what the rig knows about one EC2 instance type.
type InstanceType struct {
	Name      string
	VCPUs     int
	MemoryGiB int
	// EBS-optimized performance (AWS publishes MB/s at 128 KiB I/O and IOPS at 16 KiB I/O). Where
	// baseline < maximum the instance holds the maximum for 30 minutes once every 24 hours and
	// then falls back to the baseline, so a benchmark longer than that sees the baseline.
	EBSBaselineMBps float64
	EBSMaxMBps      float64
	EBSBaselineIOPS int
	EBSMaxIOPS      int
	// ClusterPlacement says whether the type may be launched in a cluster placement group.
	ClusterPlacement bool
}

// InstanceTableSource says where the EBS figures come from.
const InstanceTableSource = "Amazon EC2 Instance Types guide, compute optimized, \"Amazon EBS specifications\" (2024 edition)"

// instanceTable covers every c6in and c7i size, plus c7i-flex so that it can be refused by name.
var instanceTable = func() map[string]InstanceType {
	table := map[string]InstanceType{}
	add := func(name string, vcpu, mem int, baseMbps, maxMbps float64, baseIOPS, maxIOPS int, cluster bool) {
		if _, dup := table[name]; dup {
			panic("spec: instance type " + name + " listed twice")
		}
		table[name] = InstanceType{
			Name: name, VCPUs: vcpu, MemoryGiB: mem,
			EBSBaselineMBps: baseMbps / 8, EBSMaxMBps: maxMbps / 8,
			EBSBaselineIOPS: baseIOPS, EBSMaxIOPS: maxIOPS,
			ClusterPlacement: cluster,
		}
	}
	// c6in: bandwidth in Mbps, baseline / maximum.
	add("c6in.large", 2, 4, 1562, 25000, 6250, 100000, true)
	add("c6in.xlarge", 4, 8, 3125, 25000, 12500, 100000, true)
	add("c6in.2xlarge", 8, 16, 6250, 25000, 25000, 100000, true)
	add("c6in.4xlarge", 16, 32, 12500, 25000, 50000, 100000, true)
	add("c6in.8xlarge", 32, 64, 25000, 25000, 100000, 100000, true)
	add("c6in.12xlarge", 48, 96, 37500, 37500, 150000, 150000, true)
	add("c6in.16xlarge", 64, 128, 50000, 50000, 200000, 200000, true)
	add("c6in.24xlarge", 96, 192, 75000, 75000, 300000, 300000, true)
	add("c6in.32xlarge", 128, 256, 100000, 100000, 400000, 400000, true)
	add("c6in.metal", 128, 256, 100000, 100000, 400000, 400000, true)
	// c7i
	add("c7i.large", 2, 4, 650, 10000, 3600, 40000, true)
	add("c7i.xlarge", 4, 8, 1250, 10000, 6000, 40000, true)
	add("c7i.2xlarge", 8, 16, 2500, 10000, 12000, 40000, true)
	add("c7i.4xlarge", 16, 32, 5000, 10000, 20000, 40000, true)
	add("c7i.8xlarge", 32, 64, 10000, 10000, 40000, 40000, true)
	add("c7i.12xlarge", 48, 96, 15000, 15000, 60000, 60000, true)
	add("c7i.16xlarge", 64, 128, 20000, 20000, 80000, 80000, true)
	add("c7i.24xlarge", 96, 192, 30000, 30000, 120000, 120000, true)
	add("c7i.48xlarge", 192, 384, 40000, 40000, 240000, 240000, true)
	add("c7i.metal-24xl", 96, 192, 30000, 30000, 120000, 120000, true)
	add("c7i.metal-48xl", 192, 384, 40000, 40000, 240000, 240000, true)
	// c7i-flex: listed so that validation can say why it is refused.
	add("c7i-flex.large", 2, 4, 312, 10000, 2500, 40000, false)
	add("c7i-flex.xlarge", 4, 8, 625, 10000, 3600, 40000, false)
	add("c7i-flex.2xlarge", 8, 16, 1250, 10000, 6000, 40000, false)
	add("c7i-flex.4xlarge", 16, 32, 2500, 10000, 12000, 40000, false)
	add("c7i-flex.8xlarge", 32, 64, 5000, 10000, 20000, 40000, false)
	return table
}()

// LookupInstance returns the table entry of an instance type.
func LookupInstance(name string) (InstanceType, bool) {
	it, ok := instanceTable[name]
	return it, ok
}

// InstanceNames lists the types in the table that may be used (cluster placement supported).
func InstanceNames() []string {
	var out []string
	for n, it := range instanceTable {
		if it.ClusterPlacement {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

var burstableFamily = regexp.MustCompile(`^t[0-9][a-z]*\.`)

// clusterPlacementRefusal says why a type cannot go into a cluster placement group, or "".
func clusterPlacementRefusal(name string) string {
	family, _, _ := strings.Cut(name, ".")
	switch {
	case burstableFamily.MatchString(name):
		return "burstable " + family + " instances cannot be launched in a cluster placement group"
	case strings.HasSuffix(family, "-flex"):
		return family + " (flex) instances cannot be launched in a cluster placement group"
	}
	if it, ok := instanceTable[name]; ok && !it.ClusterPlacement {
		return family + " instances cannot be launched in a cluster placement group"
	}
	return ""
}
