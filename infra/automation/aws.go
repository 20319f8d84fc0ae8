package automation

import (
	"context"
	"errors"
	"fmt"

	"github.com/rig-dev/rig/infra/awsconf"
	"github.com/rig-dev/rig/infra/spec"
)

// Target is the AWS configuration of a stack: its aws:profile and aws:region.
func Target(s spec.Spec) awsconf.Target {
	return awsconf.Target{Profile: s.Profile, Region: s.Region}
}

// CheckAWSCredentials asks the target's chain (the stack's profile, else environment, shared
// config and credentials files, SSO, instance role) for credentials and STS for whose they are,
// so that a missing login is reported before Pulumi creates anything.
func CheckAWSCredentials(ctx context.Context, t awsconf.Target) error {
	if _, _, err := t.Check(ctx); err != nil {
		if errors.Is(err, awsconf.ErrNoCredentials) {
			return fmt.Errorf("%w: %v", ErrNoAWSCredentials, err)
		}
		return err
	}
	return nil
}
