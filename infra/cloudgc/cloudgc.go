// Package cloudgc finds what the rig left running from the cloud side: every resource carrying
// the rig-stack tag, in every region asked, found through the Resource Groups Tagging API and
// described and deleted through EC2. It does not need the stack's Pulumi state, so clusters
// whose state was lost, or lives on another machine, are found too (roachprod and Scylla's SCT
// clean up the same way). It runs in the stack driver (infra/stackctl), never in rig.
package cloudgc

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/resourcegroupstaggingapi"
	tagschemas "github.com/aws/aws-sdk-go-v2/service/resourcegroupstaggingapi/schemas"
	tagtypes "github.com/aws/aws-sdk-go-v2/service/resourcegroupstaggingapi/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"

	"github.com/rig-dev/rig/infra/awsconf"
	"github.com/rig-dev/rig/infra/spec"
)

// Tag keys gc reads (spec.Spec.Tags puts them on every taggable resource).
const (
	TagStack      = spec.TagStack
	TagGeneration = spec.TagGeneration
	TagExpires    = spec.TagExpiresAt
	TagOwner      = spec.TagOwner
)

// Kinds of resources, in the order they are deleted: each one only after everything that
// depends on it is gone.
const (
	KindInstance        = "instance"
	KindVolume          = "volume"
	KindKeyPair         = "key-pair"
	KindPlacementGroup  = "placement-group"
	KindSecurityGroup   = "security-group"
	KindRouteTable      = "route-table"
	KindSubnet          = "subnet"
	KindInternetGateway = "internet-gateway"
	KindVPC             = "vpc"
	KindBucket          = "bucket" // listed with its size, never deleted (rig:retainBucket keeps it on purpose)
)

var deleteOrder = []string{KindInstance, KindVolume, KindKeyPair, KindPlacementGroup, KindSecurityGroup,
	KindRouteTable, KindSubnet, KindInternetGateway, KindVPC}

// Resource is one tagged resource.
type Resource struct {
	Region     string
	Kind       string
	ID         string // i-…, vol-…, the placement group's or bucket's name
	ARN        string
	Stack      string
	Generation string // "" on resources made before generations
	Owner      string
	ExpiresAt  time.Time // zero when the tag is missing or unreadable
	State      string    // instances and volumes; StateGone when EC2 no longer has it
	Detail     string    // e.g. "c6in.16xlarge", "gp3 200 GiB 4000 IOPS"
	Hourly     float64   // USD per hour; NaN-free: -1 when unknown
	SizeBytes  int64     // buckets
	Objects    int64     // buckets
}

// Clients are the AWS API clients of one region.
type Clients struct {
	EC2     *ec2.Client
	Tagging *resourcegroupstaggingapi.Client
	S3      *s3.Client
}

// NewClients builds the clients of a target (a profile and region, infra/awsconf).
func NewClients(ctx context.Context, t awsconf.Target) (Clients, error) {
	cfg, err := t.Load(ctx)
	if err != nil {
		return Clients{}, err
	}
	return ClientsFromConfig(cfg), nil
}

// ClientsFromConfig builds the clients from an SDK configuration.
func ClientsFromConfig(cfg aws.Config) Clients {
	return Clients{EC2: ec2.NewFromConfig(cfg), Tagging: resourcegroupstaggingapi.NewFromConfig(cfg, TaggingJSON),
		S3: s3.NewFromConfig(cfg, func(o *s3.Options) {
			// An endpoint of one's own (AWS_ENDPOINT_URL_S3: an emulator, MinIO) takes bucket
			// names in the path.
			o.UsePathStyle = o.BaseEndpoint != nil
		})}
}

// TaggingJSON makes a Resource Groups Tagging API client speak AWS JSON 1.1. The service
// serves it beside RPC v2 CBOR, the SDK's default since v1.42.0 (its changelog: "an additional
// protocol alongside the existing AWS JSON 1.1"); moto serves only JSON, and speaking it here
// keeps the calls the emulator tests the calls made in production.
func TaggingJSON(o *resourcegroupstaggingapi.Options) {
	o.Protocol = awsjson.New11(tagschemas.ResourceGroupsTaggingAPI_20170126)
}

