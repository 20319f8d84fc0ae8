package spec

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rig-dev/rig/internal/units"
)

// WritePlan prints what Deploy would build for s, without touching anything.
func WritePlan(w io.Writer, s Spec) error {
	var b strings.Builder
	fmt.Fprintf(&b, "plan for stack %q in %s, %s\n", s.Stack, s.Region, describePlacement(s))
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, r := range []struct {
		role string
		n    int
		typ  string
	}{{"servers", s.Servers, s.ServerInstanceType}, {"clients", s.Clients, s.ClientInstanceType}} {
		desc := ""
		if it, ok := LookupInstance(r.typ); ok {
			ebs := fmtMB(it.EBSMaxMBps) + " MB/s"
			if it.EBSBaselineMBps < it.EBSMaxMBps {
				ebs = fmt.Sprintf("%s MB/s baseline, %s MB/s burst", fmtMB(it.EBSBaselineMBps), fmtMB(it.EBSMaxMBps))
			}
			desc = fmt.Sprintf("%d vCPU, %d GiB, EBS %s", it.VCPUs, it.MemoryGiB, ebs)
		}
		fmt.Fprintf(tw, "  %s\t%d x %s\t%s\n", r.role, r.n, r.typ, desc)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeZones(&b, s)
	who := "per server (clients: root volume only; rig:clientDataVolume adds the same)"
	if s.ClientDataVolume {
		who = "per node"
	}
	for _, v := range s.Volumes() {
		fmt.Fprintf(&b, "  data volume %s %s: %s, encrypted, attached at %s\n", v.Name, who, v.Describe(), v.Device)
	}
	fmt.Fprintf(&b, "  root volume per node: gp3 %s GiB, encrypted\n", thousands(s.RootVolumeSize))
	if s.SubnetID != "" {
		fmt.Fprintf(&b, "  network: reuse %s / %s\n", s.VPCID, s.SubnetID)
	} else {
		subnets, err := SubnetCIDRs(VPCCIDR, len(s.Zones()))
		if err != nil {
			return err
		}
		for i := range subnets {
			subnets[i] += " (" + s.Zones()[i] + ")"
		}
		fmt.Fprintf(&b, "  network: new VPC %s, subnet %s, internet gateway\n", VPCCIDR, strings.Join(subnets, ", "))
	}
	image := s.AMI
	if image == "" {
		image = "latest " + s.AMIFamily + " x86_64 (public SSM parameter)"
	}
	fmt.Fprintf(&b, "  image: %s; login %s\n", image, s.LoginUser())
	wide := ""
	if s.AllowWideOperatorCIDRs {
		if v4, v6 := cidrUnion(s.OperatorCIDRs); wideUnion(v4, 32) || wideUnion(v6, 128) {
			wide = " (wider than a /8, accepted by allowWideOperatorCidrs)"
		}
	}
	fmt.Fprintf(&b, "  ingress: TCP 22 from %s%s; all traffic between the nodes; host keys pinned before first connection\n",
		strings.Join(s.OperatorCIDRs, ", "), wide)
	life := "results expire after " + strconv.Itoa(s.ResultsExpireDays) + " days"
	if s.ResultsExpireDays == 0 {
		life = "results never expire"
	}
	if s.ServerCapacityReservationID != "" {
		fmt.Fprintf(&b, "  servers in capacity reservation %s\n", s.ServerCapacityReservationID)
	}
	if s.ClientCapacityReservationID != "" {
		fmt.Fprintf(&b, "  clients in capacity reservation %s\n", s.ClientCapacityReservationID)
	}
	if s.Clients > 0 && !s.ClientInPlacementGroup {
		fmt.Fprintln(&b, "  clients outside the servers' placement group (clientInPlacementGroup false): more client latency, less capacity risk")
	}
	if s.MultiAZ() && s.GroupStrategy() == StrategyNone {
		fmt.Fprintln(&b, "  no placement group (placementStrategy none): EC2 may put servers of one AZ on shared hardware")
	}
	if s.RetainBucket {
		fmt.Fprintf(&b, "  results bucket: rig-%s-*, private, encrypted, %s, kept after rig down\n", BucketPrefixStack(s.Stack), life)
	} else {
		fmt.Fprintf(&b, "  results bucket: rig-%s-*, private, encrypted, %s, deleted with the stack\n", BucketPrefixStack(s.Stack), life)
	}
	created := "set by rig up"
	expires := fmt.Sprintf("%d h after creation", s.ExpiresInHours)
	if !s.CreatedAt.IsZero() {
		created = s.CreatedAt.Format(time.RFC3339)
		expires = s.ExpiresAt().Format(time.RFC3339)
	}
	fmt.Fprintf(&b, "  tags: rig-stack=%s owner=%s created-at=%s expires-at=%s\n", s.Stack, s.Owner, created, expires)
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteEstimate prints an hourly cost estimate and says where its prices come from.
func WriteEstimate(w io.Writer, e Estimate) error {
	var b strings.Builder
	fmt.Fprintf(&b, "hourly cost estimate: on-demand prices for %s as of %s (%s, infra/spec/prices.go); S3, data transfer and taxes not included\n",
		e.Region, e.AsOf, e.Source)
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, l := range e.Lines {
		fmt.Fprintf(tw, "  %s\t%12s %s\t%10s/h\n", l.Item, units.Group(trimFloat(l.Quantity)), l.Unit, fmt.Sprintf("$%.4f", l.Hourly))
	}
	fmt.Fprintf(tw, "  total\t\t%10s/h\n", fmt.Sprintf("$%.2f", e.Hourly))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "  until expires-at (%d h): $%.2f\n", e.Hours, e.ToLimit)
	_, err := io.WriteString(w, b.String())
	return err
}

func trimFloat(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", f), "0"), ".")
}

// BucketPrefixStack turns a stack name into something an S3 bucket name may contain.
func BucketPrefixStack(stack string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(stack) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > 30 {
		out = strings.TrimRight(out[:30], "-")
	}
	if out == "" {
		out = "stack"
	}
	return out
}
