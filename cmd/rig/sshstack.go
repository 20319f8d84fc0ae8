package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"github.com/rig-dev/rig/infra/spec"
	"github.com/rig-dev/rig/infra/stack"
	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/internal/untrusted"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/transport/sshx"
)

// OpenSSH access to a stack's nodes: `rig ssh --stack NAME NODE [-- CMD]` execs ssh, and
// `rig ssh-config --stack NAME` prints an ssh_config block per node. Both pin the host keys the
// stack's inventory holds (infra/hostkey derived them before the nodes existed) in a known_hosts
// file of rig's state folder, looked up by a HostKeyAlias of the stack and node, with
// StrictHostKeyChecking yes: OpenSSH never asks, never learns a key, and refuses any other.

// stackSSH is what OpenSSH needs to reach a stack's nodes.
type stackSSH struct {
	name       string
	inv        *inventory.Inventory
	knownHosts string   // the pinned keys, one line per key, by alias
	keys       []string // private key files; none: ssh's defaults and ssh-agent
	keyNote    string   // how the keys were chosen, for ssh-config's comment
	user       string   // login user of nodes whose inventory entry has none
	timeout    time.Duration
}

// stackSSHFlags are the flags of both verbs.
type stackSSHFlags struct {
	infra infraFlags
	name  string
	keys  []string
}

// open reads the stack's inventory with the pulumi CLI (as rig run --stack does), writes its
// known_hosts file and picks the client keys.
func (f *stackSSHFlags) open(ctx context.Context) (*stackSSH, error) {
	if err := needStack(&f.name); err != nil {
		return nil, err
	}
	env := map[string]string{}
	if f.infra.backend != "" {
		env["PULUMI_BACKEND_URL"] = f.infra.backend
	}
	inv, err := stack.NewTarget(stack.TargetOptions{Stack: f.name, ProjectDir: f.infra.projectDir, Env: env}).Inventory(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the nodes of stack %s: %w", f.name, err)
	}
	s := &stackSSH{name: f.name, inv: inv}
	state, err := stack.StateDir()
	if err != nil {
		return nil, fmt.Errorf("find rig's state folder for the known_hosts file: %w", err)
	}
	s.knownHosts = filepath.Join(state, "ssh", f.name, "known_hosts")
	if err := s.writeKnownHosts(); err != nil {
		return nil, err
	}
	s.keys, s.keyNote = f.pickKeys()
	return s, nil
}

// pickKeys returns --ssh-key, else the private half of the stack's rig:publicKey when
// ~/.ssh holds it (KEY.pub beside KEY), else none.
func (f *stackSSHFlags) pickKeys() ([]string, string) {
	if len(f.keys) > 0 {
		var abs []string
		for _, k := range f.keys {
			if a, err := filepath.Abs(k); err == nil {
				k = a
			}
			abs = append(abs, k)
		}
		return abs, "the --ssh-key given"
	}
	sc, err := spec.ReadStackConfig(filepath.Join(f.infra.projectDir, "Pulumi."+f.name+".yaml"))
	if err != nil || sc.Values["publicKey"] == "" {
		return nil, "none pinned (no Pulumi." + f.name + ".yaml with rig:publicKey here): ssh offers its default keys and ssh-agent's"
	}
	want, _, _, _, err := ssh.ParseAuthorizedKey([]byte(sc.Values["publicKey"]))
	if err != nil {
		return nil, "none pinned (rig:publicKey does not parse): ssh offers its default keys and ssh-agent's"
	}
	home, _ := os.UserHomeDir()
	pubs, _ := filepath.Glob(filepath.Join(home, ".ssh", "*.pub"))
	for _, p := range pubs {
		b, err := untrusted.ReadFile(p, "ssh public key") // a FIFO or device among them is skipped, not read
		if err != nil {
			continue
		}
		k, _, _, _, err := ssh.ParseAuthorizedKey(b)
		priv := strings.TrimSuffix(p, ".pub")
		if _, serr := os.Stat(priv); err == nil && serr == nil && bytes.Equal(k.Marshal(), want.Marshal()) {
			return []string{priv}, "the private half of the stack's rig:publicKey (" + p + ")"
		}
	}
	return nil, "none pinned (no ~/.ssh/*.pub is the stack's rig:publicKey): ssh offers its default keys and ssh-agent's"
}

