package awsemu_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/resourcegroupstaggingapi"
	tagtypes "github.com/aws/aws-sdk-go-v2/service/resourcegroupstaggingapi/types"
	"github.com/aws/smithy-go"

	"github.com/rig-dev/rig/infra/awsemu"
	"github.com/rig-dev/rig/infra/cloudgc"
)

// The emulator answers the SDK's own clients: a volume created through EC2 is listed by the
// tagging API (over awsJson1_1, as cloudgc speaks it), a stale ARN is appended to that list, and IAM is enforced for a
// user whose policy lacks an action. When the test ends, the server is gone.
func TestEmulator(t *testing.T) {
	ctx := context.Background()
	var url string
	t.Run("serve", func(t *testing.T) {
		s := awsemu.Start(t, awsemu.Options{Users: map[string][]string{"viewer": {"ec2:Describe*"}}})
		url = s.URL
		cfg := s.Config("us-east-1")
		c := ec2.NewFromConfig(cfg)
		v, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String("us-east-1a"), Size: aws.Int32(8),
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeVolume,
				Tags: []ec2types.Tag{{Key: aws.String("rig-stack"), Value: aws.String("t")}}}}})
		if err == nil {
			t.Fatal("an unknown access key was accepted while IAM is enforced")
		}
		_ = v
		cfg = s.ConfigAs("viewer", "us-east-1")
		c = ec2.NewFromConfig(cfg)
		if _, err := c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{}); err != nil {
			t.Fatalf("allowed action refused: %v", err)
		}
		_, err = c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String("us-east-1a"), Size: aws.Int32(8), DryRun: aws.Bool(true)})
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "AccessDenied" {
			t.Fatalf("CreateVolume without ec2:CreateVolume: %v, want AccessDenied", err)
		}
	})
	t.Run("tagging", func(t *testing.T) {
		s := awsemu.Start(t, awsemu.Options{})
		cfg := s.Config("us-east-1")
		c := ec2.NewFromConfig(cfg)
		v, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String("us-east-1a"), Size: aws.Int32(8),
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeVolume,
				Tags: []ec2types.Tag{{Key: aws.String("rig-stack"), Value: aws.String("t")}}}}})
		if err != nil {
			t.Fatal(err)
		}
		s.AddStaleARN("arn:aws:ec2:us-east-1:"+awsemu.Account+":instance/i-0123456789abcdef0", map[string]string{"rig-stack": "t"})
		tg := resourcegroupstaggingapi.NewFromConfig(cfg, cloudgc.TaggingJSON)
		page, err := tg.GetResources(ctx, &resourcegroupstaggingapi.GetResourcesInput{TagFilters: []tagtypes.TagFilter{{Key: aws.String("rig-stack")}}})
		if err != nil {
			t.Fatal(err)
		}
		var arns []string
		for _, m := range page.ResourceTagMappingList {
			arns = append(arns, aws.ToString(m.ResourceARN))
		}
		got := strings.Join(arns, " ")
		if !strings.Contains(got, "volume/"+aws.ToString(v.VolumeId)) || !strings.Contains(got, "instance/i-0123456789abcdef0") {
			t.Fatalf("tagging API listed %v", arns)
		}
	})
	if resp, err := http.Get(url + "/moto-api/"); err == nil {
		resp.Body.Close()
		t.Fatalf("the emulator still answers after its test ended")
	}
}
