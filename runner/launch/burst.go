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
// node's clock, and where to write its figures (rundir.BurstStats).
func BurstRequest(peers []engine.Peer, host string, s rundir.BurstSeries, start time.Time, out string) string {
	var b strings.Builder
	for i, p := range peers {
		fmt.Fprintf(&b, "peer.%d=%s,%s,%s\n", i, p.Node, p.RaftAddr, p.ClientAddr)
	}
	fmt.Fprintf(&b, "host=%s\nmessages=%d\nsize=%d\ncount=%d\nevery_ns=%d\nstart_unix_ns=%d\nsenders=%d\nfirst_burst=%d\nout=%s\n",
		host, s.Messages, s.Size, s.Count, s.Every.Nanoseconds(), start.UnixNano(), s.Senders, s.FirstBurst, out)
	return b.String()
}

// RunBurstClient runs the engine's burst client (argv, the request's path appended) on client
// node n for series, starting at start on n's clock; the request and the client's log go to dir
// (the run folder), and the BurstStats it writes is gathered to dir/rundir.RemoteBurstsDir.
func RunBurstClient(ctx context.Context, cl target.Cluster, dir string, n inventory.Node, argv []string, peers []engine.Peer, series rundir.BurstSeries, start time.Time) error {
	rel := rundir.RemoteBurstsDir(n.Name, series.FirstBurst)
	req := BurstRequest(peers, n.PrivateAddress, series, start, cl.OutputPath(n, path.Join(rel, rundir.BurstStatsFile)))
	name := fmt.Sprintf("burst-client-%s-%d", n.Name, series.FirstBurst)
	local := filepath.Join(dir, name+".properties")
	if err := os.WriteFile(local, []byte(req), 0o644); err != nil {
		return err
	}
	remote := cl.NodePath(n, name+".properties")
	if err := cl.Transport().Upload(ctx, n, local, remote, 0o644); err != nil {
		return fmt.Errorf("upload burst request: %w", err)
	}
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	args := append(append([]string(nil), argv...), remote)
	if _, err := cl.Transport().Exec(ctx, n, transport.Cmd{Args: args, Stdout: logf, Stderr: logf}); err != nil {
		return fmt.Errorf("%s: %w (log: %s.log)", strings.Join(args, " "), err, name)
	}
	return cl.Gather(ctx, n, path.Join(rel, rundir.BurstStatsFile))
}
