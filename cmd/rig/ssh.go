package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rig-dev/rig/agent"
	"github.com/rig-dev/rig/agent/tune"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/target"
	sshtarget "github.com/rig-dev/rig/target/ssh"
	"github.com/rig-dev/rig/transport"
	localtr "github.com/rig-dev/rig/transport/local"
	"github.com/rig-dev/rig/transport/sshx"
)

// Verbs for reaching nodes by hand: `rig ssh` runs a command on a node; `rig agent ping|stage`
// reach agents through the transport; `rig agent tune|revert` apply and undo a tuning profile
// on this machine (or a fake /proc and /sys tree under --root).

// sshOptions are the flags every verb that reaches nodes shares.
type sshOptions struct {
	inventory      string
	identities     []string
	user           string
	connectTimeout time.Duration
}

func (o *sshOptions) register(f *pflag.FlagSet) {
	f.StringVar(&o.inventory, "inventory", "", "inventory JSON of the cluster (required)")
	f.StringArrayVarP(&o.identities, "identity", "i", nil, "private key file to log in with (repeatable; default: ~/.ssh/id_ed25519, id_ecdsa, id_rsa that exist, and ssh-agent)")
	f.StringVar(&o.user, "user", "", "login user for nodes whose inventory entry has none (default: the local user)")
	f.DurationVar(&o.connectTimeout, "connect-timeout", 15*time.Second, "bound on dial plus SSH handshake")
}

// open loads the inventory and the transport it needs: SSH for remote targets, this machine for
// the local target.
func (o *sshOptions) open() (*inventory.Inventory, transport.Transport, error) {
	if o.inventory == "" {
		return nil, nil, fmt.Errorf("%w: --inventory is required", errUsage)
	}
	inv, err := inventory.Load(o.inventory)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if inv.Target == "local" {
		return inv, localtr.New(), nil
	}
	if o.connectTimeout <= 0 {
		return nil, nil, fmt.Errorf("%w: --connect-timeout %s: want a positive duration", errUsage, o.connectTimeout)
	}
	opts := sshx.Options{User: o.user, ConnectTimeout: o.connectTimeout, UseAgent: true}
	for _, id := range o.identities {
		s, err := sshx.LoadKey(id)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: --identity: %v", errUsage, err)
		}
		opts.Signers = append(opts.Signers, s)
	}
	if len(o.identities) == 0 {
		home, _ := os.UserHomeDir()
		for _, name := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			if s, err := sshx.LoadKey(filepath.Join(home, ".ssh", name)); err == nil {
				opts.Signers = append(opts.Signers, s) // unreadable or encrypted defaults: ssh-agent may have them
			}
		}
	}
	tr, err := sshx.New(opts)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return inv, tr, nil
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

var sshFlags struct {
	sshOptions
	sudo bool
	dir  string
}

var sshCmd = &cobra.Command{
	Use:   "ssh --inventory FILE NODE -- CMD [ARG...]",
	Short: "Run a command on a node over SSH (host key verified against the inventory)",
	Long: `Run a command on one node of an inventory and stream its output. The node's host key must
match the inventory's ssh.host_key; a mismatch is refused before anything runs. The exit status
of the command is rig's error (rig exits 1 when the command fails).`,
	Args: func(cmd *cobra.Command, args []string) error {
		if len(args) < 2 {
			return fmt.Errorf("%w: want NODE -- CMD [ARG...], got %q", errUsage, args)
		}
		if d := cmd.ArgsLenAtDash(); d > 1 {
			return fmt.Errorf("%w: one NODE before --, got %q", errUsage, args[:d])
		}
		return nil
	},
	RunE: func(cmd *cobra.Command, args []string) error {
		inv, tr, err := sshFlags.open()
		if err != nil {
			return err
		}
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
		_, err = tr.Exec(cmd.Context(), nodes[0], transport.Cmd{Args: args[1:], Sudo: sshFlags.sudo, Dir: sshFlags.dir,
			Stdin: stdin, Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()})
		var ee *transport.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("%s: %q exited %d", ee.Node, ee.Args, ee.ExitCode)
		}
		return err
	},
}

