// Package awsconf resolves the one AWS configuration a stack is deployed with: the profile and
// region its Pulumi.<stack>.yaml names (aws:profile, aws:region), through the AWS SDK's shared
// config and credential chain. Pulumi (AWS_PROFILE in its environment), the driver's credential
// check, preflight, cloud-side gc and the S3 archive all take their aws.Config from here, so that
// gc cannot scan another account than the one the stack was deployed to.
package awsconf

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// ErrNoCredentials means the chain found no usable credentials for the target.
var ErrNoCredentials = errors.New("no AWS credentials")

// Target is an account (by profile) and a region. An empty Profile means the SDK's default
// chain: AWS_PROFILE, AWS_ACCESS_KEY_ID…, the default profile, SSO, an instance role.
type Target struct {
	Profile string // aws:profile of the stack config
	Region  string // aws:region
}

func (t Target) String() string {
	p := t.Profile
	if p == "" {
		p = "default chain"
	} else {
		p = "profile " + p
	}
	if t.Region == "" {
		return p
	}
	return p + ", " + t.Region
}

// Load resolves the SDK configuration of the target. extra options come after the target's
// (tests point the endpoint at an emulator through AWS_ENDPOINT_URL instead).
func (t Target) Load(ctx context.Context, extra ...func(*config.LoadOptions) error) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if t.Region != "" {
		opts = append(opts, config.WithRegion(t.Region))
	}
	if t.Profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(t.Profile))
	}
	cfg, err := config.LoadDefaultConfig(ctx, append(opts, extra...)...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("AWS config (%s): %w", t, err)
	}
	return cfg, nil
}

// Env is what the pulumi CLI needs to deploy with the same configuration: the AWS provider
// reads aws:profile from the stack config itself, and AWS_PROFILE makes everything else the
// CLI starts (and a stale AWS_PROFILE in the user's shell) agree with it.
func (t Target) Env() map[string]string {
	if t.Profile == "" {
		return nil
	}
	return map[string]string{"AWS_PROFILE": t.Profile}
}

// Identity is who the credentials are.
type Identity struct {
	Account string
	ARN     string
}

// Check loads the target, retrieves its credentials and asks STS who they are
// (sts:GetCallerIdentity needs no permission), within 15 s.
func (t Target) Check(ctx context.Context) (aws.Config, Identity, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cfg, err := t.Load(ctx)
	if err != nil {
		return aws.Config{}, Identity{}, fmt.Errorf("%w (%s): %v", ErrNoCredentials, t, err)
	}
	if cfg.Credentials == nil {
		return aws.Config{}, Identity{}, fmt.Errorf("%w (%s)", ErrNoCredentials, t)
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return aws.Config{}, Identity{}, fmt.Errorf("%w (%s): %v", ErrNoCredentials, t, firstLine(err.Error()))
	}
	out, err := sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return aws.Config{}, Identity{}, fmt.Errorf("%w (%s): sts:GetCallerIdentity: %v", ErrNoCredentials, t, firstLine(err.Error()))
	}
	return cfg, Identity{Account: aws.ToString(out.Account), ARN: aws.ToString(out.Arn)}, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
