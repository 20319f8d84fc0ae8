package automation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/blang/semver"
)

// fakeCLI stands in for the pulumi CLI behind auto.Pulumi: it keeps stacks, config and outputs in
// memory, answers the commands the Automation API sends, and records every call and the order of
// destructive ones in a log the tests share with their archive destinations.
type fakeCLI struct {
	mu     sync.Mutex
	stacks map[string]*fakeStack
	calls  []fakeCall
	log    *eventLog
	// outputsAfterUp is what `up` exports for a stack.
	outputsAfterUp func(stack string) map[string]any
	// upFails makes `up` fail with this message after creating the VPC (written to stderr and
	// as an error diagnostic event).
	upFails string
	// upFailsOn is the instance the failure is about (default node-0).
	upFailsOn string
	// previewSteps are the steps `preview` reports, each "op type name [keys,…]"; none means an
	// update that changes nothing.
	previewSteps []string
}

// previewEvents is what the engine reports for a preview of the steps given.
func previewEvents(stack string, steps []string) []string {
	lines := []string{`{"sequence":0,"timestamp":1,"preludeEvent":{"config":{}}}`}
	for i, s := range steps {
		f := strings.Fields(s)
		keys := "[]"
		if len(f) > 3 {
			b, _ := json.Marshal(strings.Split(f[3], ","))
			keys = string(b)
		}
		lines = append(lines, fmt.Sprintf(`{"sequence":%d,"timestamp":1,"resourcePreEvent":{"metadata":{"op":%q,"urn":%q,"type":%q,"keys":%s}}}`,
			i+1, f[0], "urn:pulumi:"+stack+"::rig::"+f[1]+"::"+f[2], f[1], keys))
	}
	return append(lines, `{"sequence":99,"timestamp":1,"summaryEvent":{"maybeCorrupt":false,"durationSeconds":1,"resourceChanges":{}}}`)
}

// upEvents is what the engine reports for an update that creates a VPC and an instance (or fails
// on the instance).
func upEvents(stack, fail, failNode string) []string {
	if failNode == "" {
		failNode = "node-0"
	}
	urn := func(typ, name string) string { return "urn:pulumi:" + stack + "::rig::" + typ + "::" + name }
	ev := func(kind, op, typ, name string) string {
		return fmt.Sprintf(`{"sequence":1,"timestamp":1,%q:{"metadata":{"op":%q,"urn":%q,"type":%q}}}`, kind, op, urn(typ, name), typ)
	}
	lines := []string{
		`{"sequence":0,"timestamp":1,"preludeEvent":{"config":{}}}`,
		ev("resourcePreEvent", "create", "pulumi:pulumi:Stack", "rig-"+stack),
		ev("resourcePreEvent", "create", "aws:ec2/vpc:Vpc", "rig-vpc"),
		ev("resOutputsEvent", "create", "aws:ec2/vpc:Vpc", "rig-vpc"),
		ev("resourcePreEvent", "create", "aws:ec2/instance:Instance", "node-0"),
	}
	if fail != "" {
		return append(lines, fmt.Sprintf(`{"sequence":9,"timestamp":1,"diagnosticEvent":{"urn":%q,"message":%q,"color":"never","severity":"error"}}`,
			urn("aws:ec2/instance:Instance", failNode), fail),
			ev("resOpFailedEvent", "create", "aws:ec2/instance:Instance", "node-0"))
	}
	return append(lines, ev("resOutputsEvent", "create", "aws:ec2/instance:Instance", "node-0"),
		`{"sequence":10,"timestamp":1,"summaryEvent":{"maybeCorrupt":false,"durationSeconds":1,"resourceChanges":{"create":2}}}`)
}

type fakeStack struct {
	config    map[string]string
	secret    map[string]bool
	outputs   map[string]any
	resources int
}

type fakeCall struct {
	args []string
	env  []string
}

type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

func newFakeCLI(log *eventLog) *fakeCLI {
	return &fakeCLI{stacks: map[string]*fakeStack{}, log: log}
}

func (f *fakeCLI) Version() semver.Version { return semver.MustParse("3.200.0") }

func (f *fakeCLI) commands() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out [][]string
	for _, c := range f.calls {
		out = append(out, c.args)
	}
	return out
}

// ran reports whether some call starts with the given words.
func (f *fakeCLI) ran(words ...string) bool {
	for _, c := range f.commands() {
		if len(c) >= len(words) && slices.Equal(c[:len(words)], words) {
			return true
		}
	}
	return false
}

