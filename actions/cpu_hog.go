package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/rig-dev/rig/agent/hog"
	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/rundir"
)

// The cpu_hog action's names in playbooks and events: its start, and its end For later.
const (
	ActCPUHog    rundir.ActionName = "cpu_hog"
	ActCPUHogEnd rundir.ActionName = "cpu_hog_end"
)

// CPUHog is a noisy neighbour on purpose, as a Jepsen nemesis is a fault on purpose: for For,
// Threads threads spin on the host of a server, at Nice, in a process of their own that the
// node's agent starts (agent/hog_handlers.go) — not the engine, not the agent — so the OS
// samples count it as another process's CPU and the analysis names it host_cpu beside this
// action (docs/results.md). It runs on its own timer, so the timeline goes on meanwhile; it
// never outlives the run (the agent kills it at its time, when the run's lease lapses and when
// the agent stops; the run stops it when the timeline ends first).
type CPUHog struct {
	Node    string        `json:"node"`              // leader (the default) | follower | other-follower | node-N
	For     time.Duration `json:"for"`               // how long it spins
	Threads int           `json:"threads,omitempty"` // 0: one per CPU of the node, known when it runs
	Nice    int           `json:"nice,omitempty"`
}

// CPUHogAction is the payload of both cpu_hog events: the node reference and the hog as the
// agent started it (cpu_hog, stamped when it was asked for) and as it ended (cpu_hog_end,
// stamped at its end: Ended, StoppedEarly and Exit set). Times in State are the node's clock.
type CPUHogAction struct {
	As string `json:"as"`
	hog.State
}

// CPUHogger is a run whose nodes' agents start CPU hogs.
type CPUHogger interface {
	// CPUHog starts a hog on node's host and returns it as started (threads resolved).
	CPUHog(ctx context.Context, node string, req hog.Request) (hog.State, error)
	// EndCPUHog waits up to wait for node's hog pid to end by itself, stops it if it has not,
	// and returns how it ended.
	EndCPUHog(ctx context.Context, node string, pid int, wait time.Duration) (hog.State, error)
}

// cpuHogEndWait is how long past its time the action waits for a hog to end by itself before
// it has the agent stop it (marked stopped early).
const cpuHogEndWait = 2 * time.Second

// threadsAll is threads' value for one thread per CPU of the node (the default).
const threadsAll = "cpus"

// CPUHogOf is e's payload when e is a cpu_hog or its cpu_hog_end, else nil.
func CPUHogOf(e rundir.Event) *CPUHogAction {
	return payloadOf[CPUHogAction](e, ActCPUHog, ActCPUHogEnd)
}

func (*CPUHog) Kind() string { return string(ActCPUHog) }
func (*CPUHog) Events() []EventKind {
	payload := func() any { return &CPUHogAction{} }
	return []EventKind{{Name: ActCPUHog, Payload: payload}, {Name: ActCPUHogEnd, Payload: payload}}
}
func (*CPUHog) EndEvent() rundir.ActionName { return ActCPUHogEnd }

// Touches: the hog runs on the node's host beside its engine, killed or not; a power loss of
// the host would leave it spinning through the loss on the local target and end it on a stack.
func (h *CPUHog) Touches() Touch {
	return Touch{Nodes: []string{h.Node}, Needs: LayerHost, For: h.For}
}

func (h *CPUHog) Spins(cpus int) Spin {
	threads := h.Threads
	if threads == 0 {
		threads = cpus
	}
	return Spin{Threads: threads, Nice: h.Nice, For: h.For}
}

func (*CPUHog) Fields() []Field {
	threadsHelp := fmt.Sprintf("1..%d busy threads, or %s (the default: one per CPU of the node)", hog.MaxThreads, threadsAll)
	return []Field{
		textField("node", CheckNodeForm, func(h *CPUHog) *string { return &h.Node }),
		durationField("for", time.Millisecond, hog.MaxFor, "e.g. 3s: how long the hog spins",
			func(h *CPUHog) *time.Duration { return &h.For }),
		{Key: "threads",
			Set: func(s Spec, raw string) error {
				if raw == threadsAll {
					s.(*CPUHog).Threads = 0
					return nil
				}
				v, err := strconv.Atoi(raw)
				if err != nil || v < 1 || v > hog.MaxThreads {
					return fmt.Errorf("%q: want %s", raw, threadsHelp)
				}
				s.(*CPUHog).Threads = v
				return nil
			},
			Get: func(s Spec) string { return threadsOf(s.(*CPUHog).Threads) }},
		intField("nice", func(raw string) (int64, error) { return strconv.ParseInt(raw, 10, 64) }, hog.MinNice, hog.MaxNice,
			fmt.Sprintf("a nice value from %d to %d (0, the default: as the engines; 19: yields to them)", hog.MinNice, hog.MaxNice),
			itoa, func(h *CPUHog) *int { return &h.Nice }),
	}
}

