// Package cluster is the Pulumi half of the infrastructure: Deploy turns a validated Spec into
// AWS resources. It is the only package (with infra/ itself) that links pulumi-aws; everything
// the rig binary needs lives in infra/spec.
package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ebs"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ec2"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/s3"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ssm"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/rig-dev/rig/infra/hostkey"
	"github.com/rig-dev/rig/infra/spec"
	"github.com/rig-dev/rig/inventory"
)

// Spec is the cluster to build (see infra/spec).
type Spec = spec.Spec

// Validate returns every problem of a spec at once, before any resource exists.
func Validate(s Spec) spec.Problems { return spec.Validate(s) }

// Options say where the spec came from.
type Options struct {
	// Config is the stack config file the spec's values are from (spec.ReadStackConfig of
	// Pulumi.<stack>.yaml), so that a refusal names file:line:column as `rig validate` does;
	// nil when there is no such file (the problems then name the key alone).
	Config *spec.StackConfig
}

// Locate gives each problem without a position the one the stack config's reader gives it
// (spec.StackConfig.Spec, which `rig validate` prints): the same problem's position, else the
// position of its key, else the file with "not set". Problems pass unchanged without a config.
func Locate(ps spec.Problems, sc *spec.StackConfig) spec.Problems {
	if sc == nil {
		return ps
	}
	_, located := sc.Spec()
	out := make(spec.Problems, len(ps))
	for i, p := range ps {
		out[i] = p
		if p.Pos != "" {
			continue
		}
		for _, q := range located {
			if q.Severity == p.Severity && q.Field == p.Field && q.Value == p.Value && q.Allowed == p.Allowed && q.Reason == p.Reason {
				out[i].Pos = q.Pos
				break
			}
		}
		if out[i].Pos == "" {
			out[i].Pos = where(sc, p.Field)
		}
	}
	return out
}

// where is a key's file:line:column in the stack config, or the file with "not set".
func where(sc *spec.StackConfig, key string) string {
	if p, ok := sc.Positions[key]; ok {
		return p
	}
	return sc.Path + " (not set; default or generated)"
}

// refusal is an error about one key, at its position when the spec came from a file.
func refusal(o Options, key string, err error) error {
	if o.Config == nil {
		return err
	}
	return fmt.Errorf("%s: %w", where(o.Config, key), err)
}

// Outputs are what Deploy exports.
type Outputs struct {
	Inventory      pulumi.MapOutput // decodes into inventory.Inventory (docs/architecture.md, "Inventory")
	Bucket         pulumi.StringOutput
	ExpiresAt      pulumi.StringOutput
	PlacementGroup pulumi.StringOutput
}

// Export registers the outputs as stack outputs under the names the rig reads.
func (o Outputs) Export(ctx *pulumi.Context, s Spec) {
	ctx.Export(spec.OutputInventory, o.Inventory)
	ctx.Export(spec.OutputBucket, o.Bucket)
	ctx.Export(spec.OutputExpiresAt, o.ExpiresAt)
	ctx.Export(spec.OutputRetain, pulumi.Bool(s.RetainBucket))
}

// ErrNoHostKeySeed means the stack has no rig:hostKeySeed secret.
var ErrNoHostKeySeed = errors.New("rig:hostKeySeed is not set: `rig up` generates it; with plain pulumi: " +
	"pulumi config set --secret hostKeySeed $(openssl rand -hex 32)")