func (f *fakeCLI) Run(ctx context.Context, workdir string, stdin io.Reader, outs, errOuts []io.Writer,
	env []string, args ...string) (string, string, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fakeCall{args: slices.Clone(args), env: slices.Clone(env)})

	var stack string
	var rest []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--stack" && i+1 < len(args) {
			stack = args[i+1]
			i++
			continue
		}
		rest = append(rest, args[i])
	}
	fail := func(format string, a ...any) (string, string, int, error) {
		msg := fmt.Sprintf(format, a...)
		return "", msg, 255, errors.New(msg)
	}
	st := f.stacks[stack]
	need := func() bool { return st != nil }
	jsonOut := func(v any) (string, string, int, error) {
		b, _ := json.Marshal(v)
		return string(b), "", 0, nil
	}
	switch {
	case len(rest) >= 2 && rest[0] == "stack" && rest[1] == "select":
		if !need() {
			return fail("error: no stack named '%s' found", stack)
		}
		return "", "", 0, nil
	case len(rest) >= 3 && rest[0] == "stack" && rest[1] == "init":
		name := rest[2]
		if f.stacks[name] != nil {
			return fail("error: stack '%s' already exists", name)
		}
		f.stacks[name] = &fakeStack{config: map[string]string{}, secret: map[string]bool{}}
		return "", "", 0, nil
	case len(rest) >= 2 && rest[0] == "stack" && rest[1] == "ls":
		var list []map[string]any
		var names []string
		for n := range f.stacks {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			list = append(list, map[string]any{"name": n, "current": false, "updateInProgress": false, "resourceCount": f.stacks[n].resources})
		}
		return jsonOut(list)
	case len(rest) >= 2 && rest[0] == "stack" && rest[1] == "output":
		if !need() {
			return fail("error: no stack named '%s' found", stack)
		}
		if st.outputs == nil {
			return "{}", "", 0, nil
		}
		return jsonOut(st.outputs)
	case len(rest) >= 2 && rest[0] == "stack" && rest[1] == "history":
		return jsonOut([]map[string]any{{"version": 1, "kind": "update", "startTime": "2025-06-01T12:00:00Z", "result": "succeeded"}})
	case len(rest) >= 2 && rest[0] == "config" && rest[1] == "set":
		if !need() {
			return fail("error: no stack named '%s' found", stack)
		}
		// config set <key> --secret|--plaintext -- <value>
		key, val := rest[2], rest[len(rest)-1]
		st.config[key] = val
		st.secret[key] = slices.Contains(rest, "--secret")
		return "", "", 0, nil
	case len(rest) >= 3 && rest[0] == "config" && rest[1] == "rm":
		if !need() {
			return fail("error: no stack named '%s' found", stack)
		}
		delete(st.config, rest[2])
		return "", "", 0, nil
	case len(rest) >= 2 && rest[0] == "stack" && rest[1] == "export":
		if !need() {
			return fail("error: no stack named '%s' found", stack)
		}
		var res []map[string]any
		if st.resources > 0 {
			res = append(res, map[string]any{"urn": "urn:pulumi:" + stack + "::rig::pulumi:pulumi:Stack::rig-" + stack, "type": "pulumi:pulumi:Stack"},
				map[string]any{"urn": "urn:pulumi:" + stack + "::rig::aws:ec2/vpc:Vpc::rig-vpc", "type": "aws:ec2/vpc:Vpc", "id": "vpc-0abc"})
		}
		return jsonOut(map[string]any{"version": 3, "deployment": map[string]any{"resources": res}})
	case len(rest) >= 1 && rest[0] == "up":
		if !need() {
			return fail("error: no stack named '%s' found", stack)
		}
		if i := slices.Index(args, "--event-log"); i >= 0 && i+1 < len(args) {
			body := strings.Join(upEvents(stack, f.upFails, f.upFailsOn), "\n") + "\n"
			if err := os.WriteFile(args[i+1], []byte(body), 0o600); err != nil {
				return fail("write event log: %v", err)
			}
			// The real CLI runs for seconds after it creates the log. Ending microseconds later
			// races the Automation API's tailer (nxadm/tail), which may still be waiting for the
			// file's creation and then picks "stop at EOF" over "created", reading no event.
			time.Sleep(100 * time.Millisecond)
		}
		for _, w := range outs {
			fmt.Fprintf(w, "Updating (%s):\n + rig-vpc created\nResources:\n    + 17 created\n", stack)
		}
		f.log.add("up " + stack)
		if f.upFails != "" {
			st.resources = 2
			return "", f.upFails, 255, errors.New(f.upFails)
		}
		st.outputs = f.outputsAfterUp(stack)
		st.resources = 17
		return "update done", "", 0, nil
	case len(rest) >= 1 && rest[0] == "preview":
		if !need() {
			return fail("error: no stack named '%s' found", stack)
		}
		if i := slices.Index(args, "--event-log"); i >= 0 && i+1 < len(args) {
			body := strings.Join(previewEvents(stack, f.previewSteps), "\n") + "\n"
			if err := os.WriteFile(args[i+1], []byte(body), 0o600); err != nil {
				return fail("write event log: %v", err)
			}
			time.Sleep(100 * time.Millisecond) // see up
		}
		f.log.add("preview " + stack)
		return "preview done", "", 0, nil
	case len(rest) >= 1 && rest[0] == "destroy" && slices.ContainsFunc(rest, func(a string) bool { return strings.HasPrefix(a, "--target=") }):
		if !need() {
			return fail("error: no stack named '%s' found", stack)
		}
		var targets []string
		for _, a := range rest {
			if urn, ok := strings.CutPrefix(a, "--target="); ok {
				targets = append(targets, urn[strings.LastIndex(urn, "::")+2:])
			}
		}
		f.log.add("destroy " + stack + " --target " + strings.Join(targets, " "))
		return "destroy done", "", 0, nil
	case len(rest) >= 1 && rest[0] == "destroy":
		if !need() {
			return fail("error: no stack named '%s' found", stack)
		}
		for _, w := range outs {
			fmt.Fprintf(w, "Destroying (%s):\n - 17 deleted\n", stack)
		}
		f.log.add("destroy " + stack)
		st.outputs, st.resources = nil, 0
		return "destroy done", "", 0, nil
	}
	return fail("fake pulumi: unsupported command %q", strings.Join(args, " "))
}