// Options tune Scan and Delete.
type Options struct {
	Regions []string
	// Profile is the shared-config profile of the account scanned ("" for the default chain):
	// the aws:profile of the stacks whose regions these are.
	Profile string
	// Clients returns the clients of a region; nil means NewClients with Profile.
	Clients func(ctx context.Context, region string) (Clients, error)
	// Poll is how often Delete checks that instances are terminated (default 5 s); Wait bounds it
	// (default 10 min).
	Poll, Wait time.Duration
}

func (o *Options) defaults() {
	if o.Clients == nil {
		profile := o.Profile
		o.Clients = func(ctx context.Context, region string) (Clients, error) {
			return NewClients(ctx, awsconf.Target{Profile: profile, Region: region})
		}
	}
	if o.Poll <= 0 {
		o.Poll = 5 * time.Second
	}
	if o.Wait <= 0 {
		o.Wait = 10 * time.Minute
	}
}

// Scan lists every resource tagged rig-stack in the regions, with what it costs per hour. The
// error joins the regions that could not be read; what could be read is returned.
func Scan(ctx context.Context, o Options) ([]Resource, error) {
	o.defaults()
	var out []Resource
	var errs []error
	for _, region := range o.Regions {
		rs, err := scanRegion(ctx, o, region)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", region, err))
		}
		out = append(out, rs...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Stack != b.Stack {
			return a.Stack < b.Stack
		}
		if a.Region != b.Region {
			return a.Region < b.Region
		}
		if ka, kb := kindRank(a.Kind), kindRank(b.Kind); ka != kb {
			return ka < kb
		}
		return a.ID < b.ID
	})
	return out, errors.Join(errs...)
}

func kindRank(k string) int {
	for i, d := range deleteOrder {
		if d == k {
			return i
		}
	}
	return len(deleteOrder)
}

func scanRegion(ctx context.Context, o Options, region string) ([]Resource, error) {
	c, err := o.Clients(ctx, region)
	if err != nil {
		return nil, err
	}
	var out []Resource
	in := &resourcegroupstaggingapi.GetResourcesInput{TagFilters: []tagtypes.TagFilter{{Key: aws.String(TagStack)}}}
	for {
		page, err := c.Tagging.GetResources(ctx, in)
		if err != nil {
			return out, fmt.Errorf("tagging API GetResources: %w", err)
		}
		for _, m := range page.ResourceTagMappingList {
			r, ok := fromARN(region, aws.ToString(m.ResourceARN))
			if !ok {
				continue
			}
			for _, t := range m.Tags {
				switch aws.ToString(t.Key) {
				case TagStack:
					r.Stack = aws.ToString(t.Value)
				case TagGeneration:
					r.Generation = aws.ToString(t.Value)
				case TagOwner:
					r.Owner = aws.ToString(t.Value)
				case TagExpires:
					r.ExpiresAt, _ = time.Parse(time.RFC3339, aws.ToString(t.Value))
				}
			}
			out = append(out, r)
		}
		if aws.ToString(page.PaginationToken) == "" {
			break
		}
		in.PaginationToken = page.PaginationToken
	}
	if err := describe(ctx, c, region, out); err != nil {
		return out, err
	}
	// The tagging API lists resources for a while after they are deleted: terminated instances,
	// and ARNs whose resource EC2 no longer has at all. Both are kept, marked gone, so that the
	// tally can say so; nothing is asked of them again.
	for i := range out {
		if out[i].Kind == KindInstance && (out[i].State == "terminated" || out[i].State == "") {
			out[i].State = StateGone
		}
		if out[i].State == StateGone {
			out[i].Hourly = 0
		}
	}
	return out, nil
}

// StateGone is the state of a resource that the tagging API lists and EC2 no longer has (or has
// as terminated).
const StateGone = "gone"

// describeEach runs a batched describe and, when AWS refuses the batch because one of the ids
// does not exist (a batch fails whole: InvalidInstanceID.NotFound, InvalidVolume.NotFound),
// describes the ids one by one and returns those that are gone.
func describeEach(ids []string, batch func([]string) error) (gone []string, err error) {
	err = batch(ids)
	if !notFound(err) {
		return nil, err
	}
	for _, id := range ids {
		if err := batch([]string{id}); notFound(err) {
			gone = append(gone, id)
		} else if err != nil {
			return gone, err
		}
	}
	return gone, nil
}

