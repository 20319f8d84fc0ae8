// Package preflight asks AWS, before `rig up` creates anything, whether the stack can be made:
// the vCPU quota for on-demand standard instances (Service Quotas), the instance types offered
// in each availability zone the stack uses (DescribeInstanceTypeOfferings), the AMI resolvable (the
// public SSM parameter, or the explicit image), and the IAM actions the deployment needs,
// where an EC2 dry run can tell (DryRun: DryRunOperation means allowed). Every problem is
// reported at once, each naming what is wrong and how to fix it. Nothing is created.
package preflight

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go"

	"github.com/rig-dev/rig/infra/spec"
)

// The Service Quotas code of "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z)
// instances", counted in vCPUs; c6in and c7i are standard instances.
const (
	QuotaService = "ec2"
	QuotaCode    = "L-1216C47A"
)

// standard reports whether the quota covers the type: families A, C, D, H, I, M, R, T and Z,
// but not Inf, Trn, DL and Hpc, which have quotas of their own.
func standard(t string) bool {
	t = strings.ToLower(t)
	for _, other := range []string{"inf", "trn", "dl", "hpc"} {
		if strings.HasPrefix(t, other) {
			return false
		}
	}
	return t != "" && strings.ContainsRune("acdhimrtz", rune(t[0]))
}

// ErrFailed marks a preflight with at least one error-level problem: rig up creates nothing.
var ErrFailed = errors.New("preflight failed; nothing was created")

// Problem is one thing AWS says stands in the way.
type Problem struct {
	Check   string // "quota", "zone", "ami", "permission"
	What    string
	Fix     string
	Warning bool // could not be checked; printed, does not stop the up
}

func (p Problem) String() string {
	sev := "error"
	if p.Warning {
		sev = "warning"
	}
	s := fmt.Sprintf("%s: preflight %s: %s", sev, p.Check, p.What)
	if p.Fix != "" {
		s += "; fix: " + p.Fix
	}
	return s
}

// Problems is every problem found.
type Problems []Problem

// Err returns nil without error-level problems, else an error wrapping ErrFailed listing them.
func (ps Problems) Err() error {
	var lines []string
	for _, p := range ps {
		if !p.Warning {
			lines = append(lines, p.String())
		}
	}
	if len(lines) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d problem(s):\n  %s", ErrFailed, len(lines), strings.Join(lines, "\n  "))
}

// Warnings are the problems that do not stop the up.
func (ps Problems) Warnings() Problems {
	var out Problems
	for _, p := range ps {
		if p.Warning {
			out = append(out, p)
		}
	}
	return out
}

// Clients are the AWS API clients preflight asks.
type Clients struct {
	EC2    *ec2.Client
	SSM    *ssm.Client
	Quotas *servicequotas.Client
}

// NewClients builds the clients of a region from the AWS SDK's default chain.
func NewClients(ctx context.Context, region string) (Clients, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(region))
	if err != nil {
		return Clients{}, fmt.Errorf("AWS config for %s: %w", region, err)
	}
	return ClientsFromConfig(cfg), nil
}

// ClientsFromConfig builds the clients from an SDK configuration.
func ClientsFromConfig(cfg aws.Config) Clients {
	return Clients{EC2: ec2.NewFromConfig(cfg), SSM: ssm.NewFromConfig(cfg), Quotas: servicequotas.NewFromConfig(cfg)}
}

// Check runs every check against s (a validated spec) and returns every problem.
func Check(ctx context.Context, s spec.Spec, c Clients) Problems {
	var ps Problems
	ps = append(ps, zone(ctx, s, c)...)
	ps = append(ps, quota(ctx, s, c)...)
	ami, amiProbs := resolveAMI(ctx, s, c)
	ps = append(ps, amiProbs...)
	ps = append(ps, permissions(ctx, s, c, ami)...)
	return ps
}

// types lists the instance types of the spec, each once.
func types(s spec.Spec) []string {
	var out []string
	for _, n := range s.Nodes() {
		if !slices.Contains(out, n.InstanceType) {
			out = append(out, n.InstanceType)
		}
	}
	return out
}

