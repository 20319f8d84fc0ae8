package spec

import (
	"errors"
	"fmt"
	"sort"
)

// HoursPerMonth is AWS's conversion for monthly EBS prices.
const HoursPerMonth = 730

// PriceTable holds on-demand list prices (USD, Linux, shared tenancy) for one region on one date.
type PriceTable struct {
	Region string
	AsOf   string // the date the prices were taken
	Source string

	InstanceHourly   map[string]float64
	PublicIPv4Hourly float64 // per in-use public IPv4 address

	GP3GBMonth       float64
	GP3IOPSMonth     float64 // per provisioned IOPS above the free 3,000
	GP3MiBpsMonth    float64 // per provisioned MiB/s above the free 125
	IO2GBMonth       float64
	IO2IOPSMonthTier []IOPSTier // io2 IOPS are priced in tiers
}

// IOPSTier prices the IOPS up to UpTo (0: no upper bound) at PerIOPSMonth.
type IOPSTier struct {
	UpTo         int
	PerIOPSMonth float64
}

// ErrNoPrices means the price table has no entry for the region or an instance type.
var ErrNoPrices = errors.New("no price table entry")

// pricesAsOf and pricesSource date every figure below; update all of them together.
const (
	pricesAsOf   = "2025-06-01"
	pricesSource = "AWS on-demand price list (EC2 Linux, EBS) for the region"
)

var usPrices = PriceTable{
	AsOf:   pricesAsOf,
	Source: pricesSource,
	InstanceHourly: map[string]float64{
		"c6in.large": 0.1134, "c6in.xlarge": 0.2268, "c6in.2xlarge": 0.4536, "c6in.4xlarge": 0.9072,
		"c6in.8xlarge": 1.8144, "c6in.12xlarge": 2.7216, "c6in.16xlarge": 3.6288, "c6in.24xlarge": 5.4432,
		"c6in.32xlarge": 7.2576, "c6in.metal": 7.2576,
		"c7i.large": 0.08925, "c7i.xlarge": 0.1785, "c7i.2xlarge": 0.357, "c7i.4xlarge": 0.714,
		"c7i.8xlarge": 1.428, "c7i.12xlarge": 2.142, "c7i.16xlarge": 2.856, "c7i.24xlarge": 4.284,
		"c7i.48xlarge": 8.568, "c7i.metal-24xl": 4.284, "c7i.metal-48xl": 8.568,
	},
	PublicIPv4Hourly: 0.005,
	GP3GBMonth:       0.08,
	GP3IOPSMonth:     0.005,
	GP3MiBpsMonth:    0.04,
	IO2GBMonth:       0.125,
	IO2IOPSMonthTier: []IOPSTier{{UpTo: 32000, PerIOPSMonth: 0.065}, {UpTo: 64000, PerIOPSMonth: 0.0455}, {UpTo: 0, PerIOPSMonth: 0.03185}},
}

// priceTables lists the regions with prices. The three US regions below list the same prices
// for these families and volume types.
var priceTables = map[string]PriceTable{
	"us-east-1": withRegion(usPrices, "us-east-1"),
	"us-east-2": withRegion(usPrices, "us-east-2"),
	"us-west-2": withRegion(usPrices, "us-west-2"),
}

func withRegion(t PriceTable, region string) PriceTable {
	t.Region = region
	return t
}

// Prices returns the price table of a region.
func Prices(region string) (PriceTable, bool) {
	t, ok := priceTables[region]
	return t, ok
}

