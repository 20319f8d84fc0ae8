package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/target/reach"
	sshtarget "github.com/rig-dev/rig/target/ssh"
	"github.com/rig-dev/rig/transport"
)

// Verbs for reaching nodes by hand: `rig ssh` runs a command on a node; `rig agent ping|stage`
// reach agents through the transport.

// sshOptions are the flags every verb that reaches nodes shares.
type sshOptions struct {
	inventory      string
	keys           []string
	user           string
	connectTimeout time.Duration
}

// sshKeyFlag is the one flag every verb that logs in over SSH takes for its keys.
func sshKeyFlag(f *pflag.FlagSet, keys *[]string, usage string) {
	f.StringSliceVar(keys, "ssh-key", nil, usage+" (repeatable, or comma-separated)")
}

func (o *sshOptions) register(f *pflag.FlagSet) {
	f.StringVar(&o.inventory, "inventory", "", "inventory JSON of the cluster (required)")
	sshKeyFlag(f, &o.keys, "SSH private key file(s) to log in with (default: ~/.ssh/id_ed25519, id_ecdsa, id_rsa that exist, and ssh-agent)")
	f.StringVar(&o.user, "user", "", "login user for nodes whose inventory entry has none (default: the local user)")
	f.DurationVar(&o.connectTimeout, "connect-timeout", 15*time.Second, "bound on dial plus SSH handshake")
}

