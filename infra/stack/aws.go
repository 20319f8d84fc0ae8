package stack

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/rig-dev/rig/results/archive"
)

// CheckAWSCredentials asks the AWS SDK's default chain (environment, shared config and
// credentials files, SSO, instance role) for credentials, so that a missing login is reported
// before Pulumi creates anything.
func CheckAWSCredentials(ctx context.Context, region string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(region))
	if err != nil {
		return fmt.Errorf("%w (%v)", ErrNoAWSCredentials, err)
	}
	if cfg.Credentials == nil {
		return ErrNoAWSCredentials
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return fmt.Errorf("%w (%v)", ErrNoAWSCredentials, firstLine(err.Error()))
	}
	return nil
}

// DefaultDest opens a local folder, or an S3 prefix with the SDK's default credentials.
func DefaultDest(ctx context.Context, loc archive.Location, region string) (archive.Dest, error) {
	if loc.Dir != "" {
		return archive.Dir{Path: loc.Dir}, nil
	}
	var opts []func(*config.LoadOptions) error
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS config: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1" // S3 redirects to the bucket's region on first use
	}
	return archive.NewS3(s3.NewFromConfig(cfg), loc.Bucket, loc.Prefix), nil
}
