package aeroncluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// echoCodec is the only code TestScaffoldEchoCheck writes: rig's order as a message to Aeron's
// EchoService, which sends every message back as it came, so the correlation id is read back
// from where it was written.
const echoCodec = `package io.aeron.samples.cluster.rig;

import dev.rig.aeron.Reply;
import dev.rig.aeron.RigCodec;
import dev.rig.aeron.WireOrder;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

final class Codec implements RigCodec
{
    @Override
    public int encodeOrder(final long correlationId, final WireOrder order, final MutableDirectBuffer out, final int offset)
    {
        out.putLong(offset, correlationId);
        out.putLong(offset + 8, order.id);
        out.putLong(offset + 16, order.price);
        out.putLong(offset + 24, order.quantity);
        return 32;
    }

    @Override
    public long ingressCorrelationId(final DirectBuffer buffer, final int offset, final int length)
    {
        return buffer.getLong(offset);
    }

    @Override
    public boolean decodeEgress(final DirectBuffer buffer, final int offset, final int length, final Reply reply)
    {
        if (length < 32)
        {
            return false;
        }
        reply.correlationId = buffer.getLong(offset);
        reply.status = Reply.OK;
        return true;
    }
}
`

// TestScaffoldEchoCheck: `rig new aeron-service` for Aeron's own EchoService (package-private,
// inside aeron-all), with only the codec filled in, builds offline against the installed
// rig-aeron and passes rig check on its own playbook, every check but step-down.
func TestScaffoldEchoCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a three-node Aeron Cluster")
	}
	bin, mod := scaffoldEcho(t)
	_, runDir, _ := runCheck(t, bin, filepath.Join(mod, "playbook.yaml"), "127.0.19.46", 2_000, "Aeron's EchoService from rig new")
	if t.Failed() {
		dumpLogs(t, runDir)
	}
}

// TestScaffoldEchoDurability: Aeron's EchoService, unchanged and with no introspection, has every
// acknowledged order checked after the scaffold playbook's follower SIGKILL and relaunch, against
// the ingress each node applied: none unchecked, none lost.
func TestScaffoldEchoDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: starts a three-node Aeron Cluster")
	}
	bin, mod := scaffoldEcho(t)
	// Short: the load generator's control socket path under it must fit in 107 bytes.
	res, err := os.MkdirTemp("", "rdur")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(res) })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "run", "-q", "--results", res, "--first-address", "127.0.19.52",
		filepath.Join(mod, "playbook.yaml")).CombinedOutput()
	sums, _ := filepath.Glob(filepath.Join(res, "*", rundir.SummaryFile))
	if len(sums) != 1 {
		t.Fatalf("rig run: %v, %d summaries\n%s", err, len(sums), out)
	}
	b, err := os.ReadFile(sums[0])
	if err != nil {
		t.Fatal(err)
	}
	var s analysis.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	du := s.Durability
	if du != nil {
		t.Logf("durability: %d acked, %d lost, %d unchecked, check %q, faults %s, nodes %+v", du.Acked, du.Lost, du.Unchecked, du.Check, du.Faults, du.Nodes)
	}
	switch {
	case du == nil:
		t.Fatalf("no durability in the summary\n%s", out)
	case du.Acked < 1000 || du.Unchecked != 0 || du.Lost != 0 || du.Check != engine.CheckAppliedIngress || !strings.Contains(du.Faults, "kill -KILL"):
		t.Errorf("durability %+v: want 1000+ acked, 0 unchecked, 0 lost, checked by %q after a kill\n%s", *du, engine.CheckAppliedIngress, out)
	}
	for n, nd := range du.Nodes {
		if nd.Missing || nd.Unknown != 0 {
			t.Errorf("%s: %+v: want an answer that knows every acknowledged order", n, nd)
		}
	}
	if t.Failed() {
		dumpLogs(t, filepath.Dir(sums[0]))
	}
}

var (
	scaffoldOnce sync.Once
	scaffoldMod  string
	scaffoldErr  error
)

// scaffoldEcho writes `rig new aeron-service` for Aeron's EchoService with echoCodec filled in
// and builds it, once per test binary (the tests only read the module: rig writes its runs
// elsewhere); returns the rig binary and the module's folder.
func scaffoldEcho(t *testing.T) (bin, mod string) {
	t.Helper()
	needTools(t)
	bin = rigBinary(t)
	scaffoldOnce.Do(func() { scaffoldMod, scaffoldErr = buildScaffoldEcho(bin) })
	if scaffoldErr != nil {
		t.Fatal(scaffoldErr)
	}
	return bin, scaffoldMod
}

func buildScaffoldEcho(bin string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// What the scaffold's pom says a user does once: rig-aeron and its parent into ~/.m2.
	if err := mvn(ctx, "-q", "-B", "-f", "pom.xml", "-pl", "harness", "-am", "install"); err != nil {
		return "", err
	}
	dir, err := sharedTempDir("rig-aeron-scaffold-")
	if err != nil {
		return "", err
	}
	if out, err := exec.CommandContext(ctx, bin, "new", "aeron-service", "echo", "--dir", dir,
		"--service", "io.aeron.samples.cluster.EchoService").CombinedOutput(); err != nil {
		return "", fmt.Errorf("rig new aeron-service: %v\n%s", err, out)
	}
	mod := filepath.Join(dir, "echo")
	codec := filepath.Join(mod, "src/main/java/io/aeron/samples/cluster/rig/Codec.java")
	if _, err := os.Stat(codec); err != nil {
		return "", fmt.Errorf("the scaffold has no codec where the test fills it in: %v", err)
	}
	if err := os.WriteFile(codec, []byte(echoCodec), 0o644); err != nil {
		return "", err
	}
	if err := mvn(ctx, "-o", "-q", "-B", "-f", filepath.Join(mod, "pom.xml"), "package"); err != nil {
		return "", err
	}
	return mod, nil
}

func mvn(ctx context.Context, args ...string) error {
	if out, err := exec.CommandContext(ctx, "mvn", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("mvn %v: %v\n%s", args, err, out)
	}
	return nil
}