// Deploy builds the cluster: network (unless reused; a subnet per AZ), a security group whose only
// outside ingress is SSH from the operator's CIDRs, the placement group of the spec's strategy (a
// cluster group in one AZ, or under multi-az a spread or partition group across three, or none),
// each node in its AZ (spec.Node.Zone) with its data volumes (spec.Volumes: one, or
// rig:dataVolumes) each at its own device, a key pair and a private, encrypted results bucket.
//
// A spec it refuses registers nothing; each problem names its key and, with o.Config, its
// file:line:column, as `rig validate` does.
func Deploy(ctx *pulumi.Context, s Spec, o Options) (Outputs, error) {
	if err := Locate(Validate(s), o.Config).Err(); err != nil {
		return Outputs{}, err
	}
	if s.HostKeySeed == "" {
		return Outputs{}, refusal(o, "hostKeySeed", ErrNoHostKeySeed)
	}
	if s.CreatedAt.IsZero() {
		s.CreatedAt = time.Now().UTC().Truncate(time.Second)
		_ = ctx.Log.Warn("rig:createdAt is not set; the tags use this update's time and move with every update "+
			"(`rig up` pins it)", nil)
	}
	// Derive every host key first: a bad seed must fail before any resource is registered.
	nodes := s.Nodes()
	keys := make([]hostkey.Key, len(nodes))
	for i, n := range nodes {
		k, err := hostkey.Derive(s.HostKeySeed, s.Stack, n.Name)
		if err != nil {
			return Outputs{}, refusal(o, "hostKeySeed", fmt.Errorf("rig:hostKeySeed: %w", err))
		}
		keys[i] = k
	}
	image, err := resolveAMI(ctx, s)
	if err != nil {
		key := "amiFamily"
		if s.AMI != "" {
			key = "ami"
		}
		return Outputs{}, refusal(o, key, err)
	}

	tags := func(name string) pulumi.StringMap {
		m := pulumi.StringMap{"Name": pulumi.String(fmt.Sprintf("rig-%s-%s", s.Stack, name))}
		for k, v := range s.Tags() {
			m[k] = pulumi.String(v)
		}
		return m
	}

	vpcID, subnets, err := network(ctx, s, tags)
	if err != nil {
		return Outputs{}, err
	}

	var v4, v6 pulumi.StringArray
	for _, c := range s.OperatorCIDRs {
		if strings.Contains(c, ":") {
			v6 = append(v6, pulumi.String(c))
		} else {
			v4 = append(v4, pulumi.String(c))
		}
	}
	sg, err := ec2.NewSecurityGroup(ctx, "rig-sg", &ec2.SecurityGroupArgs{
		VpcId:       vpcID,
		Description: pulumi.String("rig " + s.Stack + ": SSH from the operator, everything between the nodes"),
		Ingress: ec2.SecurityGroupIngressArray{
			&ec2.SecurityGroupIngressArgs{
				Description: pulumi.String("SSH from the operator's CIDRs"),
				Protocol:    pulumi.String("tcp"), FromPort: pulumi.Int(22), ToPort: pulumi.Int(22),
				CidrBlocks: v4, Ipv6CidrBlocks: v6,
			},
			&ec2.SecurityGroupIngressArgs{
				Description: pulumi.String("all traffic between the cluster's nodes"),
				Protocol:    pulumi.String("-1"), FromPort: pulumi.Int(0), ToPort: pulumi.Int(0),
				Self: pulumi.Bool(true),
			},
		},
		Egress: ec2.SecurityGroupEgressArray{
			&ec2.SecurityGroupEgressArgs{
				Description: pulumi.String("packages, S3 and the AWS APIs"),
				Protocol:    pulumi.String("-1"), FromPort: pulumi.Int(0), ToPort: pulumi.Int(0),
				CidrBlocks: pulumi.StringArray{pulumi.String("0.0.0.0/0")},
			},
		},
		RevokeRulesOnDelete: pulumi.Bool(true),
		Tags:                tags("sg"),
	})
	if err != nil {
		return Outputs{}, fmt.Errorf("security group: %w", err)
	}

	pgName, hasPG, err := placementGroup(ctx, s, tags)
	if err != nil {
		return Outputs{}, err
	}

	kp, err := ec2.NewKeyPair(ctx, "rig-key", &ec2.KeyPairArgs{
		PublicKey: pulumi.String(s.PublicKey),
		Tags:      tags("key"),
	})
	if err != nil {
		return Outputs{}, fmt.Errorf("key pair: %w", err)
	}

	bucket, err := resultsBucket(ctx, s, tags)
	if err != nil {
		return Outputs{}, err
	}

	// A capacity reservation matches one instance type in one AZ, so each role has its own.
	capRes := func(id string) ec2.InstanceCapacityReservationSpecificationPtrInput {
		if id == "" {
			return nil
		}
		return &ec2.InstanceCapacityReservationSpecificationArgs{
			CapacityReservationTarget: &ec2.InstanceCapacityReservationSpecificationCapacityReservationTargetArgs{
				CapacityReservationId: pulumi.String(id),
			},
		}
	}

	var nodeOuts []any
	var servers []pulumi.Resource
	for i, n := range nodes {
		// The data volumes exist before their instance, so that a destroy terminates the instance
		// (which detaches them) before it deletes them; see attachData.
		var vols []*ebs.Volume
		instOpts := []pulumi.ResourceOption{
			// A newer image in the SSM parameter must not replace a running test cluster.
			pulumi.IgnoreChanges([]string{"ami"}),
		}
		if n.DataVolume {
			for _, v := range s.Volumes() {
				vol, err := dataVolume(ctx, s, n, v, tags)
				if err != nil {
					return Outputs{}, err
				}
				vols = append(vols, vol)
				instOpts = append(instOpts, pulumi.DependsOn([]pulumi.Resource{vol}))
			}
		}
		// An instance boots into cloud-init, whose package step needs the internet: it is launched
		// only after its subnet is associated with the route table and the default route to the
		// gateway exists, and so a destroy terminates it before the route and the gateway go.
		if deps := subnets[n.Zone].routed; len(deps) > 0 {
			instOpts = append(instOpts, pulumi.DependsOn(deps))
		}
		reservation := s.ServerCapacityReservationID
		var group pulumi.StringPtrInput
		if hasPG {
			group = pgName
		}
		if n.Role == "client" {
			reservation = s.ClientCapacityReservationID
			// The servers are launched first, so that the cluster placement group is placed
			// for them; a client of another type that finds no room there fails on its own
			// (and rig offers clientInPlacementGroup false) instead of failing them all.
			instOpts = append(instOpts, pulumi.DependsOn(servers))
			if !s.ClientInPlacementGroup {
				group = nil
			}
		}
		inst, err := ec2.NewInstance(ctx, n.Name, &ec2.InstanceArgs{
			Ami:                              image,
			CapacityReservationSpecification: capRes(reservation),
			InstanceType:                     pulumi.String(n.InstanceType),
			AvailabilityZone:                 pulumi.String(n.Zone),
			SubnetId:                         subnets[n.Zone].id,
			VpcSecurityGroupIds:              pulumi.StringArray{sg.ID()},
			PlacementGroup:                   group,
			KeyName:                          kp.KeyName,
			EbsOptimized:                     pulumi.Bool(true),
			AssociatePublicIpAddress:         pulumi.Bool(true),
			RootBlockDevice: &ec2.InstanceRootBlockDeviceArgs{
				VolumeType:          pulumi.String("gp3"),
				VolumeSize:          pulumi.Int(s.RootVolumeSize),
				Encrypted:           pulumi.Bool(true),
				DeleteOnTermination: pulumi.Bool(true),
				Tags:                tags(n.Name + "-root"),
			},
			// The host key is in the user data, so the user data is a secret, and a new key
			// means a new instance rather than a key the running sshd never reads.
			UserData:                pulumi.ToSecret(pulumi.String(keys[i].CloudInit() + spec.CloudInitPackages())).(pulumi.StringOutput),
			UserDataReplaceOnChange: pulumi.Bool(true),
			MetadataOptions: &ec2.InstanceMetadataOptionsArgs{
				HttpTokens:   pulumi.String("required"),
				HttpEndpoint: pulumi.String("enabled"),
			},
			Tags: tags(n.Name),
		}, instOpts...)
		if err != nil {
			return Outputs{}, fmt.Errorf("instance %s: %w", n.Name, err)
		}
		if n.Role == "server" {
			servers = append(servers, inst)
		}
		outs := []any{inst.PublicIp, inst.PrivateIp}
		for j, vol := range vols {
			if err := attachData(ctx, s, n, s.Volumes()[j], inst, vol); err != nil {
				return Outputs{}, err
			}
			outs = append(outs, vol.ID().ToStringOutput())
		}
		n, hostKey, user, specVols := n, keys[i].Public, s.LoginUser(), s.Volumes()
		nodeOuts = append(nodeOuts, pulumi.All(outs...).ApplyT(
			func(v []any) (string, error) {
				node := inventory.Node{
					Name: n.Name, Role: n.Role, Address: v[0].(string), PrivateAddress: v[1].(string),
					SSH:          &inventory.SSH{User: user, Port: 22, HostKey: hostKey},
					InstanceType: n.InstanceType, AvailabilityZone: n.Zone,
				}
				// Each volume with its id, device name and what was provisioned; the first is
				// also data_device, for readers of inventories written before volumes were listed.
				for j, id := range v[2:] {
					node.Volumes = append(node.Volumes, specVols[j].Inventory(id.(string)))
				}
				if len(node.Volumes) > 0 {
					node.DataDevice, node.DeviceName = node.Volumes[0].VolumeID, node.Volumes[0].DeviceName
				}
				b, err := json.Marshal(node)
				return string(b), err
			}))
	}

	expiresAt := s.ExpiresAt().UTC().Format(time.RFC3339)
	placement := s.Placement
	if placement == "" {
		placement = spec.PlacementSingleAZ
	}
	inv := pulumi.All(append([]any{bucket.Bucket}, nodeOuts...)...).ApplyT(func(v []any) (map[string]any, error) {
		out := inventory.Inventory{Target: "aws", Bucket: v[0].(string), ExpiresAt: expiresAt, Placement: placement}
		for _, raw := range v[1:] {
			var n inventory.Node
			if err := json.Unmarshal([]byte(raw.(string)), &n); err != nil {
				return nil, err
			}
			out.Nodes = append(out.Nodes, n)
		}
		// A map, not a JSON string, so `pulumi stack output inventory --json` is the inventory.
		b, err := json.Marshal(out)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		return m, json.Unmarshal(b, &m)
	}).(pulumi.MapOutput)

	out := Outputs{
		Inventory:      inv,
		Bucket:         bucket.Bucket,
		ExpiresAt:      pulumi.String(expiresAt).ToStringOutput(),
		PlacementGroup: pulumi.String("").ToStringOutput(),
	}
	if hasPG {
		out.PlacementGroup = pgName
	}
	return out, nil
}

