package cloudgc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// Verdicts of Classify.
const (
	Ours       = "ours"              // this backend's stack, its current generation, not expired: kept
	KnownStack = "expired, in state" // expired, and its stack and generation are in this backend: `rig gc` destroys it through Pulumi
	Ghost      = "older generation"  // this backend's stack name and owner, another generation: leaked by an earlier cluster; deleted when expired
	Expired    = "expired"           // past expires-at and no stack in this backend owns it: deleted
	Unknown    = "unknown stack"     // no stack in this backend, not expired: listed, deleted only with Orphans
	Foreign    = "foreign"           // another owner's: never touched
	Retained   = "retained bucket"   // listed with its size, never deleted
	Gone       = "already gone"      // the tagging API lists it, EC2 no longer has it
)

// Stack is what this backend knows of one of its stacks.
type Stack struct {
	Generation string // "" when the stack has none yet (made before generations)
	Owner      string
}

// Known is what gc compares resources against: this backend's stacks, and the owners named
// by this project's stack configs (resources of any other owner are foreign).
type Known struct {
	Stacks map[string]Stack
	Owners map[string]bool
}

// Finding is a resource with what gc makes of it.
type Finding struct {
	Resource
	Verdict string
	Delete  bool
}

// Classify decides for each resource. orphans also deletes resources of unknown stacks and older
// generations that are not expired yet (another machine's live cluster looks exactly like that,
// so it takes a flag). Nothing of a generation this backend's state knows is ever marked, and
// nothing of another owner.
func Classify(rs []Resource, k Known, now time.Time, orphans bool) []Finding {
	var out []Finding
	for _, r := range rs {
		f := Finding{Resource: r}
		expired := !r.ExpiresAt.IsZero() && now.After(r.ExpiresAt)
		st, known := k.Stacks[r.Stack]
		// A resource or a stack without a generation predates generations: same cluster.
		sameGen := !known || st.Generation == "" || r.Generation == "" || st.Generation == r.Generation
		foreign := r.Owner != "" && len(k.Owners) > 0 && !k.Owners[r.Owner]
		if known && st.Owner != "" && r.Owner != "" && r.Owner != st.Owner {
			foreign = true // someone else's stack of the same name
		}
		switch {
		case r.State == StateGone:
			f.Verdict = Gone
		case foreign:
			f.Verdict = Foreign
		case r.Kind == KindBucket:
			f.Verdict = Retained
		case known && sameGen && !expired:
			f.Verdict = Ours
		case known && sameGen:
			f.Verdict = KnownStack
		case known:
			f.Verdict, f.Delete = Ghost, expired || orphans
		case expired:
			f.Verdict, f.Delete = Expired, true
		default:
			f.Verdict, f.Delete = Unknown, orphans
		}
		out = append(out, f)
	}
	return out
}

// Billable says whether the resource costs money while it exists (instances until terminated,
// volumes). Buckets cost too, but are kept on purpose.
func (r Resource) Billable() bool {
	switch r.Kind {
	case KindInstance:
		return r.State != StateGone && r.State != "terminated" && r.State != "shutting-down"
	case KindVolume:
		return r.State != StateGone
	}
	return false
}

// Tally is what Delete did.
type Tally struct {
	Deleted, AlreadyGone, Failed int
	Hourly                       float64 // USD per hour of what was deleted
}

func (t Tally) String() string {
	return fmt.Sprintf("%d deleted ($%.4f/h), %d already gone, %d failed", t.Deleted, t.Hourly, t.AlreadyGone, t.Failed)
}

// ErrBillableLeft means resources gc set out to delete still cost money afterwards.
var ErrBillableLeft = errors.New("billable resources remain")

// Delete removes the findings marked Delete, region by region, in dependency order: instances
// (waiting until they are terminated, which detaches their volumes), volumes, key pairs,
// placement groups, security groups, route tables (after their associations), subnets, internet
// gateways (after detaching), VPCs. A resource that fails is reported and the rest still go; one
// that is already gone is counted as such. The error joins the failures.
func Delete(ctx context.Context, fs []Finding, o Options, out io.Writer) (Tally, error) {
	o.defaults()
	byRegion := map[string][]Resource{}
	var regions []string
	var t Tally
	for _, f := range fs {
		if f.Verdict == Gone {
			t.AlreadyGone++
		}
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
			t.Failed += len(byRegion[region])
			continue
		}
		if err := deleteRegion(ctx, c.EC2, byRegion[region], o, out, &t); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", region, err))
		}
	}
	return t, errors.Join(errs...)
}

// Remaining scans the regions of the findings marked Delete again and returns those of them
// that still cost money; the error wraps ErrBillableLeft when there is any.
func Remaining(ctx context.Context, fs []Finding, o Options) ([]Resource, error) {
	marked := map[string]bool{}
	var regions []string
	for _, f := range fs {
		if f.Delete && f.Billable() {
			if !slices.Contains(regions, f.Region) {
				regions = append(regions, f.Region)
			}
			marked[f.Region+" "+f.ARN] = true
		}
	}
	if len(regions) == 0 {
		return nil, nil
	}
	o.Regions = regions
	rs, err := Scan(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("scan again after deleting: %w", err)
	}
	var left []Resource
	var hourly float64
	for _, r := range rs {
		if marked[r.Region+" "+r.ARN] && r.Billable() {
			left = append(left, r)
			hourly += max(r.Hourly, 0)
		}
	}
	if len(left) > 0 {
		return left, fmt.Errorf("%w: %d resource(s) gc deleted are still there, $%.4f/h", ErrBillableLeft, len(left), hourly)
	}
	return nil, nil
}

func deleteRegion(ctx context.Context, c *ec2.Client, rs []Resource, o Options, out io.Writer, t *Tally) error {
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
			t.AlreadyGone++
			fmt.Fprintf(out, "rig: %s: %s %s was already gone\n", r.Region, r.Kind, r.ID)
			return
		}
		if err != nil {
			t.Failed++
			errs = append(errs, fmt.Errorf("delete %s %s: %w", r.Kind, r.ID, err))
			fmt.Fprintf(out, "rig: %s: could not delete %s %s: %v\n", r.Region, r.Kind, r.ID, err)
			return
		}
		t.Deleted++
		t.Hourly += max(r.Hourly, 0)
		fmt.Fprintf(out, "rig: %s: deleted %s %s (stack %s)\n", r.Region, r.Kind, r.ID, r.Stack)
	}
	if insts := of(KindInstance); len(insts) > 0 {
		ids := make([]string, len(insts))
		for i, r := range insts {
			ids[i] = r.ID
		}
		// A batch fails whole when one id no longer exists; then each instance on its own.
		terminate := func(ids []string) error {
			_, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids})
			return err
		}
		gone, err := describeEach(ids, terminate)
		if err != nil {
			for _, r := range insts {
				done(r, err)
			}
			return errors.Join(errs...)
		}
		var live []string
		for _, id := range ids {
			if !slices.Contains(gone, id) {
				live = append(live, id)
			}
		}
		var waitErr error
		if len(live) > 0 {
			fmt.Fprintf(out, "rig: %s: terminating %d instance(s), waiting until they are gone\n", insts[0].Region, len(live))
			waitErr = waitTerminated(ctx, c, live, o)
		}
		for _, r := range insts {
			switch {
			case slices.Contains(gone, r.ID):
				done(r, &smithy.GenericAPIError{Code: "InvalidInstanceID.NotFound"})
			default:
				done(r, waitErr)
			}
		}
		if waitErr != nil {
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
