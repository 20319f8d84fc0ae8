package cloudgc_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/rig-dev/rig/infra/awsemu"
	"github.com/rig-dev/rig/infra/cloudgc"
	"github.com/rig-dev/rig/infra/cloudgc/cloudgctest"
	"github.com/rig-dev/rig/infra/spec"
)

var now = time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC)

const (
	past   = "2025-06-02T08:00:00Z"
	future = "2025-06-02T20:00:00Z"
	genNow = "g20250602t090000-0000000a"
	genOld = "g20250601t090000-0000000b"
)

func options(cfg func(region string) aws.Config) cloudgc.Options {
	return cloudgc.Options{Regions: []string{"us-east-1"}, Poll: 10 * time.Millisecond, Wait: 10 * time.Second,
		Clients: func(_ context.Context, region string) (cloudgc.Clients, error) {
			return cloudgc.ClientsFromConfig(cfg(region)), nil
		}}
}

var known = cloudgc.Known{Stacks: map[string]cloudgc.Stack{"mine": {Generation: genNow, Owner: "alice"}},
	Owners: map[string]bool{"alice": true}}

// Against the emulator, from the cloud side only: an expired cluster whose state this backend
// does not have is found with its cost per hour and deleted in the dependency order EC2
// enforces; an expired older generation of a known stack is deleted while its current
// generation is kept; an unknown cluster that has not expired is listed and kept; another
// owner's cluster of the same stack name is never touched; tagging-API ARNs of resources EC2
// no longer has (and an instance that vanished between scan and delete) are counted as already
// gone, and everything else still goes.
func TestScanClassifyDelete(t *testing.T) {
	emu := awsemu.Start(t, awsemu.Options{})
	cfg := emu.Config("us-east-1")
	lost := cloudgctest.Build(t, cfg, cloudgctest.Cluster{Stack: "lost", Generation: "g20250601t000000-000000ff", Owner: "alice",
		Expires: past, Types: []string{"c6in.16xlarge", "c6in.4xlarge"}, BucketObjects: 3})
	mine := cloudgctest.Build(t, cfg, cloudgctest.Cluster{Stack: "mine", Generation: genNow, Owner: "alice", Expires: future,
		Types: []string{"c6in.16xlarge"}, BucketObjects: -1})
	ghost := cloudgctest.Build(t, cfg, cloudgctest.Cluster{Stack: "mine", Generation: genOld, Owner: "alice", Expires: past,
		Types: []string{"c6in.large"}, BucketObjects: -1})
	laptop := cloudgctest.Build(t, cfg, cloudgctest.Cluster{Stack: "laptop", Owner: "alice", Expires: future,
		Types: []string{"c7i.large"}, BucketObjects: -1})
	bob := cloudgctest.Build(t, cfg, cloudgctest.Cluster{Stack: "mine", Generation: "g20250501t000000-0000000c", Owner: "bob",
		Expires: past, Types: []string{"c6in.large"}, BucketObjects: -1})
	staleTags := map[string]string{spec.TagStack: "lost", spec.TagOwner: "alice", spec.TagExpiresAt: past}
	emu.AddStaleARN("arn:aws:ec2:us-east-1:"+awsemu.Account+":instance/i-0123456789abcdef0", staleTags)
	emu.AddStaleARN("arn:aws:ec2:us-east-1:"+awsemu.Account+":volume/vol-0123456789abcdef0", staleTags)
	ctx := context.Background()
	o := options(emu.Config)

	rs, err := cloudgc.Scan(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	fs := cloudgc.Classify(rs, known, now, false)
	verdict := map[string]cloudgc.Finding{}
	for _, f := range fs {
		verdict[f.ID] = f
	}
	want := map[string]string{lost.VPC: cloudgc.Expired, lost.Instances[0]: cloudgc.Expired, lost.Volumes[1]: cloudgc.Expired,
		lost.Bucket: cloudgc.Retained, mine.Instances[0]: cloudgc.Ours, mine.VPC: cloudgc.Ours,
		ghost.Instances[0]: cloudgc.Ghost, ghost.SecurityGroup: cloudgc.Ghost, laptop.Instances[0]: cloudgc.Unknown,
		bob.Instances[0]: cloudgc.Foreign, bob.VPC: cloudgc.Foreign,
		"i-0123456789abcdef0": cloudgc.Gone, "vol-0123456789abcdef0": cloudgc.Gone}
	for id, v := range want {
		if verdict[id].Verdict != v {
			t.Errorf("%s: verdict %q, want %q", id, verdict[id].Verdict, v)
		}
	}
	for _, f := range fs {
		shouldDelete := f.Verdict == cloudgc.Expired || f.Verdict == cloudgc.Ghost
		if f.Delete != shouldDelete {
			t.Errorf("%s %s (%s): delete %v", f.Kind, f.ID, f.Verdict, f.Delete)
		}
	}
	// The lost cluster's cost: its two instances at infra/spec's us-east-1 prices (with the public
	// IPv4 address when the emulator gave one) and two gp3 200 GiB, 4,000 IOPS, 1,000 MiB/s volumes.
	prices, _ := spec.Prices("us-east-1")
	vol := (200*0.08 + 1000*0.005 + 875*0.04) / 730
	for i, typ := range []string{"c6in.16xlarge", "c6in.4xlarge"} {
		h := verdict[lost.Instances[i]].Hourly
		if p := prices.InstanceHourly[typ]; math.Abs(h-p) > 1e-9 && math.Abs(h-p-prices.PublicIPv4Hourly) > 1e-9 {
			t.Errorf("%s: $%.4f/h, want %.4f (+ %.4f with a public IPv4 address)", typ, h, p, prices.PublicIPv4Hourly)
		}
		if h := verdict[lost.Volumes[i]].Hourly; math.Abs(h-vol) > 1e-9 {
			t.Errorf("volume %s: $%.6f/h, want %.6f", lost.Volumes[i], h, vol)
		}
	}
	if b := verdict[lost.Bucket]; b.SizeBytes != 3000 || b.Objects != 3 {
		t.Errorf("bucket size %d bytes, %d objects; want 3000, 3", b.SizeBytes, b.Objects)
	}

	// An instance that went between the scan and the delete fails a batched TerminateInstances
	// whole; it is counted as already gone and the rest still goes.
	vanished := cloudgc.Finding{Resource: cloudgc.Resource{Region: "us-east-1", Kind: cloudgc.KindInstance, ID: "i-0fedcba987654321f",
		Stack: "lost", State: "running", Hourly: -1}, Verdict: cloudgc.Expired, Delete: true}
	var out bytes.Buffer
	tally, err := cloudgc.Delete(ctx, append(fs, vanished), o, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	// lost: VPC, subnet, group, route table, gateway, 2 instances, 2 volumes; ghost: 5 + 1 + 1.
	if tally.Deleted != 16 || tally.AlreadyGone != 3 || tally.Failed != 0 {
		t.Errorf("tally %s, want 16 deleted, 3 already gone, 0 failed\n%s", tally, out.String())
	}
	exists := cloudgctest.Exists(t, cfg, append(append(lost.IDs(), ghost.IDs()...), append(append(mine.IDs(), laptop.IDs()...), bob.IDs()...)...))
	for _, id := range append(lost.IDs(), ghost.IDs()...) {
		if exists[id] {
			t.Errorf("%s should have been deleted\n%s", id, out.String())
		}
	}
	for _, id := range append(append(mine.IDs(), laptop.IDs()...), bob.IDs()...) {
		if !exists[id] {
			t.Errorf("%s was deleted, but gc must keep it", id)
		}
	}
	if left, err := cloudgc.Remaining(ctx, fs, o); err != nil || len(left) != 0 {
		t.Errorf("after gc: %v %v", left, err)
	}

	// With orphans, the unknown stack's cluster goes too; the current generation and the other
	// owner's cluster stay.
	rs, err = cloudgc.Scan(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cloudgc.Delete(ctx, cloudgc.Classify(rs, known, now, true), o, &out); err != nil {
		t.Fatal(err)
	}
	exists = cloudgctest.Exists(t, cfg, append(append(mine.IDs(), laptop.IDs()...), bob.IDs()...))
	for _, id := range laptop.IDs() {
		if exists[id] {
			t.Errorf("orphan %s kept", id)
		}
	}
	for _, id := range append(mine.IDs(), bob.IDs()...) {
		if !exists[id] {
			t.Errorf("%s deleted with --orphans", id)
		}
	}
}

// When deleting fails (here: the identity gc runs as may not delete volumes), the failures are
// counted and the billable resources left are reported as ErrBillableLeft.
func TestBillableLeftAfterGC(t *testing.T) {
	emu := awsemu.Start(t, awsemu.Options{Users: map[string][]string{
		"admin": {"*"},
		"gc": {"ec2:Describe*", "ec2:TerminateInstances", "ec2:DeleteVpc", "ec2:DeleteSubnet", "ec2:DeleteSecurityGroup",
			"ec2:DeleteRouteTable", "ec2:DeleteInternetGateway", "ec2:Detach*", "ec2:Disassociate*", "tag:GetResources", "s3:ListBucket",
			// moto names the action after the SigV4 signing name, "tagging"; IAM calls it tag:GetResources.
			"tagging:GetResources"},
	}})
	admin := emu.ConfigAs("admin", "us-east-1")
	lost := cloudgctest.Build(t, admin, cloudgctest.Cluster{Stack: "lost", Owner: "alice", Expires: past,
		Types: []string{"c6in.large"}, BucketObjects: -1})
	o := options(func(region string) aws.Config { return emu.ConfigAs("gc", region) })
	ctx := context.Background()
	rs, err := cloudgc.Scan(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	fs := cloudgc.Classify(rs, known, now, false)
	var out bytes.Buffer
	tally, err := cloudgc.Delete(ctx, fs, o, &out)
	if err == nil || tally.Failed == 0 || tally.Deleted == 0 {
		t.Fatalf("tally %s, err %v\n%s", tally, err, out.String())
	}
	left, err := cloudgc.Remaining(ctx, fs, o)
	if !errors.Is(err, cloudgc.ErrBillableLeft) || len(left) != 1 || left[0].ID != lost.Volumes[0] {
		t.Fatalf("remaining %v, err %v; want the volume %s", left, err, lost.Volumes[0])
	}
	if !strings.Contains(err.Error(), "still there") {
		t.Errorf("error %v", err)
	}
}

// A region that cannot be read is an error naming it; the others are still scanned.
func TestScanReportsUnreadableRegion(t *testing.T) {
	emu := awsemu.Start(t, awsemu.Options{})
	cloudgctest.Build(t, emu.Config("us-east-1"), cloudgctest.Cluster{Stack: "lost", Owner: "alice", Expires: past,
		Types: []string{"c6in.large"}, BucketObjects: -1})
	o := options(func(region string) aws.Config {
		cfg := emu.Config(region)
		if region == "eu-west-1" {
			cfg.BaseEndpoint = aws.String("http://127.0.0.1:1") // nothing listens there
		}
		return cfg
	})
	o.Regions = []string{"us-east-1", "eu-west-1"}
	rs, err := cloudgc.Scan(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "eu-west-1") {
		t.Fatalf("want an error naming eu-west-1, got %v", err)
	}
	if len(rs) == 0 {
		t.Fatal("the readable region's resources were dropped")
	}
}
