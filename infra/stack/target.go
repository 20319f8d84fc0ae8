package stack

import (
	"context"
	"fmt"

	"github.com/rig-dev/rig/infra/inventory"
)

// TargetOptions name the stack whose outputs are the inventory.
type TargetOptions struct {
	Stack   string
	Options Options // how to reach the CLI and backend; zero value: defaults
}

// Target reads the inventory from a deployed stack's outputs. It implements inventory.Target.
type Target struct {
	stack string
	opts  Options
}

// NewTarget returns the Pulumi stack target. Finding the CLI is deferred to Inventory, so that
// constructing a target never fails and never touches anything.
func NewTarget(o TargetOptions) inventory.Target {
	return &Target{stack: o.Stack, opts: o.Options}
}

// Name is "aws": the value the runner records as the manifest's "target".
func (t *Target) Name() string { return "aws" }

// Stack is the stack name the runner records as the manifest's "stack".
func (t *Target) Stack() string { return t.stack }

// Inventory returns the stack's inventory (DESIGN 4.1), with every node's pinned host key.
func (t *Target) Inventory(ctx context.Context) (*inventory.Inventory, error) {
	if t.stack == "" {
		return nil, fmt.Errorf("pulumi target: no stack name")
	}
	d, err := New(t.opts)
	if err != nil {
		return nil, err
	}
	return d.Inventory(ctx, t.stack)
}