// fromARN reads the kind and id of a resource from its ARN.
func fromARN(region, arn string) (Resource, bool) {
	r := Resource{Region: region, ARN: arn, Hourly: -1}
	if name, ok := strings.CutPrefix(arn, "arn:aws:s3:::"); ok {
		r.Kind, r.ID = KindBucket, name
		return r, true
	}
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[2] != "ec2" {
		return r, false
	}
	kind, id, ok := strings.Cut(parts[5], "/")
	if !ok || kindRank(kind) == len(deleteOrder) {
		return r, false
	}
	r.Kind, r.ID = kind, id
	switch kind {
	case KindInstance, KindVolume:
		// priced below
	default:
		r.Hourly = 0 // VPCs, subnets, groups, key pairs cost nothing by themselves
	}
	return r, true
}

// describe fills in state, detail and price of instances and volumes, and the size of buckets.
func describe(ctx context.Context, c Clients, region string, rs []Resource) error {
	prices, priced := spec.Prices(region)
	ids := func(kind string) []string {
		var out []string
		for _, r := range rs {
			if r.Kind == kind {
				out = append(out, r.ID)
			}
		}
		return out
	}
	byID := map[string]*Resource{}
	for i := range rs {
		byID[rs[i].Kind+"/"+rs[i].ID] = &rs[i]
	}
	markGone := func(kind string, gone []string) {
		for _, id := range gone {
			byID[kind+"/"+id].State = StateGone
		}
	}
	if insts := ids(KindInstance); len(insts) > 0 {
		gone, err := describeEach(insts, func(ids []string) error {
			p := ec2.NewDescribeInstancesPaginator(c.EC2, &ec2.DescribeInstancesInput{InstanceIds: ids})
			for p.HasMorePages() {
				page, err := p.NextPage(ctx)
				if err != nil {
					return err
				}
				for _, res := range page.Reservations {
					for _, in := range res.Instances {
						r := byID[KindInstance+"/"+aws.ToString(in.InstanceId)]
						if r == nil {
							continue
						}
						if in.State != nil {
							r.State = string(in.State.Name)
						}
						r.Detail = string(in.InstanceType)
						if h, ok := prices.InstanceHourly[r.Detail]; priced && ok {
							r.Hourly = h
							if aws.ToString(in.PublicIpAddress) != "" {
								r.Hourly += prices.PublicIPv4Hourly
							}
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("EC2 DescribeInstances: %w", err)
		}
		markGone(KindInstance, gone)
	}
	if vols := ids(KindVolume); len(vols) > 0 {
		gone, err := describeEach(vols, func(ids []string) error {
			p := ec2.NewDescribeVolumesPaginator(c.EC2, &ec2.DescribeVolumesInput{VolumeIds: ids})
			for p.HasMorePages() {
				page, err := p.NextPage(ctx)
				if err != nil {
					return err
				}
				for _, v := range page.Volumes {
					r := byID[KindVolume+"/"+aws.ToString(v.VolumeId)]
					if r == nil {
						continue
					}
					r.State = string(v.State)
					size, iops, thr := int(aws.ToInt32(v.Size)), int(aws.ToInt32(v.Iops)), int(aws.ToInt32(v.Throughput))
					r.Detail = fmt.Sprintf("%s %d GiB %d IOPS", v.VolumeType, size, iops)
					if priced {
						if lines, err := prices.VolumeLines(string(v.VolumeType), size, iops, thr); err == nil {
							r.Hourly = spec.Hourly(lines)
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("EC2 DescribeVolumes: %w", err)
		}
		markGone(KindVolume, gone)
	}
	for i := range rs {
		if rs[i].Kind == KindBucket && c.S3 != nil {
			if err := bucketSize(ctx, c, &rs[i]); err != nil {
				rs[i].Detail = "size unknown: " + err.Error()
			}
		}
	}
	return nil
}

// s3StandardGBMonth is S3 Standard storage (first 50 TB) in the priced US regions, on the date of
// infra/spec's table.
const s3StandardGBMonth = 0.023

func bucketSize(ctx context.Context, c Clients, r *Resource) error {
	p := s3.NewListObjectsV2Paginator(c.S3, &s3.ListObjectsV2Input{Bucket: aws.String(r.ID)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, obj := range page.Contents {
			r.SizeBytes += aws.ToInt64(obj.Size)
			r.Objects++
		}
	}
	r.Detail = fmt.Sprintf("%d objects, %.1f MiB", r.Objects, float64(r.SizeBytes)/(1<<20))
	r.Hourly = float64(r.SizeBytes) / 1e9 * s3StandardGBMonth / spec.HoursPerMonth
	return nil
}
