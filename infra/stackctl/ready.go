package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/infra/ready"
	"github.com/rig-dev/rig/infra/spec"
	"github.com/rig-dev/rig/inventory"
	sshtarget "github.com/rig-dev/rig/target/ssh"
)

// readyFlags say how up (and the ready verb) wait for the nodes after pulumi up.
type readyFlags struct {
	keyFiles []string
	timeout  time.Duration
	marker   string
}

func (r *readyFlags) register(c *cobra.Command, keys bool) {
	if keys {
		c.Flags().StringSliceVar(&r.keyFiles, "ssh-key", nil, "SSH private key file(s) to log in with (default: ~/.ssh/id_ed25519, id_ecdsa, id_rsa that exist, and ssh-agent)")
	}
	c.Flags().DurationVar(&r.timeout, "ready-timeout", 10*time.Minute, "wait at most this long for every node to answer ssh with its pinned host key and finish cloud-init (0: do not wait)")
	c.Flags().StringVar(&r.marker, "ready-marker", ready.BootFinished, "the file on each node whose existence means cloud-init has finished")
}

// wait waits for the stack's nodes (infra/ready) with the user's keys; the error says the stack
// is up, which node is not ready and why.
func (r *readyFlags) wait(cmd *cobra.Command, f *flags, name string, inv *inventory.Inventory) error {
	if r.timeout == 0 {
		fmt.Fprintf(cmd.OutOrStdout(), "rig: --ready-timeout 0: not waiting for the nodes; the first ssh may find cloud-init still at work\n")
		return nil
	}
	if r.timeout < 0 {
		return fmt.Errorf("%w: --ready-timeout %s: want a positive duration, or 0 not to wait", errUsage, r.timeout)
	}
	tr, err := sshtarget.Login{KeyFiles: r.keyFiles}.Transport(f.options(cmd).Logger)
	if err != nil {
		return fmt.Errorf("stack %s is up, but its nodes cannot be waited for: --ssh-key: %w (give the private half of rig:publicKey, or --ready-timeout 0 not to wait)", name, err)
	}
	defer tr.Close()
	var pkgs []ready.Package
	for _, p := range spec.NodePackages {
		pkgs = append(pkgs, ready.Package{Name: p.Name, Command: p.Command})
	}
	_, err = ready.Wait(cmd.Context(), inv.Nodes, ready.Options{Transport: tr, Timeout: r.timeout, Marker: r.marker, Packages: pkgs, Out: cmd.OutOrStdout()})
	var nr *ready.NotReadyError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &nr):
		return fmt.Errorf("stack %s is up but not ready: %w; wait again with rig up --stack %s (nothing changes when the config has not), "+
			"or read a node's boot log with aws ec2 get-console-output --instance-id ID", name, err, name)
	}
	return fmt.Errorf("stack %s is up but not ready: %w", name, err)
}