// zone checks every AZ of the stack (one, or multi-az's three) exists and offers the instance
// types of the nodes placed in it.
func zone(ctx context.Context, s spec.Spec, c Clients) Problems {
	azs, err := c.EC2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	if err != nil {
		return Problems{apiProblem("zone", "ec2:DescribeAvailabilityZones", err)}
	}
	var names []string
	for _, z := range azs.AvailabilityZones {
		names = append(names, aws.ToString(z.ZoneName))
	}
	sort.Strings(names)
	zones := s.Zones()
	// fix says how to move the stack's i-th AZ to another.
	fix := func(i int, to string) string {
		if s.MultiAZ() {
			return fmt.Sprintf("pulumi config set --stack %s --path 'rig:availabilityZones[%d]' %s", s.Stack, i, to)
		}
		return fmt.Sprintf("pulumi config set --stack %s rig:availabilityZone %s", s.Stack, to)
	}
	// other is a zone of candidates the stack does not use yet.
	other := func(candidates []string) string {
		for _, z := range candidates {
			if !slices.Contains(zones, z) {
				return z
			}
		}
		return first(candidates)
	}
	var ps Problems
	for i, z := range zones {
		if !slices.Contains(names, z) {
			ps = append(ps, Problem{Check: "zone", What: fmt.Sprintf("%s is not an availability zone of %s (%s)", z, s.Region, strings.Join(names, ", ")),
				Fix: fix(i, other(names))})
		}
	}
	if len(ps) > 0 {
		return ps
	}
	offered := map[string]map[string]bool{} // type -> zones
	p := ec2.NewDescribeInstanceTypeOfferingsPaginator(c.EC2, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone,
		Filters:      []ec2types.Filter{{Name: aws.String("instance-type"), Values: types(s)}},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return Problems{apiProblem("zone", "ec2:DescribeInstanceTypeOfferings", err)}
		}
		for _, o := range page.InstanceTypeOfferings {
			t := string(o.InstanceType)
			if offered[t] == nil {
				offered[t] = map[string]bool{}
			}
			offered[t][aws.ToString(o.Location)] = true
		}
	}
	var all []string // zones offering every type
	for _, z := range names {
		ok := true
		for _, t := range types(s) {
			ok = ok && offered[t][z]
		}
		if ok {
			all = append(all, z)
		}
	}
	for i, z := range zones {
		var need []string // the types of the nodes in z
		for _, n := range s.Nodes() {
			if n.Zone == z && !slices.Contains(need, n.InstanceType) {
				need = append(need, n.InstanceType)
			}
		}
		for _, t := range need {
			if offered[t][z] {
				continue
			}
			pr := Problem{Check: "zone", What: fmt.Sprintf("%s is not offered in %s", t, z)}
			switch to := other(all); {
			case len(all) >= len(zones):
				pr.Fix = fmt.Sprintf("%s (every type of the stack is offered in %s)", fix(i, to), strings.Join(all, ", "))
			case s.MultiAZ():
				pr.Fix = fmt.Sprintf("fewer than %d zones of %s offer all of %s (%s): choose other instance types, another region or placement single-az",
					len(zones), s.Region, strings.Join(types(s), ", "), strings.Join(all, ", "))
			default:
				pr.Fix = fmt.Sprintf("no zone of %s offers all of %s: choose other instance types or another region", s.Region, strings.Join(types(s), ", "))
			}
			ps = append(ps, pr)
		}
	}
	return ps
}

// quota compares the vCPUs the stack adds with the quota left: the applied quota minus the
// vCPUs of the standard instances already running or pending in the region, except the
// stack's own current generation (an up of a standing stack replaces nothing).
func quota(ctx context.Context, s spec.Spec, c Clients) Problems {
	need := 0
	for _, n := range s.Nodes() {
		it, ok := spec.LookupInstance(n.InstanceType)
		if !ok {
			return Problems{{Check: "quota", Warning: true, What: fmt.Sprintf("vCPUs of %s unknown to infra/spec; quota not checked", n.InstanceType)}}
		}
		need += it.VCPUs
	}
	q, err := c.Quotas.GetServiceQuota(ctx, &servicequotas.GetServiceQuotaInput{ServiceCode: aws.String(QuotaService), QuotaCode: aws.String(QuotaCode)})
	if err != nil {
		pr := apiProblem("quota", "servicequotas:GetServiceQuota", err)
		// Not knowing the quota stops nothing: EC2 still refuses what exceeds it.
		pr.Warning = true
		pr.What = fmt.Sprintf("the vCPU quota (%s %s) could not be read, so the %d vCPUs the stack needs are not checked: %s",
			QuotaService, QuotaCode, need, pr.What)
		return Problems{pr}
	}
	limit := int(aws.ToFloat64(q.Quota.Value))
	used := 0
	p := ec2.NewDescribeInstancesPaginator(c.EC2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}}}})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return Problems{apiProblem("quota", "ec2:DescribeInstances", err)}
		}
		for _, r := range page.Reservations {
			for _, in := range r.Instances {
				if !standard(string(in.InstanceType)) || in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot || ours(s, in.Tags) {
					continue
				}
				used += vcpus(in)
			}
		}
	}
	if need <= limit-used {
		return nil
	}
	want := used + need
	return Problems{{Check: "quota", What: fmt.Sprintf("the stack needs %d vCPUs of on-demand standard instances in %s; the quota is %d and %d are in use",
		need, s.Region, limit, used),
		Fix: fmt.Sprintf("aws service-quotas request-service-quota-increase --region %s --service-code %s --quota-code %s --desired-value %d "+
			"(or https://console.aws.amazon.com/servicequotas/home/services/ec2/quotas/%s), or fewer or smaller instances",
			s.Region, QuotaService, QuotaCode, want, QuotaCode)}}
}

