package driver

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
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