// volumeResource names a node's data volume and its attachment: NODE-data for the one volume of
// the volume* keys (the name it always had, so an existing stack keeps its volume), NODE-data-NAME
// for each of a dataVolumes list.
func volumeResource(s Spec, n spec.Node, v spec.DataVolume) string {
	if len(s.DataVolumes) == 0 {
		return n.Name + "-data"
	}
	return n.Name + "-data-" + v.Name
}

// dataVolume creates one data volume of a node with its type, size, IOPS and throughput.
func dataVolume(ctx *pulumi.Context, s Spec, n spec.Node, v spec.DataVolume, tags func(string) pulumi.StringMap) (*ebs.Volume, error) {
	name := volumeResource(s, n, v)
	args := &ebs.VolumeArgs{
		AvailabilityZone: pulumi.String(n.Zone),
		Type:             pulumi.String(v.Type),
		Size:             pulumi.Int(v.Size),
		Iops:             pulumi.Int(v.IOPS),
		Encrypted:        pulumi.Bool(true),
		Tags:             tags(name),
	}
	if v.Type == spec.VolumeGP3 {
		args.Throughput = pulumi.Int(v.Throughput)
	}
	vol, err := ebs.NewVolume(ctx, name, args)
	if err != nil {
		return nil, fmt.Errorf("data volume %s of %s: %w", v.Name, n.Name, err)
	}
	return vol, nil
}

