package cloudgc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// Verdicts of Classify.
const (
	Live       = "live"              // its stack is known and not expired: left alone, not listed
	Expired    = "expired"           // past expires-at and no stack in this backend owns it: deleted
	Unknown    = "unknown stack"     // no stack in this backend, not expired: listed, deleted only with Orphans
	KnownStack = "expired, in state" // expired, but its stack is in this backend: `rig gc` destroys it through Pulumi
	Retained   = "retained bucket"   // listed with its size, never deleted
)

// Finding is a resource with what gc makes of it.
type Finding struct {
	Resource
	Verdict string
	Delete  bool
}

// Classify decides for each resource. known holds the stacks of this backend; orphans also deletes
// resources of unknown stacks that are not expired yet (another machine's live cluster looks
// exactly like that, so it takes a flag).
func Classify(rs []Resource, known map[string]bool, now time.Time, orphans bool) []Finding {
	var out []Finding
	for _, r := range rs {
		f := Finding{Resource: r}
		expired := !r.ExpiresAt.IsZero() && now.After(r.ExpiresAt)
		switch {
		case known[r.Stack] && !expired:
			continue
		case r.Kind == KindBucket:
			f.Verdict = Retained
		case known[r.Stack]:
			f.Verdict = KnownStack
		case expired:
			f.Verdict, f.Delete = Expired, true
		default:
			f.Verdict, f.Delete = Unknown, orphans
		}
		out = append(out, f)
	}
	return out
}

// Delete removes the findings marked Delete, region by region, in dependency order: instances
// (waiting until they are terminated, which detaches their volumes), volumes, key pairs,
// placement groups, security groups, route tables (after their associations), subnets, internet
// gateways (after detaching), VPCs. A resource that fails is reported and the rest still go;
// the error joins the failures.
func Delete(ctx context.Context, fs []Finding, o Options, out io.Writer) error {
	o.defaults()
	byRegion := map[string][]Resource{}
	var regions []string
	for _, f := range fs {
		if !f.Delete {
			continue
		}
		if _, ok := byRegion[f.Region]; !ok {
			regions = append(regions, f.Region)
		}
		byRegion[f.Region] = append(byRegion[f.Region], f.Resource)
	}
	var errs []error
	for _, region := range regions {
		c, err := o.Clients(ctx, region)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := deleteRegion(ctx, c.EC2, byRegion[region], o, out); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", region, err))
		}
	}
	return errors.Join(errs...)
}

func deleteRegion(ctx context.Context, c *ec2.Client, rs []Resource, o Options, out io.Writer) error {
	var errs []error
	of := func(kind string) []Resource {
		var l []Resource
		for _, r := range rs {
			if r.Kind == kind {
				l = append(l, r)
			}
		}
		return l
	}
	done := func(r Resource, err error) {
		if notFound(err) {
			// The tagging API lists a resource for a while after it is deleted.
			fmt.Fprintf(out, "rig: %s: %s %s was already gone\n", r.Region, r.Kind, r.ID)
			return
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("delete %s %s: %w", r.Kind, r.ID, err))
			fmt.Fprintf(out, "rig: %s: could not delete %s %s: %v\n", r.Region, r.Kind, r.ID, err)
			return
		}
		fmt.Fprintf(out, "rig: %s: deleted %s %s (stack %s)\n", r.Region, r.Kind, r.ID, r.Stack)
	}
	if insts := of(KindInstance); len(insts) > 0 {
		var ids []string
		for _, r := range insts {
			ids = append(ids, r.ID)
		}
		_, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids})
		if err == nil {
			fmt.Fprintf(out, "rig: %s: terminating %d instance(s), waiting until they are gone\n", insts[0].Region, len(ids))
			err = waitTerminated(ctx, c, ids, o)
		}
		for _, r := range insts {
			done(r, err)
		}
		if err != nil {
			// Volumes, groups and the network cannot go while instances hold them.
			return errors.Join(errs...)
		}
	}
	for _, r := range of(KindVolume) {
		_, err := c.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: aws.String(r.ID)})
		done(r, err)
	}
	for _, r := range of(KindKeyPair) {
		_, err := c.DeleteKeyPair(ctx, &ec2.DeleteKeyPairInput{KeyPairId: aws.String(r.ID)})
		done(r, err)
	}
	for _, r := range of(KindPlacementGroup) {
		_, err := c.DeletePlacementGroup(ctx, &ec2.DeletePlacementGroupInput{GroupName: aws.String(r.ID)})
		done(r, err)
	}
	for _, r := range of(KindSecurityGroup) {
		_, err := c.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(r.ID)})
		done(r, err)
	}
	for _, r := range of(KindRouteTable) {
		done(r, deleteRouteTable(ctx, c, r.ID))
	}
	for _, r := range of(KindSubnet) {
		_, err := c.DeleteSubnet(ctx, &ec2.DeleteSubnetInput{SubnetId: aws.String(r.ID)})
		done(r, err)
	}
	for _, r := range of(KindInternetGateway) {
		done(r, deleteGateway(ctx, c, r.ID))
	}
	for _, r := range of(KindVPC) {
		_, err := c.DeleteVpc(ctx, &ec2.DeleteVpcInput{VpcId: aws.String(r.ID)})
		done(r, err)
	}
	return errors.Join(errs...)
}

func waitTerminated(ctx context.Context, c *ec2.Client, ids []string, o Options) error {
	deadline := time.Now().Add(o.Wait)
	for {
		page, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
		if err != nil {
			return fmt.Errorf("wait for termination: %w", err)
		}
		left := 0
		for _, res := range page.Reservations {
			for _, in := range res.Instances {
				if in.State == nil || in.State.Name != ec2types.InstanceStateNameTerminated {
					left++
				}
			}
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d instance(s) not terminated after %s", left, o.Wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.Poll):
		}
	}
}

func deleteRouteTable(ctx context.Context, c *ec2.Client, id string) error {
	rt, err := c.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{RouteTableIds: []string{id}})
	if err != nil {
		return err
	}
	for _, t := range rt.RouteTables {
		for _, a := range t.Associations {
			if aws.ToBool(a.Main) {
				continue
			}
			if _, err := c.DisassociateRouteTable(ctx, &ec2.DisassociateRouteTableInput{AssociationId: a.RouteTableAssociationId}); err != nil {
				return fmt.Errorf("disassociate %s: %w", aws.ToString(a.RouteTableAssociationId), err)
			}
		}
	}
	_, err = c.DeleteRouteTable(ctx, &ec2.DeleteRouteTableInput{RouteTableId: aws.String(id)})
	return err
}

func deleteGateway(ctx context.Context, c *ec2.Client, id string) error {
	g, err := c.DescribeInternetGateways(ctx, &ec2.DescribeInternetGatewaysInput{InternetGatewayIds: []string{id}})
	if err != nil {
		return err
	}
	for _, gw := range g.InternetGateways {
		for _, a := range gw.Attachments {
			if _, err := c.DetachInternetGateway(ctx, &ec2.DetachInternetGatewayInput{InternetGatewayId: aws.String(id), VpcId: a.VpcId}); err != nil {
				return fmt.Errorf("detach from %s: %w", aws.ToString(a.VpcId), err)
			}
		}
	}
	_, err = c.DeleteInternetGateway(ctx, &ec2.DeleteInternetGatewayInput{InternetGatewayId: aws.String(id)})
	return err
}

// notFound reports whether AWS answered that the resource does not exist (InvalidVolume.NotFound,
// InvalidGroup.NotFound, ...).
func notFound(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && strings.HasSuffix(ae.ErrorCode(), "NotFound")
}
