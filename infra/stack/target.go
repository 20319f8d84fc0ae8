package stack

import (
	"context"
	"fmt"

	"github.com/rig-dev/rig/infra/spec"
	"github.com/rig-dev/rig/inventory"
)

// TargetOptions name the stack whose outputs are the inventory. Only Stack is required.
type TargetOptions struct {
	Stack      string
	ProjectDir string            // holds Pulumi.yaml; "" means the working folder
	StateDir   string            // rig's local backend; "" means the default (see ChooseBackend)
	Env        map[string]string // extra environment for the pulumi CLI
	Pulumi     string            // path of the pulumi CLI; "" means the one on PATH
}

// Target reads the inventory from a deployed stack's outputs with `pulumi stack output`. It
// implements inventory.Target.
type Target struct{ o TargetOptions }

// NewTarget returns the Pulumi stack target. It checks nothing and touches nothing until
// Inventory is called.
func NewTarget(o TargetOptions) inventory.Target {
	if o.ProjectDir == "" {
		o.ProjectDir = "."
	}
	return &Target{o: o}
}

// Name is "aws": the value the runner records as the manifest's "target".
func (t *Target) Name() string { return "aws" }

// Stack is the stack name the runner records as the manifest's "stack".
func (t *Target) Stack() string { return t.o.Stack }

// Inventory returns the stack's inventory (docs/architecture.md, "Inventory"), with every node's
// pinned host key.
func (t *Target) Inventory(ctx context.Context) (*inventory.Inventory, error) {
	if t.o.Stack == "" {
		return nil, fmt.Errorf("pulumi target: no stack name")
	}
	if err := inventory.CheckStackName("stack name", t.o.Stack); err != nil {
		return nil, fmt.Errorf("pulumi target: %w", err) // before pulumi sees it
	}
	pulumi := t.o.Pulumi
	if pulumi == "" {
		p, err := FindPulumi()
		if err != nil {
			return nil, err
		}
		pulumi = p
	}
	b, err := ChooseBackend(t.o.StateDir, t.o.Env)
	if err != nil {
		return nil, err
	}
	if !b.Exists() {
		return nil, fmt.Errorf("%w: %s (no stacks yet in %s; rig up --stack %s)", ErrNoStack, t.o.Stack, b, t.o.Stack)
	}
	outs, err := outputsCommand(ctx, pulumi, t.o.ProjectDir, t.o.Stack, b)
	if err != nil {
		return nil, err
	}
	return DecodeInventory(t.o.Stack, outs[spec.OutputInventory])
}
