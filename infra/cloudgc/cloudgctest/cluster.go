// Package cloudgctest builds rig clusters in the AWS emulator (infra/awsemu) with the SDK, the
// way the Pulumi program tags them, for tests of cloud-side gc.
package cloudgctest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/rig-dev/rig/infra/spec"
)

// Cluster says what to build.
type Cluster struct {
	Stack, Generation, Owner string
	Expires                  string // RFC 3339, the expires-at tag
	Types                    []string
	BucketObjects            int // a results bucket with this many 1,000-byte objects; -1: no bucket
}

// Built is what was made, by kind.
type Built struct {
	VPC, Subnet, SecurityGroup, RouteTable, Gateway, Bucket string
	Instances, Volumes                                      []string
}

// IDs lists every EC2 id made.
func (b Built) IDs() []string {
	return append([]string{b.VPC, b.Subnet, b.SecurityGroup, b.RouteTable, b.Gateway}, append(b.Instances, b.Volumes...)...)
}

// Build makes a VPC with a subnet, internet gateway (attached), route table (associated) and
// security group, one instance per type in the subnet and group, each with a gp3 200 GiB,
// 4,000 IOPS, 1,000 MiB/s data volume attached, and a results bucket, all tagged as
// spec.Spec.Tags does. (moto cannot create placement groups, and its tagging API does not
// list key pairs; docs/infra.md lists what the emulator covers.)
func Build(t testing.TB, cfg aws.Config, c Cluster) Built {
	t.Helper()
	ctx := context.Background()
	e := ec2.NewFromConfig(cfg)
	tags := map[string]string{spec.TagStack: c.Stack, spec.TagOwner: c.Owner, spec.TagExpiresAt: c.Expires,
		spec.TagCreatedAt: "2025-06-01T00:00:00Z", "Name": "rig-" + c.Stack}
	if c.Generation != "" {
		tags[spec.TagGeneration] = c.Generation
	}
	tagSpec := func(rt ec2types.ResourceType) []ec2types.TagSpecification {
		var ts []ec2types.Tag
		for k, v := range tags {
			ts = append(ts, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		return []ec2types.TagSpecification{{ResourceType: rt, Tags: ts}}
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("build %s of %s in the emulator: %v", what, c.Stack, err)
		}
	}
	var b Built
	vpc, err := e.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16"), TagSpecifications: tagSpec(ec2types.ResourceTypeVpc)})
	must("vpc", err)
	b.VPC = aws.ToString(vpc.Vpc.VpcId)
	az := cfg.Region + "a"
	sn, err := e.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String("10.0.1.0/24"),
		AvailabilityZone: aws.String(az), TagSpecifications: tagSpec(ec2types.ResourceTypeSubnet)})
	must("subnet", err)
	b.Subnet = aws.ToString(sn.Subnet.SubnetId)
	igw, err := e.CreateInternetGateway(ctx, &ec2.CreateInternetGatewayInput{TagSpecifications: tagSpec(ec2types.ResourceTypeInternetGateway)})
	must("internet gateway", err)
	b.Gateway = aws.ToString(igw.InternetGateway.InternetGatewayId)
	_, err = e.AttachInternetGateway(ctx, &ec2.AttachInternetGatewayInput{InternetGatewayId: igw.InternetGateway.InternetGatewayId, VpcId: vpc.Vpc.VpcId})
	must("gateway attachment", err)
	rt, err := e.CreateRouteTable(ctx, &ec2.CreateRouteTableInput{VpcId: vpc.Vpc.VpcId, TagSpecifications: tagSpec(ec2types.ResourceTypeRouteTable)})
	must("route table", err)
	b.RouteTable = aws.ToString(rt.RouteTable.RouteTableId)
	_, err = e.CreateRoute(ctx, &ec2.CreateRouteInput{RouteTableId: rt.RouteTable.RouteTableId, DestinationCidrBlock: aws.String("0.0.0.0/0"),
		GatewayId: igw.InternetGateway.InternetGatewayId})
	must("route", err)
	_, err = e.AssociateRouteTable(ctx, &ec2.AssociateRouteTableInput{RouteTableId: rt.RouteTable.RouteTableId, SubnetId: sn.Subnet.SubnetId})
	must("route table association", err)
	sg, err := e.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("rig-" + c.Stack + "-" + c.Generation),
		Description: aws.String("rig"), VpcId: vpc.Vpc.VpcId, TagSpecifications: tagSpec(ec2types.ResourceTypeSecurityGroup)})
	must("security group", err)
	b.SecurityGroup = aws.ToString(sg.GroupId)
	for i, typ := range c.Types {
		run, err := e.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String("ami-12c6146b"), InstanceType: ec2types.InstanceType(typ),
			MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: sn.Subnet.SubnetId, SecurityGroupIds: []string{b.SecurityGroup},
			TagSpecifications: tagSpec(ec2types.ResourceTypeInstance)})
		must("instance", err)
		id := aws.ToString(run.Instances[0].InstanceId)
		b.Instances = append(b.Instances, id)
		vol, err := e.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(az), Size: aws.Int32(200),
			VolumeType: ec2types.VolumeTypeGp3, Iops: aws.Int32(4000), Throughput: aws.Int32(1000),
			TagSpecifications: tagSpec(ec2types.ResourceTypeVolume)})
		must("volume", err)
		b.Volumes = append(b.Volumes, aws.ToString(vol.VolumeId))
		_, err = e.AttachVolume(ctx, &ec2.AttachVolumeInput{VolumeId: vol.VolumeId, InstanceId: aws.String(id),
			Device: aws.String(fmt.Sprintf("/dev/sd%c", 'f'+i))})
		must("volume attachment", err)
	}
	if c.BucketObjects >= 0 {
		b.Bucket = "rig-" + strings.ToLower(c.Stack) + "-results"
		if c.Generation != "" {
			b.Bucket += "-" + c.Generation
		}
		s := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
		in := &s3.CreateBucketInput{Bucket: aws.String(b.Bucket)}
		if cfg.Region != "us-east-1" {
			in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(cfg.Region)}
		}
		_, err := s.CreateBucket(ctx, in)
		must("bucket", err)
		var ts []s3types.Tag
		for k, v := range tags {
			ts = append(ts, s3types.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		_, err = s.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: aws.String(b.Bucket), Tagging: &s3types.Tagging{TagSet: ts}})
		must("bucket tags", err)
		for i := 0; i < c.BucketObjects; i++ {
			_, err := s.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b.Bucket), Key: aws.String(fmt.Sprintf("%s/run-%d.tar.zst", c.Stack, i)),
				Body: strings.NewReader(strings.Repeat("x", 1000))})
			must("object", err)
		}
	}
	return b
}

