// Package ready waits, after `rig up`, until a stack's nodes can be used: each node answers SSH
// with the host key its inventory pins (infra/hostkey derived it before the node existed) and
// cloud-init has finished booting it (it writes /var/lib/cloud/instance/boot-finished last, after
// every module of the final stage). Until then `rig run` would race cloud-init: sshd may not
// listen yet, the data volume's device may not be there, packages may still be installing.
//
// The wait is bounded (Options.Timeout) and says how each node is doing, one line whenever a
// node's state changes and a summary of the pending ones every Options.Heartbeat. A host key
// that is not the pinned one is refused at once and never accepted, however long the wait: the
// host key is written by cloud-init before sshd starts, so a different key is another machine,
// not an early one. A login refused for the client keys is reported at once too, since waiting
// does not change which keys are offered.
package ready

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/transport"
	"github.com/rig-dev/rig/transport/sshx"
)

// BootFinished is the file cloud-init writes when it has finished booting an instance
// (cloud-init's docs, "Boot stages": the final stage ends by writing it).
const BootFinished = "/var/lib/cloud/instance/boot-finished"

// Options say how to reach the nodes and how long to wait for them.
type Options struct {
	// Transport reaches the nodes; it must verify host keys against the inventory (transport/sshx
	// does). Required.
	Transport transport.Transport
	// Timeout bounds the whole wait; it must be positive.
	Timeout time.Duration
	// Interval is the pause between two tries on a node that is not ready (default 5 s).
	Interval time.Duration
	// Heartbeat is how often the nodes still pending are listed (default 1 min; <0: never).
	Heartbeat time.Duration
	// Marker is the file whose existence means cloud-init has finished (default BootFinished).
	Marker string
	// Packages are what cloud-init's package step installs (spec.NodePackages): once the marker
	// exists, each one's command must be on the node's PATH, or the node fails at once with a
	// *PackageError (cloud-init has finished, so waiting longer would not install it).
	Packages []Package
	// Out gets the progress lines; nil means io.Discard.
	Out io.Writer
	// Now is the clock for the durations printed (default time.Now).
	Now func() time.Time
}

// State is what the last try on a node found.
type State int

const (
	Unknown    State = iota // not tried yet
	NoSSH                   // ssh did not answer (not listening yet, handshake cut, timeout)
	Booting                 // ssh answers with the pinned key; cloud-init has not finished
	Ready                   // ssh answers with the pinned key and cloud-init has finished
	Refused                 // the host key is not the pinned one, or the login was refused
	Incomplete              // cloud-init has finished without installing a package it was given
	CheckError              // the check ran and failed in an unexpected way
)

// Node is one node's outcome.
type Node struct {
	Name   string
	State  State
	Detail string        // what the last try said, for the states but Ready
	After  time.Duration // how long the node took, for Ready
}

// NotReadyError lists the nodes that were not ready when the wait ended.
type NotReadyError struct {
	Timeout time.Duration
	Pending []Node // in inventory order
	Cause   error  // why the wait ended: context.DeadlineExceeded at the timeout, or the caller's
}

func (e *NotReadyError) Error() string {
	var parts []string
	for _, n := range e.Pending {
		parts = append(parts, n.Name+" ("+n.Detail+")")
	}
	why := fmt.Sprintf("after %s", e.Timeout)
	if !errors.Is(e.Cause, context.DeadlineExceeded) {
		why = fmt.Sprintf("when the wait ended (%v)", e.Cause)
	}
	return fmt.Sprintf("%d node(s) not ready %s: %s", len(e.Pending), why, strings.Join(parts, "; "))
}

func (e *NotReadyError) Unwrap() error { return e.Cause }

// RefusedError is a node that cannot become ready by waiting: its host key is not the pinned one
// (matches transport.ErrHostKey) or it refused every client key (matches sshx.ErrAuth).
type RefusedError struct {
	Node string
	Err  error
}

