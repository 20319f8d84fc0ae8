// Package hog is a noisy neighbour on purpose (the cpu_hog timeline action, actions/cpu_hog.go):
// a process that keeps CPUs busy for a while. The agent starts it as a process of its own
// (`rig agent hog`, agent/hog_handlers.go), so the OS samples count its CPU as another
// process's (analysis: host_cpu), not the agent's. Its wire types live here so the agent, its
// client and the action share them.
package hog

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rig-dev/rig/internal/units"
)

// Limits of a hog's settings; the action checks the same bounds where the playbook is parsed.
const (
	MaxThreads = 256
	MinNice    = -20
	MaxNice    = 19
	// MaxFor is the longest a hog spins: the playbook's longest duration, so the agent takes
	// whatever a playbook may ask for, and its kill deadline (for + the overrun) never overflows.
	MaxFor = units.MaxDuration
)

// Ready is the line a hog writes on stdout once every thread is set up and spinning: the agent
// answers the request only then, so a hog that cannot start (a nice it may not take) fails it.
const Ready = "ready"

// Request asks the agent for a hog (POST /v1/hog).
type Request struct {
	Threads int    `json:"threads,omitempty"` // 0: the node's CPU count
	Nice    int    `json:"nice,omitempty"`
	For     string `json:"for"` // Go duration
}

// State is a hog as the agent knows it; times are the node's clock.
type State struct {
	PID     int       `json:"pid"`
	Threads int       `json:"threads"`
	Nice    int       `json:"nice"`
	ForMs   float64   `json:"for_ms"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"` // zero while it runs
	// StoppedEarly: it was stopped before its time was up (the run ended, its lease lapsed,
	// the agent stopped), or killed because it overran it.
	StoppedEarly bool   `json:"stopped_early,omitempty"`
	Exit         string `json:"exit,omitempty"` // how the process ended
}

// Check checks a request's settings (threads 0 takes the node's CPU count).
func (r Request) Check() (time.Duration, error) {
	d, err := time.ParseDuration(r.For)
	if err != nil || d <= 0 || d > MaxFor {
		return 0, fmt.Errorf("hog for %q: want a Go duration from 1ns to %s", r.For, units.FormatDuration(MaxFor))
	}
	if r.Threads < 0 || r.Threads > MaxThreads {
		return 0, fmt.Errorf("hog threads %d: want 1 to %d (0: one per CPU)", r.Threads, MaxThreads)
	}
	if r.Nice < MinNice || r.Nice > MaxNice {
		return 0, fmt.Errorf("hog nice %d: want %d to %d", r.Nice, MinNice, MaxNice)
	}
	return d, nil
}

// Args are the hog subcommand's arguments after `rig agent hog` for settings already checked.
func Args(threads, nice int, d time.Duration) []string {
	return []string{"--threads", fmt.Sprint(threads), "--nice", fmt.Sprint(nice), "--for", d.String()}
}

// spinBatch is how many iterations a thread spins between looks at the clock (about a
// millisecond): the deadline costs nothing next to the spinning.
const spinBatch = 1 << 20

// Main is the hog process (`rig agent hog --threads N --for D [--nice N]`): N threads, each
// locked to an OS thread at the given nice and pinned to one of the CPUs the process may use
// (in turn), spin until D after it started, and it exits 0. It writes Ready on stdout once they
// all spin; a setting it cannot take is an error on stderr and exit 1 before anything spins
// for long.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rig agent hog", flag.ContinueOnError)
	fs.SetOutput(stderr)
	threads := fs.Int("threads", runtime.NumCPU(), "busy threads")
	nice := fs.Int("nice", 0, "the threads' nice value")
	d := fs.Duration("for", 0, "how long to spin")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	_, err := (Request{Threads: *threads, Nice: *nice, For: d.String()}).Check()
	if err == nil && *threads == 0 {
		err = fmt.Errorf("hog threads 0: want 1 to %d", MaxThreads)
	}
	if err != nil {
		fmt.Fprintf(stderr, "rig agent hog: %v\n", err)
		return 2
	}
	if err := Spin(*threads, *nice, *d, func() { fmt.Fprintln(stdout, Ready) }); err != nil {
		fmt.Fprintf(stderr, "rig agent hog: %v\n", err)
		return 1
	}
	return 0
}

// Spin keeps threads OS threads busy until d from now (a deadline computed once), each at nice
// and pinned to one of the CPUs this process may use, in turn; ready runs once every thread is
// set up. It returns an error, before spinning, when a thread cannot take the nice.
func Spin(threads, nice int, d time.Duration, ready func()) error {
	end := time.Now().Add(d)
	runtime.GOMAXPROCS(threads)
	var cpus []int
	var allowed unix.CPUSet
	if unix.SchedGetaffinity(0, &allowed) == nil {
		for c := 0; len(cpus) < allowed.Count(); c++ {
			if allowed.IsSet(c) {
				cpus = append(cpus, c)
			}
		}
	}
	set := make(chan error, threads)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range threads {
		wg.Go(func() {
			// Locked and never unlocked: the thread's nice and affinity die with it.
			runtime.LockOSThread()
			// On Linux a nice is a thread's (who 0: the calling thread), so each sets its own.
			if err := unix.Setpriority(unix.PRIO_PROCESS, 0, nice); err != nil {
				set <- fmt.Errorf("set nice %d: %w", nice, err)
				return
			}
			if len(cpus) > 0 {
				var one unix.CPUSet
				one.Set(cpus[i%len(cpus)])
				_ = unix.SchedSetaffinity(0, &one) // best effort: the thread spins wherever it is
			}
			set <- nil
			<-start
			spin(end)
		})
	}
	var err error
	for range threads {
		if e := <-set; e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		end = time.Now() // the threads that took the nice stop at once
	}
	close(start)
	if err == nil && ready != nil {
		ready()
	}
	wg.Wait()
	return err
}

// spinSink keeps the compiler from dropping the spin loop's work.
var spinSink atomic.Uint64

func spin(end time.Time) {
	var x uint64
	for time.Now().Before(end) {
		for i := range uint64(spinBatch) {
			x ^= i * 0x9e3779b97f4a7c15
		}
	}
	spinSink.Add(x)
}