// Exists reports which of the ids EC2 still has (instances: not terminated).
func Exists(t testing.TB, cfg aws.Config, ids []string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	e := ec2.NewFromConfig(cfg)
	out := map[string]bool{}
	for _, id := range ids {
		var err error
		switch {
		case strings.HasPrefix(id, "i-"):
			var r *ec2.DescribeInstancesOutput
			r, err = e.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
			if err == nil && len(r.Reservations) > 0 && r.Reservations[0].Instances[0].State.Name != ec2types.InstanceStateNameTerminated {
				out[id] = true
			}
			continue
		case strings.HasPrefix(id, "vol-"):
			_, err = e.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{id}})
		case strings.HasPrefix(id, "vpc-"):
			_, err = e.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{id}})
		case strings.HasPrefix(id, "subnet-"):
			_, err = e.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{id}})
		case strings.HasPrefix(id, "sg-"):
			_, err = e.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{id}})
		case strings.HasPrefix(id, "rtb-"):
			_, err = e.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{RouteTableIds: []string{id}})
		case strings.HasPrefix(id, "igw-"):
			_, err = e.DescribeInternetGateways(ctx, &ec2.DescribeInternetGatewaysInput{InternetGatewayIds: []string{id}})
		default:
			t.Fatalf("cloudgctest.Exists: unknown id %s", id)
		}
		out[id] = err == nil
	}
	return out
}