func (e *RefusedError) Error() string {
	if errors.Is(e.Err, transport.ErrHostKey) {
		return fmt.Sprintf("%s refused: %v (nothing was sent to it; the stack's pinned keys come from its hostKeySeed)", e.Node, e.Err)
	}
	return fmt.Sprintf("%s refused: %v (the stack's rig:publicKey must be the public half of an --ssh-key or ssh-agent key)", e.Node, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Package is one package of cloud-init's package step and the command that shows it is installed.
type Package struct{ Name, Command string }

// PackageError is a node on which cloud-init finished, but its package step left packages out:
// the package_update or the install failed (no route to the mirrors yet, a mirror down, a name
// the distribution lacks). The node stays as it is until someone installs them or replaces it.
type PackageError struct {
	Node    string
	Missing []string // package names, in Options.Packages order
	Marker  string
}

func (e *PackageError) Error() string {
	return fmt.Sprintf("%s: cloud-init finished (%s) but its package step (package_update, packages: %s) did not install %s: "+
		"read /var/log/cloud-init-output.log on the node (rig ssh --stack NAME %s -- sudo tail -n 50 /var/log/cloud-init-output.log); "+
		"install them by hand or replace the node (pulumi up --replace its instance's URN)",
		e.Node, e.Marker, strings.Join(e.Missing, ", "), strings.Join(e.Missing, ", "), e.Node)
}

// Wait returns nil once every node is Ready. It returns a *RefusedError as soon as a node is
// Refused, a *PackageError as soon as a node has finished cloud-init without a package, and a *NotReadyError naming every node not ready when the timeout passes or ctx ends.
// The result lists every node's outcome in the order given.
func Wait(ctx context.Context, nodes []inventory.Node, o Options) ([]Node, error) {
	if o.Transport == nil {
		return nil, errors.New("ready: no transport")
	}
	if o.Timeout <= 0 {
		return nil, fmt.Errorf("ready: timeout %s: want a positive duration", o.Timeout)
	}
	if o.Interval <= 0 {
		o.Interval = 5 * time.Second
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = time.Minute
	}
	if o.Marker == "" {
		o.Marker = BootFinished
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	w := &waiter{o: o, start: o.Now(), nodes: make([]Node, len(nodes))}
	for i, n := range nodes {
		w.nodes[i] = Node{Name: n.Name, Detail: "not tried yet"}
	}
	w.printf("rig: waiting up to %s for %d node(s) to answer ssh with their pinned host keys and finish cloud-init (%s)\n",
		o.Timeout, len(nodes), o.Marker)

	tctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var refused error
	var once sync.Once
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.node(tctx, i, n); err != nil {
				once.Do(func() { refused = err; cancel() })
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if o.Heartbeat > 0 {
		tick := time.NewTicker(o.Heartbeat)
	beat:
		for {
			select {
			case <-done:
				break beat
			case <-tick.C:
				w.heartbeat()
			}
		}
		tick.Stop()
	}
	<-done

	out := w.snapshot()
	if refused != nil {
		return out, refused
	}
	var pending []Node
	for _, n := range out {
		if n.State != Ready {
			pending = append(pending, n)
		}
	}
	if len(pending) > 0 {
		cause := tctx.Err()
		if ctx.Err() != nil {
			cause = ctx.Err()
		}
		return out, &NotReadyError{Timeout: o.Timeout, Pending: pending, Cause: cause}
	}
	w.printf("rig: all %d node(s) ready after %s\n", len(out), w.since())
	return out, nil
}

type waiter struct {
	o     Options
	start time.Time

	mu    sync.Mutex
	nodes []Node
}

func (w *waiter) printf(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintf(w.o.Out, format, args...)
}

func (w *waiter) since() time.Duration { return w.o.Now().Sub(w.start).Round(time.Second) }

func (w *waiter) snapshot() []Node {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Node(nil), w.nodes...)
}

// set records node i's state and prints a line when the state or its detail changed.
func (w *waiter) set(i int, st State, detail string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := &w.nodes[i]
	if n.State == st && n.Detail == detail {
		return
	}
	n.State, n.Detail = st, detail
	if st == Ready {
		n.After = w.o.Now().Sub(w.start).Round(time.Second)
		fmt.Fprintf(w.o.Out, "  %s: ready after %s\n", n.Name, n.After)
		return
	}
	fmt.Fprintf(w.o.Out, "  %s: %s\n", n.Name, detail)
}

// firstAnswer sets node i to NoSSH with detail if no try on it has ended yet.
func (w *waiter) firstAnswer(i int, detail string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.nodes[i].State == Unknown {
		w.nodes[i].State, w.nodes[i].Detail = NoSSH, detail
	}
}

func (w *waiter) heartbeat() {
	w.mu.Lock()
	defer w.mu.Unlock()
	var pending []string
	for _, n := range w.nodes {
		if n.State != Ready {
			pending = append(pending, n.Name)
		}
	}
	if len(pending) == 0 {
		return
	}
	sort.Strings(pending)
	fmt.Fprintf(w.o.Out, "rig: still waiting after %s for %s\n", w.o.Now().Sub(w.start).Round(time.Second), strings.Join(pending, ", "))
}

// missingExit is the check's exit status when the marker exists and a package's command does not.
const missingExit = 3

// checkCmd tests for the marker and then for each package's command, printing the names of the
// missing packages, one a line.
func (w *waiter) checkCmd() transport.Cmd {
	if len(w.o.Packages) == 0 {
		return transport.Cmd{Args: []string{"test", "-e", w.o.Marker}}
	}
	script := `test -e "$1" || exit 1; shift; m=0; while [ $# -gt 0 ]; do command -v "$2" >/dev/null 2>&1 || { echo "$1"; m=1; }; shift 2; done; [ $m = 0 ] || exit ` +
		fmt.Sprint(missingExit)
	args := []string{"sh", "-c", script, "rig-ready", w.o.Marker}
	for _, p := range w.o.Packages {
		args = append(args, p.Name, p.Command)
	}
	return transport.Cmd{Args: args}
}

// node tries node n until it is ready, it is refused or incomplete (the error returned) or ctx ends.
func (w *waiter) node(ctx context.Context, i int, n inventory.Node) error {
	check := w.checkCmd()
	for {
		res, err := w.o.Transport.Exec(ctx, n, check)
		var ee *transport.ExitError
		switch {
		case err == nil:
			w.set(i, Ready, "")
			return nil
		case ctx.Err() != nil:
			// The wait is over; the last state stands, but a node whose first try was cut
			// short has not answered at all.
			w.firstAnswer(i, "ssh did not answer within the wait: "+lastLine(err))
			return nil
		case errors.Is(err, transport.ErrHostKey), errors.Is(err, sshx.ErrAuth):
			w.set(i, Refused, "refused: "+err.Error())
			return &RefusedError{Node: n.Name, Err: err}
		case errors.As(err, &ee) && ee.ExitCode == 1:
			w.set(i, Booting, "ssh answers with its pinned host key; cloud-init has not finished ("+w.o.Marker+" absent)")
		case errors.As(err, &ee) && ee.ExitCode == missingExit && len(w.o.Packages) > 0:
			pe := &PackageError{Node: n.Name, Missing: strings.Fields(string(res.Stdout)), Marker: w.o.Marker}
			w.set(i, Incomplete, "cloud-init finished without "+strings.Join(pe.Missing, ", "))
			return pe
		case errors.As(err, &ee):
			w.set(i, CheckError, fmt.Sprintf("checking for %s failed: %v", w.o.Marker, err))
		case errors.Is(err, transport.ErrUnreachable):
			w.set(i, NoSSH, "ssh does not answer yet: "+lastLine(err))
		default:
			w.set(i, CheckError, err.Error())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(w.o.Interval):
		}
	}
}

// lastLine keeps the cause of a transport error short: the wrapped chain repeats the node.
func lastLine(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "+transport.ErrUnreachable.Error()+": "); i >= 0 {
		return s[i+len(": "+transport.ErrUnreachable.Error()+": "):]
	}
	return s
}