func threadsOf(n int) string {
	if n == 0 {
		return threadsAll
	}
	return strconv.Itoa(n)
}

func (h *CPUHog) Complete(seen map[string]bool) []Problem {
	if !seen["for"] {
		return []Problem{problem("for", "missing", nil, "missing; want how long the hog spins, e.g. for: 3s (it must end inside the run)")}
	}
	return nil
}

func (h *CPUHog) Check(c Context) []Problem {
	return problems(nodeProblem("node", h.Node, c),
		lateProblem("for", "hog-after-end", "the end of the hog", "a hog that ends inside the run (a shorter for: or an earlier at:)", h.For, c))
}

func (h *CPUHog) Describe(v Varied) string {
	threads := "one busy thread per CPU"
	if h.Threads > 0 || v.Varies("threads") {
		threads = v.Value("threads", threadsOf(h.Threads)) + " busy threads"
	}
	s := fmt.Sprintf("a CPU hog on the host of %s: %s", v.Value("node", h.Node), threads)
	if h.Nice != 0 || v.Varies("nice") {
		s += " at nice " + v.Value("nice", strconv.Itoa(h.Nice))
	}
	s += " for " + v.Value("for", units.FormatDuration(h.For))
	if !v.Varies("for") {
		s += fmt.Sprintf(" (until +%s)", units.FormatDuration(v.At()+h.For))
	}
	return s + ", in a process of its own (a noisy neighbour: host_cpu)"
}

func (h *CPUHog) String() string {
	return fmt.Sprintf("cpu_hog on %s (%s threads, nice %d) for %s", h.Node, threadsOf(h.Threads), h.Nice, h.For)
}

func (h *CPUHog) Run(ctx context.Context, env Env) error {
	hg, err := Need[CPUHogger](env, "cpu_hog")
	if err != nil {
		return err
	}
	name, err := env.ResolveNode(h.Node)
	if err != nil {
		return err
	}
	at := time.Now() // the event is stamped when the hog was asked for, as a delay's
	st, err := hg.CPUHog(ctx, name, hog.Request{Threads: h.Threads, Nice: h.Nice, For: h.For.String()})
	if err != nil {
		return fmt.Errorf("cpu_hog on %s: %w", name, err)
	}
	ev, err := h.event(at, name, ActCPUHog, st)
	if err != nil {
		return err
	}
	if err := env.Record(ev); err != nil {
		return err
	}
	env.Progress("cpu_hog on %s (%s): pid %d, %d threads at nice %d for %s", name, h.Node, st.PID, st.Threads, st.Nice, h.For)
	lastFor(ctx, env, h, at, h.For, func(ctx context.Context, early bool) (rundir.Event, error) {
		wait := cpuHogEndWait
		if early {
			wait = 0
		}
		end, err := hg.EndCPUHog(ctx, name, st.PID, wait)
		if err != nil {
			return rundir.Event{}, fmt.Errorf("cpu_hog on %s: end hog %d: %w", name, st.PID, err)
		}
		how := "ended at its time"
		if end.StoppedEarly {
			how = "stopped early"
		}
		env.Progress("cpu_hog on %s: pid %d %s after %s (%s)", name, end.PID, how, end.Ended.Sub(end.Started).Round(time.Millisecond), end.Exit)
		return h.event(at.Add(end.Ended.Sub(end.Started)), name, ActCPUHogEnd, end)
	})
	return nil
}

// event is one of the hog's events, stamped at.
func (h *CPUHog) event(at time.Time, node string, name rundir.ActionName, st hog.State) (rundir.Event, error) {
	b, err := json.Marshal(CPUHogAction{As: h.Node, State: st})
	if err != nil {
		return rundir.Event{}, fmt.Errorf("%s event: %w", name, err)
	}
	return rundir.Event{T: at, Node: node, Action: &rundir.Action{Name: name, Payload: b}}, nil
}