// PricedRegions lists the regions with a price table.
func PricedRegions() []string {
	var out []string
	for r := range priceTables {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// CostLine is one line of an estimate.
type CostLine struct {
	Item     string
	Quantity float64
	Unit     string
	UnitHour float64 // USD per unit-hour
	Hourly   float64 // USD per hour for the whole quantity
}

// Estimate is the hourly cost of a spec.
type Estimate struct {
	Region  string
	AsOf    string
	Source  string
	Lines   []CostLine
	Hourly  float64
	Hours   int     // until expires-at
	ToLimit float64 // Hourly * Hours
}

// EstimateCost prices a spec from the table of its region: instances, public IPv4 addresses,
// data and root volume GB, and provisioned IOPS and throughput above the free baseline.
// S3, data transfer and taxes are not included.
func EstimateCost(s Spec) (Estimate, error) {
	t, ok := Prices(s.Region)
	if !ok {
		return Estimate{}, fmt.Errorf("%w for region %q (priced: %v)", ErrNoPrices, s.Region, PricedRegions())
	}
	e := Estimate{Region: t.Region, AsOf: t.AsOf, Source: t.Source, Hours: s.ExpiresInHours}
	add := func(item string, qty float64, unit string, unitHour float64) {
		if qty <= 0 {
			return
		}
		l := CostLine{Item: item, Quantity: qty, Unit: unit, UnitHour: unitHour, Hourly: qty * unitHour}
		e.Lines = append(e.Lines, l)
		e.Hourly += l.Hourly
	}
	for _, role := range []struct {
		n    int
		typ  string
		what string
	}{{s.Servers, s.ServerInstanceType, "server"}, {s.Clients, s.ClientInstanceType, "client"}} {
		p, ok := t.InstanceHourly[role.typ]
		if !ok {
			return Estimate{}, fmt.Errorf("%w for instance type %q in %s", ErrNoPrices, role.typ, t.Region)
		}
		add(fmt.Sprintf("%s instances (%s)", role.what, role.typ), float64(role.n), "instances", p)
	}
	all := float64(s.Servers + s.Clients)
	add("public IPv4 addresses", all, "addresses", t.PublicIPv4Hourly)
	nodes := float64(s.NodesWithData())
	for _, v := range s.Volumes() { // every volume of every node that has them
		lines, err := t.VolumeLines(v.Type, v.Size, v.IOPS, v.Throughput)
		if err != nil {
			return Estimate{}, err
		}
		for _, l := range lines {
			if len(s.DataVolumes) > 0 {
				l.Item = "volume " + v.Name + ": " + l.Item
			}
			add(l.Item, nodes*l.Quantity, l.Unit, l.UnitHour)
		}
	}
	add("gp3 root volume storage", all*float64(s.RootVolumeSize), "GB", t.GP3GBMonth/HoursPerMonth)
	e.ToLimit = e.Hourly * float64(e.Hours)
	return e, nil
}

// VolumeLines prices one data volume: storage, and provisioned IOPS and throughput above the free
// baseline (gp3) or in io2's tiers. Lines with nothing to pay are left out.
func (t PriceTable) VolumeLines(typ string, size, iops, throughput int) ([]CostLine, error) {
	var out []CostLine
	add := func(item string, qty float64, unit string, unitHour float64) {
		if qty > 0 {
			out = append(out, CostLine{Item: item, Quantity: qty, Unit: unit, UnitHour: unitHour, Hourly: qty * unitHour})
		}
	}
	switch typ {
	case VolumeGP3:
		add("gp3 data volume storage", float64(size), "GB", t.GP3GBMonth/HoursPerMonth)
		add("gp3 IOPS above 3,000", float64(max(0, iops-GP3MinIOPS)), "IOPS", t.GP3IOPSMonth/HoursPerMonth)
		add("gp3 throughput above 125 MiB/s", float64(max(0, throughput-GP3MinThroughput)), "MiB/s", t.GP3MiBpsMonth/HoursPerMonth)
	case VolumeIO2:
		add("io2 data volume storage", float64(size), "GB", t.IO2GBMonth/HoursPerMonth)
		lower := 0
		for _, tier := range t.IO2IOPSMonthTier {
			upper := tier.UpTo
			if upper == 0 || upper > iops {
				upper = iops
			}
			if upper > lower {
				add(fmt.Sprintf("io2 IOPS %s-%s", thousands(lower+1), thousands(upper)), float64(upper-lower), "IOPS", tier.PerIOPSMonth/HoursPerMonth)
			}
			if tier.UpTo == 0 || tier.UpTo >= iops {
				break
			}
			lower = tier.UpTo
		}
	default:
		return nil, fmt.Errorf("%w for volume type %q", ErrNoPrices, typ)
	}
	return out, nil
}

// Hourly sums the lines.
func Hourly(lines []CostLine) float64 {
	h := 0.0
	for _, l := range lines {
		h += l.Hourly
	}
	return h
}
