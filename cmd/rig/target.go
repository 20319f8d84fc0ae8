package main

import (
	"fmt"

	"github.com/rig-dev/rig/infra/stack"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/target/local"
	sshtarget "github.com/rig-dev/rig/target/ssh"
)

// targetChoice is what picks the target a plan runs on: a stack, an inventory file, or else the
// local target, with each one's options.
type targetChoice struct {
	Stack     string // --stack (before "@" is expanded)
	Inventory string // --inventory
	Remote    sshtarget.TargetOptions
	Local     local.Options
}

// openTarget is the one place rig run and rig validate get their target from; it returns the
// stack's name as expanded.
func openTarget(c targetChoice) (target.Target, string, error) {
	remote := c.Remote
	switch {
	case c.Stack != "" && c.Inventory != "":
		return nil, "", fmt.Errorf("%w: --stack and --inventory: give one", errUsage)
	case c.Stack != "":
		name, err := expandStack(c.Stack)
		if err != nil {
			return nil, "", err
		}
		if err := inventory.CheckStackName("--stack", name); err != nil {
			return nil, "", fmt.Errorf("%w: %w", errUsage, err)
		}
		remote.Nodes, remote.Stack = stack.NewTarget(stack.TargetOptions{Stack: name}), name
		if remote.SysrqTrigger == "" {
			remote.SysrqTrigger = sshtarget.PowerCutNodes // a stack's nodes are the run's to reboot
		}
		return sshtarget.New(remote), name, nil
	case c.Inventory != "":
		if _, err := inventory.Load(c.Inventory); err != nil {
			return nil, "", fmt.Errorf("%w: --inventory: %v", errUsage, err)
		}
		remote.Nodes = inventory.FileTarget{Path: c.Inventory}
		return sshtarget.New(remote), "", nil
	default:
		if remote.SysrqTrigger != "" || remote.PowerProc != "" {
			return nil, "", fmt.Errorf("%w: --sysrq-trigger and --agent-power-proc are for --stack/--inventory: the local target never reboots this machine", errUsage)
		}
		return local.New(c.Local), "", nil
	}
}
