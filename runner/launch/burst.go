package launch

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/transport"
)

// BurstClientLead is how far ahead a burst through the engine's own client (a playbook's
// engine.burst_client) starts: the client may be a JVM with a media driver of its own per
// sender, which must be up and connected by then.
const BurstClientLead = 8 * time.Second

// BurstRequest is what the engine's burst client reads (properties, one key a line): the
// cluster's members as node.properties lists them, the series with its start on the client
// node's clock, and where to write its figures (rundir.BurstStats). withSecret says the run's
// engine secret comes on the client's standard input (credentials=stdin), never in the file.
func BurstRequest(peers []engine.Peer, host string, s rundir.BurstSeries, start time.Time, out string, withSecret bool) string {
	var b strings.Builder
	for i, p := range peers {
		fmt.Fprintf(&b, "peer.%d=%s,%s,%s\n", i, p.Node, p.RaftAddr, p.ClientAddr)
	}
	fmt.Fprintf(&b, "host=%s\nmessages=%d\nsize=%d\ncount=%d\nevery_ns=%d\nstart_unix_ns=%d\nsenders=%d\nfirst_burst=%d\nout=%s\n",
		host, s.Messages, s.Size, s.Count, s.Every.Nanoseconds(), start.UnixNano(), s.Senders, s.FirstBurst, out)
	if withSecret {
		b.WriteString("credentials=stdin\n")
	}
	return b.String()
}

// BurstClient is one run of the engine's burst client (a playbook's engine.burst_client) on a
// client node.
type BurstClient struct {
	Cluster target.Cluster
	Dir     string         // the run folder: the request and the client's log go here
	Node    inventory.Node // the client node it runs on
	Argv    []string       // engine.burst_client; the request's path is appended
	Peers   []engine.Peer
	Series  rundir.BurstSeries
	Start   time.Time // on the node's clock
	// Secret is the run's engine secret (engine.ClusterSecretEnv), which the cluster's ingress
	// asks for: piped to the client's standard input, so it is in no file, argv or remote
	// command line (a transport passes Env on a remote shell's command line).
	Secret string
}

// Run runs the client and gathers the BurstStats it writes to Dir/rundir.RemoteBurstsDir.
func (c BurstClient) Run(ctx context.Context) error {
	n, cl := c.Node, c.Cluster
	rel := rundir.RemoteBurstsDir(n.Name, c.Series.FirstBurst)
	req := BurstRequest(c.Peers, n.PrivateAddress, c.Series, c.Start, cl.OutputPath(n, path.Join(rel, rundir.BurstStatsFile)), c.Secret != "")
	name := fmt.Sprintf("burst-client-%s-%d", n.Name, c.Series.FirstBurst)
	local := filepath.Join(c.Dir, name+".properties")
	if err := os.WriteFile(local, []byte(req), 0o644); err != nil {
		return err
	}
	remote := cl.NodePath(n, name+".properties")
	if err := cl.Transport().Upload(ctx, n, local, remote, 0o644); err != nil {
		return fmt.Errorf("upload burst request: %w", err)
	}
	logf, err := os.Create(filepath.Join(c.Dir, name+".log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	args := append(append([]string(nil), c.Argv...), remote)
	cmd := transport.Cmd{Args: args, Stdout: logf, Stderr: logf}
	if c.Secret != "" {
		cmd.Stdin = strings.NewReader(c.Secret + "\n")
	}
	if _, err := cl.Transport().Exec(ctx, n, cmd); err != nil {
		return fmt.Errorf("%s: %w (log: %s.log)", strings.Join(args, " "), err, name)
	}
	return cl.Gather(ctx, n, path.Join(rel, rundir.BurstStatsFile))
}