// attachData attaches one data volume at its own device name.
//
// A replaced attachment (a new device when rig:dataVolumes is reordered, a new instance) is
// deleted before its replacement is created (DeleteBeforeReplace): AWS refuses to attach a volume
// that is still attached, or at a device that is still in use. That delete is a real
// DetachVolume, which hangs while the node has the volume mounted, so `rig up` first has the
// node's agent unmount it and detaches it itself (infra/automation, DetachFirst). On a destroy the
// attachment goes with its instance (DeletedWith): terminating the instance detaches the volume,
// so a destroy never calls DetachVolume (the provider's known hang on a mounted volume), and the
// volume, on which the instance depends, is deleted after it. skipDestroy, which would leave even
// a replaced attachment in place, is for volumes that are kept, and rig keeps none.
func attachData(ctx *pulumi.Context, s Spec, n spec.Node, v spec.DataVolume, inst *ec2.Instance, vol *ebs.Volume) error {
	if _, err := ec2.NewVolumeAttachment(ctx, volumeResource(s, n, v), &ec2.VolumeAttachmentArgs{
		DeviceName: pulumi.String(v.Device),
		InstanceId: inst.ID().ToStringOutput(),
		VolumeId:   vol.ID().ToStringOutput(),
	}, pulumi.DeleteBeforeReplace(true), pulumi.DeletedWith(inst)); err != nil {
		return fmt.Errorf("attach data volume %s of %s: %w", v.Name, n.Name, err)
	}
	return nil
}