// alias is the name ssh looks a node's host key up by, and ssh-config's Host.
func (s *stackSSH) alias(n inventory.Node) string { return "rig-" + s.name + "-" + n.Name }

// writeKnownHosts writes every node's pinned keys under its alias, re-encoded from the parsed
// keys so that nothing but a key (no marker, option or second line) reaches the file.
func (s *stackSSH) writeKnownHosts() error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# host keys of rig stack %s, pinned by its inventory; rewritten by rig ssh and rig ssh-config\n", s.name)
	for _, n := range s.inv.Nodes {
		hk := ""
		if n.SSH != nil {
			hk = n.SSH.HostKey
		}
		keys, err := sshx.ParseHostKeys(hk)
		if err != nil {
			return fmt.Errorf("stack %s: node %s: ssh.host_key: %w", s.name, n.Name, err)
		}
		for _, k := range keys {
			fmt.Fprintf(&b, "%s %s", s.alias(n), ssh.MarshalAuthorizedKey(k))
		}
	}
	if err := os.MkdirAll(filepath.Dir(s.knownHosts), 0o700); err != nil {
		return fmt.Errorf("create the folder of %s: %w", s.knownHosts, err)
	}
	if err := atomicfile.WriteFile(s.knownHosts, b.Bytes(), 0o600); err != nil {
		return fmt.Errorf("write the stack's known_hosts file: %w", err)
	}
	return nil
}

// node finds a node by name, or says which there are.
func (s *stackSSH) node(name string) (inventory.Node, error) {
	n, ok := s.inv.Node(name)
	if !ok {
		return n, fmt.Errorf("%w: node %q is not in stack %s (nodes: %s)", errUsage, name, s.name, nodeNames(s.inv))
	}
	return n, nil
}

// options are the ssh_config settings of node n, in order, as keyword and value.
func (s *stackSSH) options(n inventory.Node) ([][2]string, error) {
	user := s.user
	port := 22
	if n.SSH != nil {
		if n.SSH.User != "" {
			user = n.SSH.User
		}
		if n.SSH.Port != 0 {
			port = n.SSH.Port
		}
	}
	bad := func(v string) bool {
		return strings.HasPrefix(v, "-") || strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == '"' || r == '\'' || r == 0x7f })
	}
	if n.Address == "" || bad(n.Address) {
		return nil, fmt.Errorf("stack %s: node %s: address %q cannot be an ssh destination (want a host name or IP address)", s.name, n.Name, n.Address)
	}
	if bad(user) {
		return nil, fmt.Errorf("stack %s: node %s: ssh.user %q cannot be an ssh login name (no leading -, spaces, quotes or control characters)", s.name, n.Name, user)
	}
	opts := [][2]string{
		{"HostName", n.Address},
		{"Port", fmt.Sprint(port)},
	}
	if user != "" {
		opts = append(opts, [2]string{"User", user})
	}
	opts = append(opts,
		[2]string{"HostKeyAlias", s.alias(n)},
		[2]string{"UserKnownHostsFile", configQuote(s.knownHosts)},
		[2]string{"GlobalKnownHostsFile", "/dev/null"},
		[2]string{"StrictHostKeyChecking", "yes"},
		[2]string{"CheckHostIP", "no"},
		[2]string{"UpdateHostKeys", "no"},
	)
	for _, k := range s.keys {
		opts = append(opts, [2]string{"IdentityFile", configQuote(k)})
	}
	if len(s.keys) > 0 {
		opts = append(opts, [2]string{"IdentitiesOnly", "yes"})
	}
	if s.timeout > 0 {
		opts = append(opts, [2]string{"ConnectTimeout", fmt.Sprint(int((s.timeout + time.Second - 1) / time.Second))})
	}
	return opts, nil
}

// configQuote writes a path as one ssh_config value: double quotes around one with a space.
func configQuote(p string) string {
	if strings.ContainsAny(p, " \t") {
		return `"` + p + `"`
	}
	return p
}

