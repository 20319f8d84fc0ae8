package playbooks

import (
	"strings"
	"testing"
)

// A cpu_hog entry's bad input is refused where it stands, saying what would be valid.
func TestCPUHogRefusals(t *testing.T) {
	for _, c := range []struct{ name, entry, at, msg string }{
		{"for missing", "{at: 8s, cpu_hog: {node: leader}}", "t.yaml:6:23: timeline[0].cpu_hog.for", "missing; want how long the hog spins, e.g. for: 3s"},
		{"for zero", "{at: 8s, cpu_hog: {node: leader, for: 0s}}", "t.yaml:6:43: timeline[0].cpu_hog.for", "0s is out of range; want a duration from 1ms to 24h, e.g. 3s"},
		// The upper end is in the message too.
		{"for beyond 24h", "{at: 8s, cpu_hog: {node: leader, for: 1000h}}", "t.yaml:6:43: timeline[0].cpu_hog.for", "1000h is out of range; want a duration from 1ms to 24h"},
		{"for beyond the run", "{at: 28s, cpu_hog: {node: leader, for: 3s}}", "t.yaml:6:44: timeline[0].cpu_hog.for",
			"the end of the hog at 31s (at 28s + 3s) is at or after the end of the run (duration 30s); want a hog that ends inside the run"},
		{"threads zero", "{at: 8s, cpu_hog: {for: 3s, threads: 0}}", "t.yaml:6:42: timeline[0].cpu_hog.threads", `"0": want 1..256 busy threads, or cpus`},
		{"nice", "{at: 8s, cpu_hog: {for: 3s, nice: -30}}", "t.yaml:6:39: timeline[0].cpu_hog.nice", "want a nice value from -20 to 19"},
		{"no such node", "{at: 8s, cpu_hog: {node: node-3, for: 3s}}", "t.yaml:6:30: timeline[0].cpu_hog.node", `"node-3" does not exist`},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantProblem(t, problemsOf(t, base+"timeline:\n  - "+c.entry+"\n"), c.at, c.msg)
		})
	}
}

// The plan line says where the hog runs, how many threads, for how long and until when.
func TestCPUHogPlanLine(t *testing.T) {
	p := mustParse(t, base+"timeline:\n  - {at: 8s, cpu_hog: {node: follower, for: 3s, nice: 10}}\n")
	if got := p.Timeline[0].Spec.String(); got != "cpu_hog on follower (cpus threads, nice 10) for 3s" {
		t.Errorf("String %q", got)
	}
	pl, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	pl.Print(&plan)
	if !strings.Contains(plan.String(), "a CPU hog on the host of follower: one busy thread per CPU at nice 10 for 3s (until +11s)") {
		t.Errorf("plan:\n%s", plan.String())
	}
}

// On the local target every node is this machine: hogs that together ask for more threads than
// it has CPUs are named in the plan, with when, which, how many and how nice; within its CPUs,
// or on another target, nothing is said.
func TestCPUHogCrowdNamedInThePlan(t *testing.T) {
	const hogs = "timeline:\n" +
		"  - {at: 8s, cpu_hog: {node: node-0, for: 5s, threads: 256, nice: -20}}\n" +
		"  - {at: 9s, cpu_hog: {node: node-1, for: 5s, threads: 256, nice: -20}}\n" +
		"  - {at: 10s, cpu_hog: {node: node-2, for: 5s, threads: 256}}\n" +
		"  - {at: 20s, cpu_hog: {node: node-2, for: 5s}}\n"
	planOf := func(src string, cpus int, target string) string {
		pl, err := mustParse(t, src).Plan()
		if err != nil {
			t.Fatal(err)
		}
		pl.LocalCPUs, pl.Target = cpus, target
		var b strings.Builder
		pl.Print(&b)
		return b.String()
	}
	want := "note: at +10s the CPU hogs timeline[0], timeline[1], timeline[2] spin 768 threads at once, down to nice -20 (ahead of the engines) on this machine's 2 CPUs: the local target puts every node on it"
	if got := planOf(base+hogs, 2, ""); !strings.Contains(got, want) {
		t.Errorf("plan lacks %q:\n%s", want, got)
	}
	for _, c := range []struct {
		src, target string
		cpus        int
	}{
		{base + hogs, "aws:s1", 2},
		{base + hogs, "local", 1024},
		// One hog of one thread per CPU fills the machine and no more.
		{base + "timeline:\n  - {at: 20s, cpu_hog: {node: node-2, for: 5s}}\n", "", 2},
	} {
		if got := planOf(c.src, c.cpus, c.target); strings.Contains(got, "note: ") {
			t.Errorf("%d CPUs on %q: a note:\n%s", c.cpus, c.target, got)
		}
	}
}
