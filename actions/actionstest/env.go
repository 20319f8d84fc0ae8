// Package actionstest is a fake actions.Env for the tests of an action kind: it resolves node
// references on a cluster of its own, notes every call a kind makes in order, keeps the events
// as events.jsonl would (through their JSON) and answers from results a test scripts. It has the
// core of Env and no capability, as the run of a bare target; a test that needs one embeds *Env
// in a type of its own with the capability's methods, and notes their calls with Note, so one
// ordered list holds them all.
//
// It imports nothing of actions, so the kinds' own tests (package actions) can use it.
package actionstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rig-dev/rig/rundir"
)

// Env is the fake. Set its fields before handing it to a kind; read what the kind did through
// Calls, Events, Lines and Settle.
type Env struct {
	// Servers is the cluster's size: node-0 … node-(Servers-1).
	Servers int
	// LeaderNode is Leader's answer and what "leader" resolves to; "" when there is none.
	LeaderNode string
	// Down are servers that are not followers to resolve (killed, cut off).
	Down map[string]bool

	// Each On… answers its method after the call is noted; nil answers nil (and an empty body).
	OnAdmin    func(node, path string) ([]byte, error)
	OnSignal   func(node, as, signal string) error
	OnRelaunch func(node string) error
	OnWait     func(node, phase string, timeout time.Duration) error
	OnRecord   func(e rundir.Event) error // an error here is Record's, and the event is not kept

	mu     sync.Mutex
	calls  []string
	events []rundir.Event
	lines  []string
	wg     sync.WaitGroup
	goErrs []error
}

// NewEnv is a three-server cluster led by node-0.
func NewEnv() *Env { return &Env{Servers: 3, LeaderNode: "node-0"} }

// Note adds a call to the ordered list: a capability's method in a test's own type calls it.
func (e *Env) Note(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, fmt.Sprintf(format, args...))
}

// Calls are the calls noted so far, in order, one line each: "resolve follower",
// "admin node-0 /snapshot", "signal node-0 TERM", "relaunch node-0", "wait node-0 down 5s",
// "record step_down" (a note "record note"), and whatever a test's capabilities noted.
func (e *Env) Calls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.calls...)
}

// Events are the events recorded so far, as read back from their JSON.
func (e *Env) Events() []rundir.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]rundir.Event(nil), e.events...)
}

// Lines are the progress lines printed so far.
func (e *Env) Lines() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.lines...)
}

// Settle waits until every function handed to Go has returned, and returns their errors.
func (e *Env) Settle() error {
	e.wg.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	return errors.Join(e.goErrs...)
}

func (e *Env) Leader() string { return e.LeaderNode }

// ResolveNode resolves as the runner does: leader is LeaderNode; follower and other-follower the
// first and second servers (in name order) neither leading nor Down; node-N itself when the
// cluster has it.
func (e *Env) ResolveNode(ref string) (string, error) {
	e.Note("resolve %s", ref)
	switch ref {
	case "leader":
		if e.LeaderNode == "" {
			return "", errors.New("no leader")
		}
		return e.LeaderNode, nil
	case "follower", "other-follower":
		if e.LeaderNode == "" {
			return "", errors.New("no leader, so no follower")
		}
		var fs []string
		for i := range e.Servers {
			if n := "node-" + strconv.Itoa(i); n != e.LeaderNode && !e.Down[n] {
				fs = append(fs, n)
			}
		}
		if len(fs) == 0 {
			return "", errors.New("no running follower")
		}
		if ref == "other-follower" && len(fs) > 1 {
			return fs[1], nil
		}
		return fs[0], nil
	}
	if n, ok := strings.CutPrefix(ref, "node-"); ok {
		if i, err := strconv.Atoi(n); err == nil && i >= 0 && i < e.Servers {
			return ref, nil
		}
		return "", fmt.Errorf("%s: the cluster has node-0 to node-%d", ref, e.Servers-1)
	}
	return "", fmt.Errorf("node %q: want leader, follower, other-follower or node-N", ref)
}

func (e *Env) Admin(_ context.Context, node, path string) ([]byte, error) {
	e.Note("admin %s %s", node, path)
	if e.OnAdmin == nil {
		return nil, nil
	}
	return e.OnAdmin(node, path)
}

func (e *Env) Signal(_ context.Context, node, as, signal string) error {
	e.Note("signal %s %s", node, signal)
	if e.OnSignal == nil {
		return nil
	}
	return e.OnSignal(node, as, signal)
}

func (e *Env) Relaunch(_ context.Context, node string) error {
	e.Note("relaunch %s", node)
	if e.OnRelaunch == nil {
		return nil
	}
	return e.OnRelaunch(node)
}

func (e *Env) Wait(_ context.Context, node, phase string, timeout time.Duration) error {
	e.Note("wait %s %s %s", node, phase, timeout)
	if e.OnWait == nil {
		return nil
	}
	return e.OnWait(node, phase, timeout)
}

// Record keeps ev as the run's event log does: stamped now when it has no time, and through its
// JSON, so a payload the file format would lose is lost here too.
func (e *Env) Record(ev rundir.Event) error {
	what := "note"
	if ev.Action != nil {
		what = string(ev.Action.Name)
	}
	e.Note("record %s", what)
	if e.OnRecord != nil {
		if err := e.OnRecord(ev); err != nil {
			return err
		}
	}
	if ev.T.IsZero() {
		ev.T = time.Now()
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	var back rundir.Event
	if err := json.Unmarshal(b, &back); err != nil {
		return fmt.Errorf("decode event %s: %w", b, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, back)
	return nil
}

func (e *Env) Progress(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lines = append(e.lines, fmt.Sprintf(format, args...))
}

// Go runs fn beside the caller; Settle waits for it and returns its error.
func (e *Env) Go(ctx context.Context, fn func(context.Context) error) {
	e.wg.Go(func() {
		if err := fn(ctx); err != nil {
			e.mu.Lock()
			e.goErrs = append(e.goErrs, err)
			e.mu.Unlock()
		}
	})
}