// placementGroup creates the spec's placement group and returns its name, or false for none. A
// cluster group is one AZ's; across AZs the replicas go in a rack-level spread group (at most
// seven running instances per AZ, which Validate checks) or a partition group.
func placementGroup(ctx *pulumi.Context, s Spec, tags func(string) pulumi.StringMap) (pulumi.StringOutput, bool, error) {
	args := &ec2.PlacementGroupArgs{Strategy: pulumi.String(s.GroupStrategy()), Tags: tags("pg")}
	switch s.GroupStrategy() {
	case spec.StrategyNone:
		return pulumi.StringOutput{}, false, nil
	case spec.StrategySpread:
		args.SpreadLevel = pulumi.String("rack")
	case spec.StrategyPartition:
		args.PartitionCount = pulumi.Int(spec.PartitionCount)
	}
	pg, err := ec2.NewPlacementGroup(ctx, "rig-pg", args)
	if err != nil {
		return pulumi.StringOutput{}, false, fmt.Errorf("placement group: %w", err)
	}
	return pg.Name, true, nil
}

// subnet is a subnet an instance is launched into and what makes it reach the internet: its route
// table association, the default route and the gateway (none when the subnet is reused, whose
// routing is the owner's).
type subnet struct {
	id     pulumi.StringInput
	routed []pulumi.Resource
}

