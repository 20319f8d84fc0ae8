package automation

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"

	"github.com/rig-dev/rig/infra/spec"
)

// progress turns Pulumi's engine events into one line per resource step, and says while the
// program is being built: the first `pulumi up` compiles the program and pulumi-aws, which takes
// many minutes on a small machine, and the CLI prints nothing meanwhile.
type progress struct {
	out     io.Writer
	now     func() time.Time
	every   time.Duration // how often to say it is still building
	events  chan events.EngineEvent
	done    chan struct{}
	mu      sync.Mutex
	started time.Time
	running bool                 // the program registered its first resource
	begun   map[string]time.Time // URN -> when its step began
	steps   int
	diags   []string // error diagnostics, for the failure report
}

func newProgress(out io.Writer, now func() time.Time, every time.Duration) *progress {
	return &progress{out: out, now: now, every: every, events: make(chan events.EngineEvent), done: make(chan struct{}),
		begun: map[string]time.Time{}}
}

// run consumes events until the channel closes (the Automation API closes it when the command
// ends) and prints a line while the program is still being built.
func (p *progress) run(ctx context.Context) {
	defer close(p.done)
	p.started = p.now()
	fmt.Fprintln(p.out, "rig: building and starting the Pulumi program (go build ./infra; the first build compiles pulumi-aws and can take many minutes on a small machine)")
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	for {
		select {
		case e, ok := <-p.events:
			if !ok {
				return
			}
			p.handle(e)
		case <-tick.C:
			p.mu.Lock()
			if !p.running {
				fmt.Fprintf(p.out, "rig: still building the program (%s)\n", p.now().Sub(p.started).Round(time.Second))
			}
			p.mu.Unlock()
		case <-ctx.Done():
			return
		}
	}
}

func (p *progress) handle(e events.EngineEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case e.ResourcePreEvent != nil:
		m := e.ResourcePreEvent.Metadata
		if !p.running {
			p.running = true
			fmt.Fprintf(p.out, "rig: program running after %s\n", p.now().Sub(p.started).Round(time.Second))
		}
		if m.Op == "same" || m.Type == "pulumi:pulumi:Stack" || m.Type == "pulumi:providers:aws" {
			return
		}
		p.begun[m.URN] = p.now()
		fmt.Fprintf(p.out, "rig: %s %s %s ...\n", opVerb(string(m.Op), false), m.Type, urnName(m.URN))
	case e.ResOutputsEvent != nil:
		m := e.ResOutputsEvent.Metadata
		t, ok := p.begun[m.URN]
		if !ok {
			return
		}
		p.steps++
		fmt.Fprintf(p.out, "rig: [%d] %s %s %s (%s)\n", p.steps, opVerb(string(m.Op), true), m.Type, urnName(m.URN), p.now().Sub(t).Round(time.Second))
	case e.ResOpFailedEvent != nil:
		m := e.ResOpFailedEvent.Metadata
		fmt.Fprintf(p.out, "rig: FAILED to %s %s %s\n", m.Op, m.Type, urnName(m.URN))
	case e.DiagnosticEvent != nil && e.DiagnosticEvent.Severity == "error":
		msg := strings.TrimSpace(e.DiagnosticEvent.Message)
		if u := e.DiagnosticEvent.URN; u != "" {
			msg = urnName(u) + ": " + msg // which node failed decides the advice
		}
		p.diags = append(p.diags, msg)
		fmt.Fprintf(p.out, "rig: error: %s\n", firstLine(msg))
	}
}

// wait returns once every event is handled.
func (p *progress) wait() { <-p.done }

func (p *progress) errors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.diags...)
}

func opVerb(op string, done bool) string {
	verbs := map[string][2]string{"create": {"creating", "created"}, "update": {"updating", "updated"},
		"delete": {"deleting", "deleted"}, "replace": {"replacing", "replaced"}, "create-replacement": {"creating replacement", "created replacement"},
		"delete-replaced": {"deleting replaced", "deleted replaced"}, "read": {"reading", "read"}, "refresh": {"refreshing", "refreshed"}}
	v, ok := verbs[op]
	if !ok {
		return op
	}
	if done {
		return v[1]
	}
	return v[0]
}

// urnName is the resource's name, the last part of its URN.
func urnName(urn string) string {
	if i := strings.LastIndex(urn, "::"); i >= 0 {
		return urn[i+2:]
	}
	return urn
}

// capacityRE matches EC2's answers when it has no room for the instances (in the AZ, or in one
// cluster placement group).
var capacityRE = regexp.MustCompile(`InsufficientInstanceCapacity|InsufficientCapacity|Insufficient capacity|InsufficientHostCapacity|` +
	`We currently do not have sufficient .* capacity`)