func ours(s spec.Spec, tags []ec2types.Tag) bool {
	var stack, gen string
	for _, t := range tags {
		switch aws.ToString(t.Key) {
		case spec.TagStack:
			stack = aws.ToString(t.Value)
		case spec.TagGeneration:
			gen = aws.ToString(t.Value)
		}
	}
	return stack == s.Stack && s.Generation != "" && gen == s.Generation
}

func vcpus(in ec2types.Instance) int {
	if o := in.CpuOptions; o != nil && o.CoreCount != nil {
		return int(aws.ToInt32(o.CoreCount) * max(aws.ToInt32(o.ThreadsPerCore), 1))
	}
	if it, ok := spec.LookupInstance(string(in.InstanceType)); ok {
		return it.VCPUs
	}
	return 0
}

// resolveAMI returns the image the instances would boot, or "" when it cannot be resolved.
func resolveAMI(ctx context.Context, s spec.Spec, c Clients) (string, Problems) {
	if s.AMI != "" {
		out, err := c.EC2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{s.AMI}})
		switch {
		case err != nil && !isCode(err, "InvalidAMIID.NotFound", "InvalidAMIID.Malformed", "InvalidAMIID.Unavailable"):
			return "", Problems{apiProblem("ami", "ec2:DescribeImages", err)}
		case err != nil || len(out.Images) == 0:
			return "", Problems{{Check: "ami", What: fmt.Sprintf("rig:ami %s does not exist in %s or is not shared with this account", s.AMI, s.Region),
				Fix: fmt.Sprintf("an x86_64 image id of %s, or pulumi config rm --stack %s rig:ami to use rig:amiFamily", s.Region, s.Stack)}}
		case out.Images[0].Architecture != ec2types.ArchitectureValuesX8664:
			return "", Problems{{Check: "ami", What: fmt.Sprintf("rig:ami %s is %s; c6in and c7i need x86_64", s.AMI, out.Images[0].Architecture),
				Fix: "an x86_64 image"}}
		}
		return s.AMI, nil
	}
	param, ok := spec.AMIParameters[s.AMIFamily]
	if !ok {
		return "", nil // spec.Validate reports it
	}
	out, err := c.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(param)})
	switch {
	case isCode(err, "ParameterNotFound"):
		return "", Problems{{Check: "ami", What: fmt.Sprintf("the SSM parameter %s of rig:amiFamily %s does not exist in %s", param, s.AMIFamily, s.Region),
			Fix: fmt.Sprintf("another rig:amiFamily, or an image id: pulumi config set --stack %s rig:ami ami-…", s.Stack)}}
	case err != nil:
		return "", Problems{apiProblem("ami", "ssm:GetParameter", err)}
	}
	v := aws.ToString(out.Parameter.Value)
	if !strings.HasPrefix(v, "ami-") {
		return "", Problems{{Check: "ami", What: fmt.Sprintf("the SSM parameter %s holds %q, not an image id", param, v),
			Fix: fmt.Sprintf("pulumi config set --stack %s rig:ami ami-…", s.Stack)}}
	}
	return v, nil
}