// open loads the inventory and the access to its nodes its target gives (target/reach), with
// their rig folders under base.
func (o *sshOptions) open(base string) (*inventory.Inventory, target.Access, error) {
	if o.inventory == "" {
		return nil, nil, fmt.Errorf("%w: --inventory is required", errUsage)
	}
	inv, err := inventory.Load(o.inventory)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	acc, err := reach.Open(inv, reach.Options{
		Login: sshtarget.Login{KeyFiles: o.keys, User: o.user, ConnectTimeout: o.connectTimeout}, Base: base,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return inv, acc, nil
}

func pickNodes(inv *inventory.Inventory, names []string) ([]inventory.Node, error) {
	if len(names) == 0 {
		return inv.Nodes, nil
	}
	var out []inventory.Node
	for _, name := range names {
		n, ok := inv.Node(name)
		if !ok {
			return nil, fmt.Errorf("%w: node %q is not in the inventory (nodes: %s)", errUsage, name, nodeNames(inv))
		}
		out = append(out, n)
	}
	return out, nil
}

func nodeNames(inv *inventory.Inventory) string {
	var names []string
	for _, n := range inv.Nodes {
		names = append(names, n.Name)
	}
	return strings.Join(names, ", ")
}

// sshCmdOptions are rig ssh's flags.
type sshCmdOptions struct {
	sshOptions
	sudo  bool
	dir   string
	stack stackSSHFlags // --stack: OpenSSH to a stack's node (sshstack.go)
}

func newSSHCmd() *cobra.Command {
	var o sshCmdOptions
	cmd := &cobra.Command{
		Use:   "ssh (--inventory FILE NODE -- CMD [ARG...] | --stack NAME NODE [-- CMD [ARG...]])",
		Short: "Run a command on a node over SSH (host key verified against the inventory), or log in to a stack's node",
		Long: `With --inventory: run a command on one node of an inventory and stream its output. The node's
host key must match the inventory's ssh.host_key; a mismatch is refused before anything runs. The
exit status of the command is rig's error (rig exits 1 when the command fails).

With --stack: rig becomes OpenSSH's ssh to the stack's node, a login shell, or CMD with exactly
the words given (each quoted for the remote shell). The node's pinned host key is written to the
stack's known_hosts file (as rig ssh-config does) and ssh is told StrictHostKeyChecking yes with
that file only, so it refuses any other key and asks nothing. The key is --ssh-key, else the
private half of the stack's rig:publicKey when ~/.ssh holds it, else ssh's own choice. The exit
status is ssh's.`,
		Args: func(cmd *cobra.Command, args []string) error {
			min := 2
			if o.stack.name != "" {
				min = 1
			}
			if len(args) < min {
				if min == 1 {
					return fmt.Errorf("%w: want NODE [-- CMD [ARG...]], got %q", errUsage, args)
				}
				return fmt.Errorf("%w: want NODE -- CMD [ARG...], got %q", errUsage, args)
			}
			if d := cmd.ArgsLenAtDash(); d > 1 || d == -1 && min == 1 && len(args) > 1 {
				return fmt.Errorf("%w: one NODE before --, got %q", errUsage, args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.stack.name != "" {
				if o.inventory != "" {
					return fmt.Errorf("%w: --stack and --inventory: give one", errUsage)
				}
				if o.sudo || o.dir != "" {
					return fmt.Errorf("%w: --sudo and --cd are for --inventory; with --stack write them in the command: -- sudo -n CMD, or -- sh -c 'cd DIR && CMD'", errUsage)
				}
				argv, err := o.stackArgv(cmd.Context(), args)
				if err != nil {
					return err
				}
				return execSSH(argv)
			}
			inv, acc, err := o.open("")
			if err != nil {
				return err
			}
			tr := acc.Transport()
			defer tr.Close()
			nodes, err := pickNodes(inv, args[:1])
			if err != nil {
				return err
			}
			// Forward stdin when it is a pipe or a file (`rig ssh n -- sh -c 'cat > f' < f`), not a
			// terminal: there is no pty, and nothing would end the input.
			var stdin io.Reader
			if st, err := os.Stdin.Stat(); err == nil && st.Mode()&os.ModeCharDevice == 0 {
				stdin = cmd.InOrStdin()
			}
			_, err = tr.Exec(cmd.Context(), nodes[0], transport.Cmd{Args: args[1:], Sudo: o.sudo, Dir: o.dir,
				Stdin: stdin, Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()})
			var ee *transport.ExitError
			if errors.As(err, &ee) {
				return fmt.Errorf("%s: %q exited %d", ee.Node, ee.Args, ee.ExitCode)
			}
			return err
		},
	}
	f := cmd.Flags()
	o.register(f)
	f.BoolVar(&o.sudo, "sudo", false, "run the command through sudo -n")
	f.StringVar(&o.dir, "cd", "", "working directory on the node (default: the login home)")
	f.StringVar(&o.stack.name, "stack", "", "log in to (or run CMD on) a node of this stack with OpenSSH, host key pinned (instead of --inventory)")
	o.stack.infra.RegisterLookup(f, "with --stack: ")
	return cmd
}

func newAgentPingCmd() *cobra.Command {
	var o struct {
		sshOptions
		remoteDir string
		nodes     []string
		parallel  int
		json      bool
	}
	cmd := &cobra.Command{
		Use:   "ping --inventory FILE [--node NAME]...",
		Short: "Reach every node's agent through the transport and show its identity and clock",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inv, acc, err := o.open(o.remoteDir)
			if err != nil {
				return err
			}
			tr := acc.Transport()
			defer tr.Close()
			nodes, err := pickNodes(inv, o.nodes)
			if err != nil {
				return err
			}
			type row struct {
				Node    string        `json:"node"`
				PID     int           `json:"pid"`
				Version string        `json:"version"`
				RTT     time.Duration `json:"rtt_ns"`
				Offset  time.Duration `json:"clock_offset_ns"` // node clock minus ours, at mid-RTT
				Error   string        `json:"error,omitempty"`
			}
			rows := make([]row, len(nodes))
			err = sshtarget.Parallel(cmd.Context(), nodes, o.parallel, func(ctx context.Context, i int, n inventory.Node) error {
				rows[i].Node = n.Name
				ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				sock, err := acc.AgentSocket(ctx, n)
				if err != nil {
					rows[i].Error = err.Error()
					return fmt.Errorf("ping %s: %w", n.Name, err)
				}
				c := target.AgentClient(tr, n, sock, "")
				defer c.Close()
				sent := time.Now()
				pr, err := c.Ping(ctx)
				if err != nil {
					rows[i].Error = err.Error()
					return fmt.Errorf("ping %s: %w", n.Name, err)
				}
				rtt := time.Since(sent)
				rows[i].PID, rows[i].Version, rows[i].RTT = pr.PID, pr.Version, rtt
				rows[i].Offset = pr.Now.Sub(sent.Add(rtt / 2))
				return nil
			})
			if o.json {
				if err := writeJSON(cmd.OutOrStdout(), rows); err != nil {
					return err
				}
			} else {
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NODE\tPID\tVERSION\tRTT\tCLOCK OFFSET\tERROR")
				for _, r := range rows {
					fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", r.Node, r.PID, r.Version, r.RTT.Round(time.Microsecond), r.Offset.Round(time.Microsecond), r.Error)
				}
				tw.Flush()
			}
			return err
		},
	}
	f := cmd.Flags()
	o.register(f)
	f.StringVar(&o.remoteDir, "remote-dir", "", "the folder on the nodes that holds rig-NODE, as given to rig agent stage (default: the login home)")
	f.StringArrayVar(&o.nodes, "node", nil, "ping only this node (repeatable; default: all)")
	f.IntVar(&o.parallel, "parallel", 16, "nodes reached at once")
	f.BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

func newAgentStageCmd() *cobra.Command {
	var o struct {
		sshOptions
		nodes     []string
		remoteDir string
		sudo      bool
		binaries  []string
		parallel  int
	}
	cmd := &cobra.Command{
		Use:   "stage --inventory FILE [--sudo] [--node NAME]...",
		Short: "Upload this rig to every node (if its hash differs) and start `rig agent` there",
		Long: `Upload the rig binary to REMOTE-DIR/rig-NODE/bin/rig on every node whose copy has a different
SHA-256, and start ` + "`rig agent`" + ` detached (it outlives the SSH session), unless an agent running
this very binary answers already. Nodes are staged in parallel. A node of another architecture
gets the binary given with --binary ARCH=PATH, or a cross build when rig runs inside its source
tree.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bins := map[string]string{}
			for _, b := range o.binaries {
				arch, p, ok := strings.Cut(b, "=")
				if !ok || (arch != "amd64" && arch != "arm64") || p == "" {
					return fmt.Errorf("%w: --binary %q: want amd64=PATH or arm64=PATH", errUsage, b)
				}
				if _, err := os.Stat(p); err != nil {
					return fmt.Errorf("%w: --binary %s: %v", errUsage, b, err)
				}
				bins[arch] = p
			}
			inv, acc, err := o.open(o.remoteDir)
			if err != nil {
				return err
			}
			defer acc.Transport().Close()
			stager, ok := acc.(target.Stager)
			if !ok {
				return fmt.Errorf("%w: the %s target starts its agents itself (rig run); stage is for remote nodes", errUsage, inv.Target)
			}
			nodes, err := pickNodes(inv, o.nodes)
			if err != nil {
				return err
			}
			wd, _ := os.Getwd()
			res, err := stager.Stage(cmd.Context(), nodes, target.StageOptions{Binaries: bins, SourceDir: sshtarget.FindSource(wd),
				Sudo: o.sudo, Parallel: o.parallel})
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NODE\tARCH\tUPLOADED\tSTARTED\tPID\tSHA256")
			for _, r := range res {
				if r.Node == "" {
					continue
				}
				short := r.SHA256
				if len(short) > 12 {
					short = short[:12]
				}
				fmt.Fprintf(tw, "%s\t%s\t%v\t%v\t%d\t%s\n", r.Node, r.Arch, r.Uploaded, r.Started, r.PID, short)
			}
			tw.Flush()
			return err
		},
	}
	f := cmd.Flags()
	o.register(f)
	f.StringArrayVar(&o.nodes, "node", nil, "stage only this node (repeatable; default: all)")
	f.StringVar(&o.remoteDir, "remote-dir", "", "folder on the node that holds rig-NODE, as rig run --remote-dir (default: the login home)")
	f.BoolVar(&o.sudo, "sudo", false, "run the agent as root through sudo -n (needed for tuning as a non-root user)")
	f.StringArrayVar(&o.binaries, "binary", nil, "linux binary for nodes of an architecture, ARCH=PATH (repeatable)")
	f.IntVar(&o.parallel, "parallel", 8, "nodes staged at once")
	return cmd
}
