package playbooks

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/rundir"
)

// The plan prints, per combination, the micro-burst guide's buffer chain beside the settings the
// run asks for; a burst through the engine's own client is described as such.
func TestPlanPrintsBufferChain(t *testing.T) {
	pb, err := Open("../examples/aeron-cluster/micro-burst.yaml", testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := pb.Plan()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	pl.Print(&buf)
	out := buf.String()
	for _, want := range []string{
		"burst of [10k, 50k, 200k] x 170 B messages at wire speed into the cluster's ingress through the engine's burst client from each of one sender per client node",
		"buffers    the micro-burst guide's minimums per burst: SO_RCVBUF >= P x S x 1ms, window >= P x S x RTT, term >= 2 x P x S x max stall",
		"S = the message + Aeron's 32 B frame header + the cluster's 32 B session header, 32 B aligned",
		// 50k × (170 + 64 → 256 B) in 1 ms = 12.8 MB against rmem_max 212,992: clamped.
		"timeline[0] 50k x 170 B x 1 sender(s): P 50k/ms, S 256 B; SO_RCVBUF >= 12.2 MiB against 208.0 KiB in effect (asked 64.0 MiB, net.core.rmem_max 208.0 KiB from tuning: granted 416.0 KiB): SHORT; window >= 1.2 MiB at RTT 100µs against 4.0 MiB; term >= 24.4 MiB against the engine's default, in run 6\n",
		"timeline[0] 50k x 170 B x 1 sender(s): P 50k/ms, S 256 B; SO_RCVBUF >= 12.2 MiB against 64.0 MiB in effect (asked 64.0 MiB, net.core.rmem_max 128.0 MiB from tuning: granted 128.0 MiB); window >= 1.2 MiB at RTT 100µs against 128.0 KiB: SHORT;",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}

	// On the reference engine the burst is datagrams, S the datagram, and only the socket buffer counts.
	pl, err = mustParse(t, matrixPlaybook).Plan()
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	pl.Print(&buf)
	out = buf.String()
	for _, want := range []string{
		"UDP datagrams at wire speed from each of one sender per client node",
		"buffers    the micro-burst guide's minimum per burst: SO_RCVBUF >= P x S x 1ms;",
		"timeline[1] 10k x 170 B x 1 sender(s): P 10k/ms, S 170 B; SO_RCVBUF >= 1.6 MiB against the kernel's default (the engine asks for none): SHORT",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "window >=") {
		t.Errorf("a datagram burst has no Aeron window:\n%s", out)
	}
}

// sprayKind is a kind of this test's that sends bursts: not the burst kind, but a BurstSender.
type sprayKind struct{ actions.WaitFor }

func (*sprayKind) Sends() rundir.BurstSeries {
	return rundir.BurstSeries{Messages: 20_000, Count: 2, Size: 200}
}

// The buffer chains come from what an entry's kind says it sends (actions.BurstSender), not from
// the burst kind's type: a kind of its own gets its chain, its senders one per client node.
func TestBufferChainOfAnyBurstSender(t *testing.T) {
	var p Playbook
	p.Cluster.Clients = 3
	p.Timeline = []Action{{Spec: &actions.WaitFor{}}, {Spec: &sprayKind{}}}
	cs := p.BurstChains()
	if len(cs) != 1 || cs[0].Entry != 1 || cs[0].Burst.Messages != 20_000 || cs[0].Burst.Senders != 3 || cs[0].Burst.Size != 200 {
		t.Fatalf("chains %+v, want timeline[1]'s: 20k messages of 200 B from 3 senders", cs)
	}
}
