package cloudgc_test

import (
	"bytes"
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/infra/cloudgc"
	"github.com/rig-dev/rig/infra/cloudgc/cloudgctest"
)

var now = time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC)

func options(f *cloudgctest.AWS) cloudgc.Options {
	return cloudgc.Options{Regions: []string{f.Region}, Poll: time.Millisecond, Wait: 5 * time.Second,
		Clients: func(context.Context, string) (cloudgc.Clients, error) { return f.Clients(), nil }}
}

// From the cloud side only: an expired cluster whose state this backend does not have is found
// with its cost per hour and deleted in dependency order (the fake refuses any other order, as
// AWS does); a live cluster of a known stack is left alone; an unknown cluster that has not
// expired is listed and kept unless orphans are asked for; buckets are listed with their size.
func TestScanClassifyDelete(t *testing.T) {
	f := cloudgctest.New(t, "us-east-1")
	f.Cluster("lost", "2025-06-02T08:00:00Z", []string{"c6in.16xlarge", "c6in.4xlarge"}, 3)
	f.Cluster("mine", "2025-06-02T20:00:00Z", []string{"c6in.16xlarge"}, 0)
	f.Cluster("laptop", "2025-06-02T20:00:00Z", []string{"c7i.large"}, 0)
	ctx := context.Background()
	o := options(f)

	rs, err := cloudgc.Scan(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	fs := cloudgc.Classify(rs, map[string]bool{"mine": true}, now, false)
	verdicts := map[string]string{}
	var hourly float64
	for _, x := range fs {
		verdicts[x.Kind+" "+x.ID] = x.Verdict
		if x.Stack == "lost" && x.Hourly > 0 {
			hourly += x.Hourly
		}
		if x.Stack == "mine" {
			t.Errorf("a live resource of a known stack was listed: %+v", x)
		}
	}
	for id, want := range map[string]string{
		"instance i-lost0": cloudgc.Expired, "vpc vpc-lost": cloudgc.Expired, "placement-group rig-pg-lost": cloudgc.Expired,
		"instance i-laptop0": cloudgc.Unknown, "bucket rig-lost-results": cloudgc.Retained,
	} {
		if verdicts[id] != want {
			t.Errorf("%s: verdict %q, want %q", id, verdicts[id], want)
		}
	}
	// Two instances with public IPv4 plus two gp3 200 GiB, 4000 IOPS, 1000 MiB/s volumes, at the
	// us-east-1 prices of infra/spec.
	vol := (200*0.08 + 1000*0.005 + 875*0.04) / 730
	want := 3.6288 + 0.9072 + 2*0.005 + 2*vol
	if math.Abs(hourly-want) > 1e-9 {
		t.Errorf("cost of the lost cluster %.6f/h, want %.6f/h", hourly, want)
	}
	for _, x := range fs {
		if x.Kind == cloudgc.KindBucket && x.ID == "rig-lost-results" && (x.SizeBytes != 3000 || x.Objects != 3) {
			t.Errorf("bucket size %d bytes, %d objects; want 3000, 3", x.SizeBytes, x.Objects)
		}
	}

	var out bytes.Buffer
	if err := cloudgc.Delete(ctx, fs, o, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	calls := f.Mutations()
	pos := func(call string) int {
		i := slices.Index(calls, call)
		if i < 0 {
			t.Fatalf("%s not called: %v", call, calls)
		}
		return i
	}
	before := [][2]string{
		{"TerminateInstances i-lost0", "DeleteVolume vol-lost0"},
		{"DeleteVolume vol-lost0", "DeleteSecurityGroup sg-lost"},
		{"DisassociateRouteTable rtbassoc-lost", "DeleteRouteTable rtb-lost"},
		{"DeleteSubnet subnet-lost", "DeleteVpc vpc-lost"},
		{"DetachInternetGateway igw-lost", "DeleteInternetGateway igw-lost"},
		{"DeleteInternetGateway igw-lost", "DeleteVpc vpc-lost"},
	}
	for _, b := range before {
		if pos(b[0]) > pos(b[1]) {
			t.Errorf("%s after %s: %v", b[0], b[1], calls)
		}
	}
	for _, c := range calls {
		if strings.Contains(c, "laptop") || strings.Contains(c, "mine") {
			t.Errorf("touched a resource it must keep: %s", c)
		}
	}
	left := f.Remaining()
	for _, id := range left {
		if strings.Contains(id, "lost") {
			t.Errorf("%s of the expired cluster is still there (left: %v)", id, left)
		}
	}
	if !strings.Contains(out.String(), "deleted vpc vpc-lost (stack lost)") {
		t.Errorf("output %q", out.String())
	}

	// With orphans, the unknown stack's cluster goes too; the known live one stays.
	rs, err = cloudgc.Scan(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := cloudgc.Delete(ctx, cloudgc.Classify(rs, map[string]bool{"mine": true}, now, true), o, &out); err != nil {
		t.Fatal(err)
	}
	for _, id := range f.Remaining() {
		if strings.Contains(id, "laptop") {
			t.Errorf("orphan %s kept", id)
		}
	}
	if !slices.Contains(f.Remaining(), "vpc-mine") {
		t.Error("the known live stack was deleted")
	}
}

// A region that cannot be read is an error; the others are still scanned.
func TestScanReportsUnreadableRegion(t *testing.T) {
	f := cloudgctest.New(t, "us-east-1")
	f.Cluster("lost", "2025-06-02T08:00:00Z", []string{"c6in.large"}, 0)
	o := options(f)
	bad := cloudgctest.New(t, "eu-west-1")
	bad.TagURL = bad.EC2URL // answers the tagging API with an EC2 error
	o.Regions = []string{"us-east-1", "eu-west-1"}
	o.Clients = func(_ context.Context, region string) (cloudgc.Clients, error) {
		if region == "eu-west-1" {
			return bad.Clients(), nil
		}
		return f.Clients(), nil
	}
	rs, err := cloudgc.Scan(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "eu-west-1") {
		t.Fatalf("want an error naming eu-west-1, got %v", err)
	}
	if len(rs) == 0 {
		t.Fatal("the readable region's resources were dropped")
	}
}
