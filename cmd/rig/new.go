package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/scaffold"
)

// newNewCmd is `rig new`: starting points for your own engine.
func newNewCmd(drivers *driver.Registry) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "new KIND NAME",
		Short: "Write the starting point of your own engine (aeron-service: a ClusteredService under rig-aeron)",
		Args: func(cmd *cobra.Command, args []string) error {
			return fmt.Errorf("%w: new needs a kind: aeron-service (got %q)", errUsage, strings.Join(args, " "))
		},
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	cmd.AddCommand(newAeronServiceCmd(drivers))
	return cmd
}

func newAeronServiceCmd(drivers *driver.Registry) *cobra.Command {
	o := scaffold.Options{Parent: ".", Drivers: drivers}
	cmd := &cobra.Command{
		Use:   "aeron-service NAME --service CLASS",
		Short: "Write a Maven module that runs your Aeron ClusteredService under rig, with a playbook",
		Long: "Writes the folder NAME (under --dir) with a Maven module against rig-aeron (pom.xml; its parent,\n" +
			"dev.rig:rig-aeron-parent, comes from ~/.m2: mvn -q -B -f examples/aeron-cluster/pom.xml -pl harness -am install),\n" +
			"Main.java (runs CLASS unchanged, built by reflection so a package-private class works), Codec.java\n" +
			"(three TODOs: rig's order as your ingress message, its correlation id, your egress as rig's reply),\n" +
			"playbook.yaml, and rig's start-node.sh and node.properties.tmpl. NAME is one path element (a letter or\n" +
			"digit, then letters, digits, '.', '_' or '-'); an existing NAME folder must be empty. Then:\n" +
			"  cd NAME && mvn -q -B package && rig check --playbook playbook.yaml && rig run playbook.yaml\n" +
			"docs/engines.md, \"Your own Aeron Cluster service\", says what the codec maps and how to port an\n" +
			"older service.",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("%w: new aeron-service takes one NAME (the module's folder), got %d arguments", errUsage, len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			dir, files, err := scaffold.AeronService(o)
			if errors.Is(err, scaffold.ErrInvalid) {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
			if err != nil {
				return fmt.Errorf("new aeron-service %s: %w", o.Name, err)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "wrote %s:\n", dir)
			for _, f := range files {
				fmt.Fprintf(w, "  %s\n", f)
			}
			fmt.Fprintf(w, "next: fill in the three TODOs of Codec.java, then in %s:\n", dir)
			fmt.Fprintf(w, "  mvn -q -B package && rig check --playbook playbook.yaml && rig run playbook.yaml\n")
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Service, "service", "", "your ClusteredService's fully qualified class name (required), e.g. io.aeron.samples.cluster.EchoService")
	cmd.Flags().StringVar(&o.Package, "package", "", "Java package of the generated Main and Codec (default: the service's package + .rig)")
	cmd.Flags().StringVar(&o.Parent, "dir", ".", "folder to write NAME in")
	return cmd
}