var pingFlags struct {
	sshOptions
	remoteDir string
	nodes     []string
	parallel  int
	json      bool
}

var agentPingCmd = &cobra.Command{
	Use:   "ping --inventory FILE [--node NAME]...",
	Short: "Reach every node's agent through the transport and show its identity and clock",
	Args:  cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		o := pingFlags
		inv, tr, err := o.open()
		if err != nil {
			return err
		}
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
			sock := agent.SocketPath(n.Dir) // local target: in the node folder
			if inv.Target != "local" {
				if sock, err = sshtarget.Socket(ctx, tr, n, sshtarget.Options{Base: o.remoteDir}); err != nil {
					rows[i].Error = err.Error()
					return fmt.Errorf("ping %s: %w", n.Name, err)
				}
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
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			enc.Encode(rows)
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

var stageFlags struct {
	sshOptions
	nodes     []string
	remoteDir string
	sudo      bool
	binaries  []string
	parallel  int
}

var agentStageCmd = &cobra.Command{
	Use:   "stage --inventory FILE [--sudo] [--node NAME]...",
	Short: "Upload this rig to every node (if its hash differs) and start `rig agent` there",
	Long: `Upload the rig binary to REMOTE-DIR/rig-NODE/bin/rig on every node whose copy has a different
SHA-256, and start ` + "`rig agent`" + ` detached (it outlives the SSH session), unless an agent running
this very binary answers already. Nodes are staged in parallel. A node of another architecture
gets the binary given with --binary ARCH=PATH, or a cross build when rig runs inside its source
tree.`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		o := stageFlags
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
		inv, tr, err := o.open()
		if err != nil {
			return err
		}
		defer tr.Close()
		if inv.Target == "local" {
			return fmt.Errorf("%w: the local target starts its agents itself (rig run); stage is for remote nodes", errUsage)
		}
		nodes, err := pickNodes(inv, o.nodes)
		if err != nil {
			return err
		}
		wd, _ := os.Getwd()
		res, err := sshtarget.All(cmd.Context(), tr, nodes, sshtarget.Options{Binaries: bins, SourceDir: sshtarget.FindSource(wd),
			Base: o.remoteDir, Sudo: o.sudo, Parallel: o.parallel})
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

var tuneFlags struct {
	root, dir, profile string
	json               bool
}

var agentTuneCmd = &cobra.Command{
	Use:   "tune --profile FILE [--root /] [--dir rig/agent]",
	Short: "Apply a tuning profile here: record prior values, write, read every value back",
	Long: `Apply a tuning profile (YAML or JSON: setting -> value) to this machine, or to a fake tree of
/proc/sys and /sys files under --root. Every prior value is recorded in DIR/` + tune.StateFileName + `
before anything changes; every setting is read back and rig fails naming each one that did not
take. ` + "`rig agent revert`" + ` restores the recorded values. Settings: ` + strings.Join(tune.ValidNames(), ", ") + `.`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		o := tuneFlags
		if o.profile == "" {
			return fmt.Errorf("%w: --profile is required", errUsage)
		}
		b, err := os.ReadFile(o.profile)
		if err != nil {
			return fmt.Errorf("%w: --profile: %v", errUsage, err)
		}
		p, err := tune.ParseProfile(o.profile, b)
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		opts, err := tuneOptions(o.root, o.dir)
		if err != nil {
			return err
		}
		rep, err := tune.Apply(cmd.Context(), opts, p)
		printReport(cmd.OutOrStdout(), rep, o.json)
		return err
	},
}

var revertFlags struct {
	root, dir string
	json      bool
}

var agentRevertCmd = &cobra.Command{
	Use:   "revert [--root /] [--dir rig/agent]",
	Short: "Restore every value the last tuning recorded, and read each back",
	Args:  cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		o := revertFlags
		opts, err := tuneOptions(o.root, o.dir)
		if err != nil {
			return err
		}
		rep, err := tune.Revert(cmd.Context(), opts)
		if errors.Is(err, tune.ErrNotApplied) {
			fmt.Fprintf(cmd.OutOrStdout(), "nothing to revert: %v\n", err)
			return nil
		}
		printReport(cmd.OutOrStdout(), rep, o.json)
		return err
	},
}

func tuneOptions(root, dir string) (tune.Options, error) {
	if root == "" {
		return tune.Options{}, fmt.Errorf("%w: --root is empty (use / for this machine)", errUsage)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return tune.Options{}, fmt.Errorf("%w: --root %q: %v", errUsage, root, err)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return tune.Options{}, fmt.Errorf("%w: --root %q is not a folder", errUsage, root)
	}
	if dir == "" {
		return tune.Options{}, fmt.Errorf("%w: --dir is empty", errUsage)
	}
	// The report printed is the record of what happened; no log lines besides it.
	return tune.Options{Root: abs, StateFile: filepath.Join(dir, tune.StateFileName), Logger: slog.New(slog.DiscardHandler)}, nil
}

func printReport(w io.Writer, rep tune.Report, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
		return
	}
	changes := append([]tune.Change(nil), rep.Changes...)
	sort.SliceStable(changes, func(i, j int) bool { return changes[i].Name < changes[j].Name })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SETTING\tBEFORE\tWANT\tREAD BACK")
	for _, c := range changes {
		mark := ""
		if c.After != c.Want {
			mark = "  <- did not take"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s%s\n", c.Name, c.Before, c.Want, c.After, mark)
	}
	tw.Flush()
	if rep.StateFile != "" {
		fmt.Fprintf(w, "state: %s\n", rep.StateFile)
	}
}

func init() {
	f := sshCmd.Flags()
	sshFlags.register(f)
	f.BoolVar(&sshFlags.sudo, "sudo", false, "run the command through sudo -n")
	f.StringVar(&sshFlags.dir, "cd", "", "working directory on the node (default: the login home)")
	rootCmd.AddCommand(sshCmd)

	f = agentPingCmd.Flags()
	pingFlags.register(f)
	f.StringVar(&pingFlags.remoteDir, "remote-dir", "", "the folder on the nodes that holds rig-NODE, as given to rig agent stage (default: the login home)")
	f.StringArrayVar(&pingFlags.nodes, "node", nil, "ping only this node (repeatable; default: all)")
	f.IntVar(&pingFlags.parallel, "parallel", 16, "nodes reached at once")
	f.BoolVar(&pingFlags.json, "json", false, "print JSON")

	f = agentStageCmd.Flags()
	stageFlags.register(f)
	f.StringArrayVar(&stageFlags.nodes, "node", nil, "stage only this node (repeatable; default: all)")
	f.StringVar(&stageFlags.remoteDir, "remote-dir", "", "folder on the node that holds rig-NODE, as rig run --remote-dir (default: the login home)")
	f.BoolVar(&stageFlags.sudo, "sudo", false, "run the agent as root through sudo -n (needed for tuning as a non-root user)")
	f.StringArrayVar(&stageFlags.binaries, "binary", nil, "linux binary for nodes of an architecture, ARCH=PATH (repeatable)")
	f.IntVar(&stageFlags.parallel, "parallel", 8, "nodes staged at once")

	f = agentTuneCmd.Flags()
	f.StringVar(&tuneFlags.root, "root", "/", "filesystem root of /proc and /sys (a fake tree for tests)")
	f.StringVar(&tuneFlags.dir, "dir", "rig/agent", "the agent folder that keeps "+tune.StateFileName)
	f.StringVar(&tuneFlags.profile, "profile", "", "tuning profile, YAML or JSON (required)")
	f.BoolVar(&tuneFlags.json, "json", false, "print the report as JSON")

	f = agentRevertCmd.Flags()
	f.StringVar(&revertFlags.root, "root", "/", "filesystem root of /proc and /sys")
	f.StringVar(&revertFlags.dir, "dir", "rig/agent", "the agent folder that keeps "+tune.StateFileName)
	f.BoolVar(&revertFlags.json, "json", false, "print the report as JSON")

	agentCmd.AddCommand(agentPingCmd, agentStageCmd, agentTuneCmd, agentRevertCmd)
}
