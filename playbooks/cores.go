package playbooks

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
)

// An agent thread whose idle strategy never sleeps (busy-spin, no-op, yield) takes a core for
// itself whether it has work or not. A plan counts such threads per server from the engine
// settings that pick an idle strategy, and says before the run when they outnumber the cores
// they share: on the local target every server shares this machine, so three Aeron nodes with
// `noop` on a 2-CPU host measure the scheduler, not Aeron. It warns rather than refuses: a run
// may want exactly that contention, and the warning says what the figures then include.

// spinAgent is one agent thread of a server: the setting that picks its idle strategy, and the
// threading-mode setting and modes under which it runs as its own thread (none: always).
type spinAgent struct {
	name     string
	idle     string
	mode     string
	runsWhen []string
}

// spinAgents are an Aeron Cluster node's agent threads (a clustered media driver with its
// archive, and a service container), by Aeron's property names: a playbook whose engine
// declares none of these settings counts none. The consensus module and the service container
// both read aeron.cluster.idle.strategy.
var spinAgents = []spinAgent{
	{name: "media driver (shared)", idle: "aeron.shared.idle.strategy", mode: "aeron.threading.mode", runsWhen: []string{"SHARED"}},
	{name: "media driver conductor", idle: "aeron.conductor.idle.strategy", mode: "aeron.threading.mode", runsWhen: []string{"SHARED_NETWORK", "DEDICATED"}},
	{name: "media driver sender+receiver", idle: "aeron.sharednetwork.idle.strategy", mode: "aeron.threading.mode", runsWhen: []string{"SHARED_NETWORK"}},
	{name: "media driver sender", idle: "aeron.sender.idle.strategy", mode: "aeron.threading.mode", runsWhen: []string{"DEDICATED"}},
	{name: "media driver receiver", idle: "aeron.receiver.idle.strategy", mode: "aeron.threading.mode", runsWhen: []string{"DEDICATED"}},
	{name: "archive", idle: "aeron.archive.idle.strategy", mode: "aeron.archive.threading.mode", runsWhen: []string{"SHARED"}},
	{name: "archive conductor", idle: "aeron.archive.idle.strategy", mode: "aeron.archive.threading.mode", runsWhen: []string{"DEDICATED"}},
	{name: "archive recorder", idle: "aeron.archive.recorder.idle.strategy", mode: "aeron.archive.threading.mode", runsWhen: []string{"DEDICATED"}},
	{name: "archive replayer", idle: "aeron.archive.replayer.idle.strategy", mode: "aeron.archive.threading.mode", runsWhen: []string{"DEDICATED"}},
	{name: "consensus module", idle: "aeron.cluster.idle.strategy"},
	{name: "service container", idle: "aeron.cluster.idle.strategy"},
}

// spinningIdle are the idle strategies that never sleep, by Aeron's aliases and class names.
var spinningIdle = []string{"noop", "spin", "yield", "org.agrona.concurrent.NoOpIdleStrategy",
	"org.agrona.concurrent.BusySpinIdleStrategy", "org.agrona.concurrent.YieldingIdleStrategy"}

// SpinningThreads are the agent threads of one server whose idle strategy never sleeps, by
// name (e.g. "consensus module (aeron.cluster.idle.strategy noop)"), from the engine settings
// asked or at their default.
func (e Engine) SpinningThreads() []string {
	asked := e.Settings()
	var out []string
	for _, a := range spinAgents {
		idle, ok := asked[a.idle]
		if !ok || !slices.Contains(spinningIdle, idle) {
			continue
		}
		if a.mode != "" {
			if m, ok := asked[a.mode]; !ok || !slices.Contains(a.runsWhen, m) {
				continue
			}
		}
		out = append(out, fmt.Sprintf("%s (%s %s)", a.name, a.idle, idle))
	}
	return out
}

// CoresWarning says when the playbook's spinning threads outnumber the cores they share ("":
// they do not, or none spins). cpus > 0 is the one host every server shares (the local target):
// all servers' threads count against it, less one CPU kept for the client and the rig. cpus 0
// is a server per instance, which the playbook does not size: it says how many cores each
// server needs.
func (p *Playbook) CoresWarning(cpus int) string {
	threads := p.Engine.SpinningThreads()
	if len(threads) == 0 {
		return ""
	}
	if cpus <= 0 {
		return fmt.Sprintf("each server spins %d thread(s): %s; each needs a core of its own on the server's instance, or the figures include the scheduler",
			len(threads), strings.Join(threads, ", "))
	}
	total := p.Cluster.Servers * len(threads)
	if total <= cpus-1 {
		return ""
	}
	return fmt.Sprintf("%d servers × %d spinning thread(s) = %d threads that never sleep, on a host with %d CPUs (one kept for the client and the rig): "+
		"they cannot each have a core, so the run measures them taking turns, not the engine: %s",
		p.Cluster.Servers, len(threads), total, cpus, strings.Join(threads, ", "))
}

// CoresWarnings are the plan's runs' CoresWarning on its target, each once, naming the matrix
// values of the runs it is about.
func (pl *Plan) CoresWarnings(cpus int) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range pl.Runs {
		w := r.Playbook.CoresWarning(cpus)
		if w == "" || seen[w] {
			continue
		}
		seen[w] = true
		// The matrix values that pick idle strategies and threading modes: what makes it spin.
		picked := map[string]string{}
		for _, a := range spinAgents {
			for _, k := range []string{"engine." + a.idle, "engine." + a.mode} {
				if v, ok := r.Settings[k]; ok {
					picked[k] = v
				}
			}
		}
		if len(picked) > 0 {
			w = "in the runs with " + settingsText(picked) + ": " + w
		}
		out = append(out, w)
	}
	return out
}

// hostCPUs is the CPUs the plan's servers share: this machine's on the local target, 0 (each
// server on an instance of its own) on a stack.
func (pl *Plan) hostCPUs() int {
	if pl.Target == "" || pl.Target == "local" {
		return runtime.NumCPU()
	}
	return 0
}

func settingsText(m map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kv = append(kv, k+"="+m[k])
	}
	return strings.Join(kv, ", ")
}