// network returns the VPC and the subnet of each of the spec's AZs, creating them (with an
// internet gateway and a default route) unless the spec reuses a subnet (single-az only). The
// first subnet keeps the names single-az stacks have always had, so their resources stay put.
func network(ctx *pulumi.Context, s Spec, tags func(string) pulumi.StringMap) (pulumi.StringInput, map[string]subnet, error) {
	if s.SubnetID != "" {
		return pulumi.String(s.VPCID), map[string]subnet{s.AvailabilityZone: {id: pulumi.String(s.SubnetID)}}, nil
	}
	zones := s.Zones()
	cidrs, err := spec.SubnetCIDRs(spec.VPCCIDR, len(zones))
	if err != nil {
		return nil, nil, err
	}
	vpc, err := ec2.NewVpc(ctx, "rig-vpc", &ec2.VpcArgs{
		CidrBlock:          pulumi.String(spec.VPCCIDR),
		EnableDnsSupport:   pulumi.Bool(true),
		EnableDnsHostnames: pulumi.Bool(true),
		Tags:               tags("vpc"),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("vpc: %w", err)
	}
	igw, err := ec2.NewInternetGateway(ctx, "rig-igw", &ec2.InternetGatewayArgs{VpcId: vpc.ID(), Tags: tags("igw")})
	if err != nil {
		return nil, nil, fmt.Errorf("internet gateway: %w", err)
	}
	rt, err := ec2.NewRouteTable(ctx, "rig-rt", &ec2.RouteTableArgs{VpcId: vpc.ID(), Tags: tags("rt")})
	if err != nil {
		return nil, nil, fmt.Errorf("route table: %w", err)
	}
	route, err := ec2.NewRoute(ctx, "rig-default-route", &ec2.RouteArgs{
		RouteTableId:         rt.ID(),
		DestinationCidrBlock: pulumi.String("0.0.0.0/0"),
		GatewayId:            igw.ID(),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("default route: %w", err)
	}
	subnets := map[string]subnet{}
	for i, zone := range zones {
		name, rtaName, tag := "rig-subnet", "rig-rta", "subnet"
		if i > 0 {
			name, rtaName, tag = fmt.Sprintf("rig-subnet-%d", i), fmt.Sprintf("rig-rta-%d", i), "subnet-"+zone
		}
		sn, err := ec2.NewSubnet(ctx, name, &ec2.SubnetArgs{
			VpcId:               vpc.ID(),
			CidrBlock:           pulumi.String(cidrs[i]),
			AvailabilityZone:    pulumi.String(zone),
			MapPublicIpOnLaunch: pulumi.Bool(true),
			Tags:                tags(tag),
		})
		if err != nil {
			return nil, nil, fmt.Errorf("subnet in %s: %w", zone, err)
		}
		rta, err := ec2.NewRouteTableAssociation(ctx, rtaName, &ec2.RouteTableAssociationArgs{
			SubnetId:     sn.ID(),
			RouteTableId: rt.ID(),
		})
		if err != nil {
			return nil, nil, fmt.Errorf("route table association in %s: %w", zone, err)
		}
		subnets[zone] = subnet{id: sn.ID(), routed: []pulumi.Resource{rta, route, igw}}
	}
	return vpc.ID(), subnets, nil
}

// resultsBucket creates the private, encrypted bucket that archives go to. It is retained when
// the stack is destroyed unless the spec says otherwise.
func resultsBucket(ctx *pulumi.Context, s Spec, tags func(string) pulumi.StringMap) (*s3.BucketV2, error) {
	var opts []pulumi.ResourceOption
	if s.RetainBucket {
		opts = append(opts, pulumi.RetainOnDelete(true))
	}
	bucket, err := s3.NewBucketV2(ctx, "rig-results", &s3.BucketV2Args{
		BucketPrefix: pulumi.String("rig-" + spec.BucketPrefixStack(s.Stack) + "-"),
		ForceDestroy: pulumi.Bool(!s.RetainBucket),
		Tags:         tags("results"),
	}, opts...)
	if err != nil {
		return nil, fmt.Errorf("results bucket: %w", err)
	}
	if _, err := s3.NewBucketPublicAccessBlock(ctx, "rig-results", &s3.BucketPublicAccessBlockArgs{
		Bucket:                bucket.ID(),
		BlockPublicAcls:       pulumi.Bool(true),
		BlockPublicPolicy:     pulumi.Bool(true),
		IgnorePublicAcls:      pulumi.Bool(true),
		RestrictPublicBuckets: pulumi.Bool(true),
	}, opts...); err != nil {
		return nil, fmt.Errorf("results bucket public access block: %w", err)
	}
	if _, err := s3.NewBucketServerSideEncryptionConfigurationV2(ctx, "rig-results", &s3.BucketServerSideEncryptionConfigurationV2Args{
		Bucket: bucket.ID(),
		Rules: s3.BucketServerSideEncryptionConfigurationV2RuleArray{
			&s3.BucketServerSideEncryptionConfigurationV2RuleArgs{
				ApplyServerSideEncryptionByDefault: &s3.BucketServerSideEncryptionConfigurationV2RuleApplyServerSideEncryptionByDefaultArgs{
					SseAlgorithm: pulumi.String("AES256"),
				},
			},
		},
	}, opts...); err != nil {
		return nil, fmt.Errorf("results bucket encryption: %w", err)
	}
	if s.ResultsExpireDays > 0 {
		if _, err := s3.NewBucketLifecycleConfigurationV2(ctx, "rig-results", &s3.BucketLifecycleConfigurationV2Args{
			Bucket: bucket.ID(),
			Rules: s3.BucketLifecycleConfigurationV2RuleArray{
				&s3.BucketLifecycleConfigurationV2RuleArgs{
					Id:         pulumi.String("rig-results-expire"),
					Status:     pulumi.String("Enabled"),
					Filter:     &s3.BucketLifecycleConfigurationV2RuleFilterArgs{Prefix: pulumi.String("")},
					Expiration: &s3.BucketLifecycleConfigurationV2RuleExpirationArgs{Days: pulumi.Int(s.ResultsExpireDays)},
					// An interrupted multipart upload of an archive is billed until aborted.
					AbortIncompleteMultipartUpload: &s3.BucketLifecycleConfigurationV2RuleAbortIncompleteMultipartUploadArgs{
						DaysAfterInitiation: pulumi.Int(1),
					},
				},
			},
		}, opts...); err != nil {
			return nil, fmt.Errorf("results bucket lifecycle: %w", err)
		}
	}
	return bucket, nil
}

// resolveAMI returns the explicit AMI after checking it is x86_64, or the latest image of the
// family from its public SSM parameter.
//
// The parameter is read with the output form of the invoke: the provider may mark the result's
// value as secret (its schema says value is always sensitive), and the plain form then fails the
// whole program with "unexpected secret result returned to invoke call". An image id is no
// secret, so the id is unsecreted: the instance's ami stays readable in previews. The explicit
// image goes through ec2.LookupAmi, whose result holds no secret, so that a wrong architecture
// is refused before any resource exists.
func resolveAMI(ctx *pulumi.Context, s Spec) (pulumi.StringInput, error) {
	if s.AMI != "" {
		img, err := ec2.LookupAmi(ctx, &ec2.LookupAmiArgs{
			Filters: []ec2.GetAmiFilter{{Name: "image-id", Values: []string{s.AMI}}},
		})
		if err != nil {
			return nil, fmt.Errorf("rig:ami %s: look up image: %w", s.AMI, err)
		}
		if img.Architecture != "x86_64" {
			return nil, fmt.Errorf("rig:ami %s is %s: c6in and c7i instances need x86_64", s.AMI, img.Architecture)
		}
		return pulumi.String(s.AMI), nil
	}
	param, ok := spec.AMIParameters[s.AMIFamily]
	if !ok {
		families := make([]string, 0, len(spec.AMIParameters))
		for f := range spec.AMIParameters {
			families = append(families, f)
		}
		sort.Strings(families)
		return nil, fmt.Errorf("rig:amiFamily %q: want one of %v", s.AMIFamily, families)
	}
	p := ssm.LookupParameterOutput(ctx, ssm.LookupParameterOutputArgs{Name: pulumi.String(param)})
	id := p.ApplyT(func(r ssm.LookupParameterResult) (string, error) {
		v := r.InsecureValue
		if v == "" {
			v = r.Value
		}
		if !strings.HasPrefix(v, "ami-") {
			return "", fmt.Errorf("rig:amiFamily %s: SSM parameter %s holds %q, not an image id", s.AMIFamily, param, v)
		}
		return v, nil
	}).(pulumi.StringOutput)
	return pulumi.Unsecret(id).(pulumi.StringOutput), nil
}
