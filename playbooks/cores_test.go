package playbooks

import (
	"os"
	"strings"
	"testing"
)

// Spinning idle strategies are counted per server from the settings that pick them (the
// threading mode decides which agents run), and the plan warns where they outnumber the cores
// one host gives all servers; a stack's servers are told how many cores each needs.
func TestCoresWarnings(t *testing.T) {
	// The shipped sweep with its noop axis, which it leaves commented out for a 2-CPU machine.
	const file = "../examples/aeron-cluster/handoff-knobs.yaml"
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	const axis = "engine.aeron.cluster.idle.strategy: [backoff, noop]"
	if !strings.Contains(string(b), "# "+axis) {
		t.Fatalf("%s has no commented %q axis", file, axis)
	}
	pb, err := Parse(file, []byte(strings.Replace(string(b), "# "+axis, axis, 1)), testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := pb.Plan()
	if err != nil {
		t.Fatal(err)
	}
	ws := pl.CoresWarnings(2)
	if len(ws) != 1 {
		t.Fatalf("warnings %q: want one, for the noop runs", ws)
	}
	for _, want := range []string{"in the runs with engine.aeron.cluster.idle.strategy=noop: ", "3 servers × 2 spinning thread(s) = 6 threads",
		"host with 2 CPUs", "consensus module (aeron.cluster.idle.strategy noop), service container (aeron.cluster.idle.strategy noop)"} {
		if !strings.Contains(ws[0], want) {
			t.Errorf("warning %q does not say %q", ws[0], want)
		}
	}
	if ws := pl.CoresWarnings(16); len(ws) != 0 {
		t.Errorf("16 CPUs hold 6 spinning threads, got %q", ws)
	}
	// A stack: each server on its own instance.
	if ws := pl.CoresWarnings(0); len(ws) != 1 || !strings.Contains(ws[0], "each server spins 2 thread(s)") {
		t.Errorf("stack warnings %q", ws)
	}
	// The driver's shared agent spins too in SHARED mode, not in DEDICATED (its own agents keep
	// their default).
	run := pl.Runs[8].Playbook
	if run.Engine.Values["aeron.cluster.idle.strategy"] != "noop" {
		t.Fatalf("run 9 %v: want the noop one", run.Engine.Values)
	}
	run.Engine.Values["aeron.shared.idle.strategy"] = "noop"
	if got := run.Engine.SpinningThreads(); len(got) != 3 || !strings.HasPrefix(got[0], "media driver (shared)") {
		t.Errorf("SHARED driver with a noop shared strategy: %q", got)
	}
	run.Engine.Values["aeron.threading.mode"] = "DEDICATED"
	if got := run.Engine.SpinningThreads(); len(got) != 2 {
		t.Errorf("DEDICATED driver: its shared strategy idles no thread: %q", got)
	}
}