// permissions dry-runs the EC2 calls the deployment makes, with the tags it puts on (tagging on
// create needs ec2:CreateTags too). DryRunOperation means the call would have been allowed.
func permissions(ctx context.Context, s spec.Spec, c Clients, ami string) Problems {
	tags := func(rt ec2types.ResourceType) []ec2types.TagSpecification {
		var ts []ec2types.Tag
		for k, v := range s.Tags() {
			ts = append(ts, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		sort.Slice(ts, func(i, j int) bool { return *ts[i].Key < *ts[j].Key })
		return []ec2types.TagSpecification{{ResourceType: rt, Tags: ts}}
	}
	if ami == "" {
		ami = "ami-00000000000000000" // permission is checked before the image
	}
	type call struct {
		action string
		run    func() error
	}
	calls := []call{
		{"ec2:RunInstances", func() error {
			_, err := c.EC2.RunInstances(ctx, &ec2.RunInstancesInput{DryRun: aws.Bool(true), ImageId: aws.String(ami),
				InstanceType: ec2types.InstanceType(s.ServerInstanceType), MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
				Placement: &ec2types.Placement{AvailabilityZone: aws.String(s.AvailabilityZone)}, TagSpecifications: tags(ec2types.ResourceTypeInstance)})
			return err
		}},
		{"ec2:CreateVolume", func() error {
			v := s.Volumes()[0] // the permission is the same for every volume
			in := &ec2.CreateVolumeInput{DryRun: aws.Bool(true), AvailabilityZone: aws.String(s.AvailabilityZone),
				Size: aws.Int32(int32(v.Size)), VolumeType: ec2types.VolumeType(v.Type), Iops: aws.Int32(int32(v.IOPS)),
				Encrypted: aws.Bool(true), TagSpecifications: tags(ec2types.ResourceTypeVolume)}
			if v.Type == spec.VolumeGP3 {
				in.Throughput = aws.Int32(int32(v.Throughput))
			}
			_, err := c.EC2.CreateVolume(ctx, in)
			return err
		}},
		{"ec2:ImportKeyPair", func() error {
			_, err := c.EC2.ImportKeyPair(ctx, &ec2.ImportKeyPairInput{DryRun: aws.Bool(true), KeyName: aws.String("rig-preflight"),
				PublicKeyMaterial: []byte(s.PublicKey), TagSpecifications: tags(ec2types.ResourceTypeKeyPair)})
			return err
		}},
	}
	if st := s.GroupStrategy(); st != spec.StrategyNone {
		calls = append(calls, call{"ec2:CreatePlacementGroup", func() error {
			_, err := c.EC2.CreatePlacementGroup(ctx, &ec2.CreatePlacementGroupInput{DryRun: aws.Bool(true), GroupName: aws.String("rig-preflight"),
				Strategy: ec2types.PlacementStrategy(st), TagSpecifications: tags(ec2types.ResourceTypePlacementGroup)})
			return err
		}})
	}
	if s.VPCID == "" {
		calls = append(calls, call{"ec2:CreateVpc", func() error {
			_, err := c.EC2.CreateVpc(ctx, &ec2.CreateVpcInput{DryRun: aws.Bool(true), CidrBlock: aws.String(spec.VPCCIDR),
				TagSpecifications: tags(ec2types.ResourceTypeVpc)})
			return err
		}})
	}
	var ps Problems
	for _, cl := range calls {
		err := cl.run()
		switch {
		case isCode(err, "DryRunOperation"):
		case err == nil:
			// Never without DryRun honoured; say so rather than pass silently.
			ps = append(ps, Problem{Check: "permission", Warning: true, What: cl.action + " dry run answered success instead of DryRunOperation"})
		case denied(err):
			ps = append(ps, Problem{Check: "permission", What: fmt.Sprintf("%s (with ec2:CreateTags on create) is denied: %s", cl.action, apiMessage(err)),
				Fix: "allow " + cl.action + " and ec2:CreateTags in the IAM policy of the identity rig runs as (docs/infra.md lists every action)"})
		default:
			ps = append(ps, Problem{Check: "permission", Warning: true, What: fmt.Sprintf("%s dry run could not tell: %s", cl.action, apiMessage(err))})
		}
	}
	return ps
}

// apiProblem turns a failed read into a problem: a denial names the IAM action to allow.
func apiProblem(check, action string, err error) Problem {
	if denied(err) {
		return Problem{Check: check, What: fmt.Sprintf("%s is denied: %s", action, apiMessage(err)),
			Fix: "allow " + action + " in the IAM policy of the identity rig runs as"}
	}
	return Problem{Check: check, What: fmt.Sprintf("%s failed: %s", action, apiMessage(err))}
}

// denied reports an authorisation failure: EC2 answers UnauthorizedOperation, most other
// services (and moto, for every service) AccessDenied or AccessDeniedException.
func denied(err error) bool {
	return isCode(err, "UnauthorizedOperation", "AccessDenied", "AccessDeniedException")
}

func isCode(err error, codes ...string) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && slices.Contains(codes, ae.ErrorCode())
}

func apiMessage(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		msg := ae.ErrorMessage()
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		return ae.ErrorCode() + ": " + msg
	}
	return err.Error()
}

func first(s []string) string {
	if len(s) == 0 {
		return "?"
	}
	return s[0]
}
