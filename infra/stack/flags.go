package stack

import (
	"os"
	"path/filepath"
	"runtime"

	"github.com/spf13/pflag"
)

// DriverFlags are where the stacks live and how the Pulumi CLI is driven: declared once, for
// `rig up|down|gc|...` and for the stack driver (infra/stackctl), which rig passes them on to.
type DriverFlags struct {
	ProjectDir      string // the repository root: Pulumi.yaml and the Pulumi.<stack>.yaml files
	Verbose         bool
	Backend         string
	SecretsProvider string
}

// Register declares the flags on fs.
func (d *DriverFlags) Register(fs *pflag.FlagSet) {
	d.RegisterLookup(fs, "")
	fs.BoolVarP(&d.Verbose, "verbose", "v", false, "log what happens around the pulumi CLI")
	fs.StringVar(&d.SecretsProvider, "secrets-provider", "", "secrets provider of a new stack: awskms://alias/NAME?region=REGION, or passphrase (PULUMI_CONFIG_PASSPHRASE[_FILE])")
}

// RegisterLookup declares only the flags that find a stack's state (--project-dir, --backend),
// for the verbs that read a stack without driving Pulumi (rig ssh --stack, rig ssh-config);
// when says when they apply ("with --stack: "), "" always.
func (d *DriverFlags) RegisterLookup(fs *pflag.FlagSet, when string) {
	fs.StringVar(&d.ProjectDir, "project-dir", ".", when+"the repository root: Pulumi.yaml and the Pulumi.<stack>.yaml files")
	fs.StringVar(&d.Backend, "backend", "", when+"Pulumi backend URL for the state, e.g. s3://BUCKET/PREFIX?region=REGION "+
		"(default: PULUMI_BACKEND_URL, else a folder on this machine; a `pulumi login` is never used unless named here; "+
		"export PULUMI_BACKEND_URL so rig run --stack finds it too, or see rig env --stack NAME)")
}

// Args passes the flags on to the stack driver (the project folder goes as its working folder).
func (d *DriverFlags) Args() []string {
	var out []string
	if d.Verbose {
		out = append(out, "--verbose")
	}
	if d.Backend != "" {
		out = append(out, "--backend", d.Backend)
	}
	if d.SecretsProvider != "" {
		out = append(out, "--secrets-provider", d.SecretsProvider)
	}
	return out
}

// NodeFlags are how down and gc reach the nodes to stop engines, sync and unmount the data
// volumes before destroying: the same flags as rig run's remote ones. Without --ssh-key nothing
// is unmounted (and down says so).
type NodeFlags struct {
	KeyFiles  []string
	Sudo      bool
	RemoteDir string
	DataMount string
	Rig       string // a linux rig binary to start the agents with when a node has none
}

// Register declares the flags on fs; rigBinary adds --rig-binary (the stack driver's: rig passes
// its own executable).
func (n *NodeFlags) Register(fs *pflag.FlagSet, rigBinary bool) {
	fs.StringSliceVar(&n.KeyFiles, "ssh-key", nil, "SSH private key file(s): stop engines, sync and unmount the data volumes before destroying")
	n.RegisterAgent(fs, rigBinary)
}

// RegisterAgent declares how the agents run, without --ssh-key (up has its own, for its wait).
func (n *NodeFlags) RegisterAgent(fs *pflag.FlagSet, rigBinary bool) {
	fs.BoolVar(&n.Sudo, "sudo", false, "run the agents as root through sudo -n (unmount needs root), as given to rig run")
	fs.StringVar(&n.RemoteDir, "remote-dir", "", "base folder on the nodes, as given to rig run")
	fs.StringVar(&n.DataMount, "data-mount", "/data", "where the data volumes are mounted, as given to rig run")
	if rigBinary {
		fs.StringVar(&n.Rig, "rig-binary", "", "linux rig binary to start the agents with when a node has none (rig passes its own)")
	}
}

// Args passes the flags on to the stack driver, with this executable to start the agents with
// when it is a linux/amd64 one; none without an SSH key.
func (n *NodeFlags) Args() []string {
	if len(n.KeyFiles) == 0 {
		return nil
	}
	var out []string
	for _, k := range n.KeyFiles {
		if abs, err := filepath.Abs(k); err == nil {
			k = abs // the stack driver runs in the project folder
		}
		out = append(out, "--ssh-key", k)
	}
	return append(out, n.AgentArgs()...)
}

// AgentArgs passes how the agents run (not the keys), with this executable to start them with
// when it is a linux/amd64 one.
func (n *NodeFlags) AgentArgs() []string {
	var out []string
	if n.Sudo {
		out = append(out, "--sudo")
	}
	if n.RemoteDir != "" {
		out = append(out, "--remote-dir", n.RemoteDir)
	}
	out = append(out, "--data-mount", n.DataMount)
	if self, err := os.Executable(); err == nil && runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
		out = append(out, "--rig-binary", self)
	}
	return out
}