// failureReport says, after a failed up, what exists (from the stack's state), the command that
// removes it, and for a lack of capacity what to change.
func (d *Driver) failureReport(ctx context.Context, st auto.Stack, name string, s spec.Spec, upErr error, diags []string) {
	out := d.opts.Out
	var resources []string
	if dep, err := st.Export(ctx); err == nil {
		var v struct {
			Resources []struct {
				URN  string `json:"urn"`
				Type string `json:"type"`
				ID   string `json:"id"`
			} `json:"resources"`
		}
		if json.Unmarshal(dep.Deployment, &v) == nil {
			for _, r := range v.Resources {
				if strings.HasPrefix(r.Type, "pulumi:") {
					continue
				}
				resources = append(resources, fmt.Sprintf("%s %s %s", r.Type, urnName(r.URN), r.ID))
			}
		}
	}
	sort.Strings(resources)
	if len(resources) == 0 {
		fmt.Fprintf(out, "rig: up %s failed; nothing was created (the stack's state holds no resource)\n", name)
	} else {
		fmt.Fprintf(out, "rig: up %s failed; these %d resource(s) exist and may cost money until removed:\n", name, len(resources))
		for _, r := range resources {
			fmt.Fprintf(out, "  %s\n", r)
		}
		fmt.Fprintf(out, "rig: remove them with: rig down --stack %s --no-archive   (or fix the cause and run rig up --stack %s again: it continues from here)\n", name, name)
	}
	text := upErr.Error() + "\n" + strings.Join(diags, "\n")
	if capacityRE.MatchString(text) && s.MultiAZ() {
		multiAZCapacityAdvice(out, name, s, diags)
		return
	}
	if capacityRE.MatchString(text) {
		other := "another AZ of " + s.Region
		if s.Region != "" {
			for _, z := range "abcdef" {
				if az := s.Region + string(z); az != s.AvailabilityZone {
					other = az
					break
				}
			}
		}
		fmt.Fprintf(out, "rig: EC2 has no capacity for these instances in %s (one cluster placement group needs them all in one place). Either:\n"+
			"  pulumi config set --stack %s availabilityZone %s   (another AZ; everything is created there), or\n"+
			"  pulumi config set --stack %s serverCapacityReservationId cr-…   (an EC2 capacity reservation for %s in %s, made in the placement group; clientCapacityReservationId for %s),\n",
			s.AvailabilityZone, name, other, name, s.ServerInstanceType, s.AvailabilityZone, s.ClientInstanceType)
		if s.Clients > 0 && s.ClientInPlacementGroup && clientFailed(diags) {
			fmt.Fprintf(out, "  pulumi config set --stack %s clientInPlacementGroup false   (the servers are up; the client leaves their placement group: "+
				"more client latency, less capacity risk),\n", name)
		}
		fmt.Fprintf(out, "then rig up --stack %s again (after rig down --stack %s --no-archive if the AZ changes).\n", name, name)
	}
}

// multiAZCapacityAdvice is the capacity advice for a multi-az stack: capacity reservations do
// not apply (Validate refuses the servers'), so the failing node's AZ moves, or the placement
// group goes.
func multiAZCapacityAdvice(out io.Writer, name string, s spec.Spec, diags []string) {
	zones := s.Zones()
	var failed []string // "node-1 in us-east-2b", each once
	move := -1          // the availabilityZones entry of the first failed node
	for _, n := range s.Nodes() {
		for _, d := range diags {
			if strings.HasPrefix(d, n.Name+": ") {
				failed = append(failed, n.Name+" in "+n.Zone)
				if i := slices.Index(zones, n.Zone); move < 0 {
					move = i
				}
				break
			}
		}
	}
	where := "one of " + strings.Join(zones, ", ")
	if len(failed) > 0 {
		where = strings.Join(failed, ", ")
	}
	fmt.Fprintf(out, "rig: EC2 has no capacity for these instances (%s; a %s placement group). Either:\n", where, s.GroupStrategy())
	if move >= 0 {
		other := "another AZ of " + s.Region
		for _, z := range "abcdef" {
			if az := s.Region + string(z); !slices.Contains(zones, az) {
				other = az
				break
			}
		}
		fmt.Fprintf(out, "  pulumi config set --stack %s --path 'rig:availabilityZones[%d]' %s   (another AZ for %s's nodes), or\n",
			name, move, other, zones[move])
	}
	if s.GroupStrategy() != spec.StrategyNone {
		fmt.Fprintf(out, "  pulumi config set --stack %s placementStrategy none   (no placement group: each instance wherever its AZ has room),\n", name)
	}
	fmt.Fprintf(out, "then rig up --stack %s again (after rig down --stack %s --no-archive if an AZ changes).\n", name, name)
}

// clientFailed reports whether a failure names a client instance (client-0, …; spec.Node).
func clientFailed(diags []string) bool {
	for _, d := range diags {
		if strings.HasPrefix(d, "client-") {
			return true
		}
	}
	return false
}
