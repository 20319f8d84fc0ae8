package actions

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/actions/actionstest"
	"github.com/rig-dev/rig/agent/hog"
)

// cpu_hog's keys: threads 1..256 or cpus (the default), nice -20..19, for of 1ms to 24h; each
// refusal says what would be valid.
func TestCPUHogFields(t *testing.T) {
	k, ok := New("cpu_hog")
	if !ok {
		t.Fatal("cpu_hog is not registered")
	}
	if h := k.(*CPUHog); h.Node != "leader" || h.Threads != 0 || h.Nice != 0 {
		t.Errorf("defaults %+v; want the leader, one thread per CPU, nice 0", h)
	}
	set := func(key, raw string) error {
		f, ok := FieldOf(k, key)
		if !ok {
			t.Fatalf("cpu_hog has no %s", key)
		}
		return f.Set(k, raw)
	}
	for _, c := range []struct{ key, raw, want string }{
		{"threads", "0", "want 1..256 busy threads, or cpus"},
		{"threads", "257", "want 1..256"},
		{"threads", "two", "want 1..256"},
		{"nice", "20", "want a nice value from -20 to 19"},
		{"nice", "-21", "want a nice value from -20 to 19"},
		{"for", "0s", "want a duration from 1ms to 24h, e.g. 3s"},
		{"for", "1000h", "1000h is out of range; want a duration from 1ms to 24h"},
		{"for", "3", "no unit"},
		{"node", "client-0", "want leader, follower, other-follower or node-N"},
	} {
		err := set(c.key, c.raw)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %s: %v; want an error saying %q", c.key, c.raw, err, c.want)
		}
	}
	for key, raw := range map[string]string{"threads": "4", "nice": "-5", "for": "2.5s", "node": "node-2"} {
		if err := set(key, raw); err != nil {
			t.Fatalf("%s: %s: %v", key, raw, err)
		}
		if f, _ := FieldOf(k, key); f.Get(k) != raw {
			t.Errorf("%s reads %q, set %q", key, f.Get(k), raw)
		}
	}
	if err := set("threads", "cpus"); err != nil || k.(*CPUHog).Threads != 0 {
		t.Errorf("threads: cpus: %v, %d", err, k.(*CPUHog).Threads)
	}
	if ps := k.(Completer).Complete(map[string]bool{"node": true}); len(ps) != 1 || ps[0].Key != "for" || !strings.Contains(ps[0].Msg, "e.g. for: 3s") {
		t.Errorf("a cpu_hog without for: %+v; want it asked for", ps)
	}
}

// A hog must end inside the run, on a server the cluster has.
func TestCPUHogChecks(t *testing.T) {
	c := Context{Servers: 3, Clients: 1, At: 8 * time.Second, End: 10 * time.Second}
	var got []string
	for _, p := range (&CPUHog{Node: "node-3", For: 3 * time.Second}).Check(c) {
		got = append(got, p.Key+":"+p.Rule+": "+p.Msg)
	}
	if len(got) != 2 || !strings.HasPrefix(got[0], "node:node:") ||
		got[1] != "for:hog-after-end: the end of the hog at 11s (at 8s + 3s) is at or after the end of the run (duration 10s); want a hog that ends inside the run (a shorter for: or an earlier at:)" {
		t.Errorf("rules:\n%s", strings.Join(got, "\n"))
	}
	if ps := (&CPUHog{Node: "leader", For: 1999 * time.Millisecond}).Check(c); len(ps) != 0 {
		t.Errorf("a hog ending 1ms before the run: %+v", ps)
	}
}

// hogEnv is the fake env plus CPUHogger, with the hog "ending" as the agent would answer.
type hogEnv struct {
	*actionstest.Env
	req hog.Request
}

func (e *hogEnv) CPUHog(_ context.Context, node string, req hog.Request) (hog.State, error) {
	e.Note("hog %s", node)
	e.req = req
	return hog.State{PID: 4242, Threads: 8, Nice: req.Nice, ForMs: 50, Started: time.Unix(100, 0)}, nil
}

func (e *hogEnv) EndCPUHog(_ context.Context, node string, pid int, wait time.Duration) (hog.State, error) {
	e.Note("end hog %s %d wait %s", node, pid, wait)
	return hog.State{PID: pid, Threads: 8, ForMs: 50, Started: time.Unix(100, 0), Ended: time.Unix(100, 0).Add(50 * time.Millisecond),
		StoppedEarly: wait == 0, Exit: "exit status 0"}, nil
}

// The hog is asked for on the resolved node with the entry's settings, recorded when asked for
// and when it ended (the second event For after the first), and ended with a wait past its
// time; a timeline that ends first stops it at once.
func TestCPUHogRun(t *testing.T) {
	env := &hogEnv{Env: actionstest.NewEnv()}
	h := &CPUHog{Node: "follower", For: 50 * time.Millisecond, Nice: 5}
	if err := h.Run(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	if err := env.Settle(); err != nil {
		t.Fatal(err)
	}
	if env.req != (hog.Request{Nice: 5, For: "50ms"}) {
		t.Errorf("request %+v", env.req)
	}
	evs := env.Events()
	if len(evs) != 2 || !evs[0].IsAction(ActCPUHog) || !evs[1].IsAction(ActCPUHogEnd) {
		t.Fatalf("events %+v; want cpu_hog then cpu_hog_end", evs)
	}
	if d := evs[1].T.Sub(evs[0].T); d != 50*time.Millisecond {
		t.Errorf("cpu_hog_end %s after cpu_hog; want the hog's 50ms", d)
	}
	var a CPUHogAction
	if err := json.Unmarshal(evs[1].Action.Payload, &a); err != nil || a.As != "follower" || a.PID != 4242 || a.Ended.IsZero() || a.StoppedEarly {
		t.Errorf("end payload %s (%v)", evs[1].Action.Payload, err)
	}
	want := []string{"resolve follower", "hog node-1", "record cpu_hog", "end hog node-1 4242 wait " + cpuHogEndWait.String(), "record cpu_hog_end"}
	if evs[0].Node != "node-1" || !slices.Equal(env.Calls(), want) {
		t.Errorf("node %s, calls %q; want %q", evs[0].Node, env.Calls(), want)
	}

	early := &hogEnv{Env: actionstest.NewEnv()}
	ctx, cancel := context.WithCancel(t.Context())
	if err := (&CPUHog{Node: "leader", For: time.Hour}).Run(ctx, early); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := early.Settle(); err != nil {
		t.Fatal(err)
	}
	if calls := early.Calls(); !slices.Contains(calls, "end hog node-0 4242 wait 0s") {
		t.Errorf("a timeline over before the hog: calls %q; want it ended with no wait (stopped at once)", calls)
	}
}

// On a run whose agents start no hogs it fails naming the capability, recording nothing.
func TestCPUHogNeedsCapability(t *testing.T) {
	env := actionstest.NewEnv()
	err := (&CPUHog{Node: "leader", For: time.Second}).Run(t.Context(), env)
	if err == nil || !strings.Contains(err.Error(), "CPUHogger") || len(env.Events()) != 0 {
		t.Errorf("cpu_hog on the core: %v, recorded %v", err, env.Events())
	}
}