// argv is the ssh command line that reaches node n and runs args there, each word quoted for
// the remote shell so that it gets exactly these words (as rig ssh --inventory does); no args
// is a login shell.
func (s *stackSSH) argv(n inventory.Node, args []string) ([]string, error) {
	opts, err := s.options(n)
	if err != nil {
		return nil, err
	}
	out := []string{"ssh"}
	for _, o := range opts {
		if o[0] == "HostName" {
			continue // the destination below
		}
		out = append(out, "-o", o[0]+"="+o[1])
	}
	// "--" ends ssh's options: nothing after the destination is read as one.
	out = append(out, "--", n.Address)
	for _, a := range args {
		out = append(out, sshx.Quote(a))
	}
	return out, nil
}

// writeConfig prints the ssh_config block of every node.
func (s *stackSSH) writeConfig(w io.Writer) error {
	fmt.Fprintf(w, "# rig stack %s: %d node(s); host keys pinned in %s\n", s.name, len(s.inv.Nodes), s.knownHosts)
	fmt.Fprintf(w, "# client keys: %s\n", s.keyNote)
	fmt.Fprintf(w, "# use: rig ssh-config --stack %s > rig-%s.conf && ssh -F rig-%s.conf %s (or Include the file from ~/.ssh/config)\n",
		s.name, s.name, s.name, s.alias(s.inv.Nodes[0]))
	for _, n := range s.inv.Nodes {
		opts, err := s.options(n)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\nHost %s\n", s.alias(n))
		for _, o := range opts {
			fmt.Fprintf(w, "  %s %s\n", o[0], o[1])
		}
	}
	return nil
}

// execSSH replaces rig with ssh (so that a terminal, its signals and the exit status are ssh's).
func execSSH(argv []string) error {
	path, err := exec.LookPath("ssh")
	if err != nil {
		return fmt.Errorf("the OpenSSH client (ssh) is not on PATH: install it (Debian: apt-get install openssh-client): %w", err)
	}
	if err := syscall.Exec(path, argv, os.Environ()); err != nil {
		return fmt.Errorf("exec %s: %w", path, err)
	}
	return nil
}

func newSSHConfigCmd() *cobra.Command {
	var f stackSSHFlags
	c := &cobra.Command{
		Use:   "ssh-config --stack NAME",
		Short: "Print an ssh_config block per node of a stack, host keys pinned (ssh -F FILE rig-NAME-NODE)",
		Long: `Read the stack's inventory (pulumi stack output, as rig run --stack does), write its nodes'
pinned host keys to a known_hosts file in rig's state folder ($XDG_STATE_HOME/rig/ssh/NAME/, or
~/.local/state/rig/ssh/NAME/), and print one Host block per node, named rig-NAME-NODE, with
HostName, Port, User, HostKeyAlias, UserKnownHostsFile pinned to that file, GlobalKnownHostsFile
/dev/null and StrictHostKeyChecking yes: ssh never asks, never learns a key and refuses a node
whose key is not the pinned one. IdentityFile is --ssh-key, else the private half of the stack's
rig:publicKey when ~/.ssh holds it beside its .pub, else left to ssh (default keys, ssh-agent).
Save it and use it with ssh -F, scp -F or rsync -e 'ssh -F FILE', or Include it from
~/.ssh/config.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := f.open(cmd.Context())
			if err != nil {
				return err
			}
			return s.writeConfig(cmd.OutOrStdout())
		},
	}
	c.Flags().StringVar(&f.name, "stack", "", "stack whose nodes to print: "+stackFlagUsage)
	sshKeyFlag(c.Flags(), &f.keys, "SSH private key file(s) for IdentityFile")
	c.Flags().StringVar(&f.infra.projectDir, "project-dir", ".", "the repository root: Pulumi.yaml and the Pulumi.<stack>.yaml files")
	c.Flags().StringVar(&f.infra.backend, "backend", "", "Pulumi backend URL of the stack's state (default: PULUMI_BACKEND_URL, else rig's local folder; see rig env --stack NAME)")
	return c
}

// stackArgv is rig ssh --stack's ssh command line for args (NODE [CMD...]).
func (o *sshCmdOptions) stackArgv(ctx context.Context, args []string) ([]string, error) {
	o.stack.keys = o.keys
	s, err := o.stack.open(ctx)
	if err != nil {
		return nil, err
	}
	s.user, s.timeout = o.user, o.connectTimeout
	n, err := s.node(args[0])
	if err != nil {
		return nil, err
	}
	return s.argv(n, args[1:])
}
