package playbooks

import (
	"errors"
	"github.com/rig-dev/rig/actions"
	"strings"
	"testing"
	"time"
)

// base is a valid playbook of 4 lines; tests append to it, so their lines start at 5.
const base = `name: t
cluster: {servers: 3, clients: 1}
load: {probe_rate: 1000/s}
duration: 30s
`

func problemsOf(t *testing.T, src string) Problems {
	t.Helper()
	p, err := Parse("t.yaml", []byte(src), testDrivers)
	if err == nil {
		t.Fatalf("Parse accepted:\n%s\ngot %+v", src, p)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("errors.Is(err, ErrInvalid) = false for %v", err)
	}
	var probs Problems
	if !errors.As(err, &probs) {
		t.Fatalf("error is not Problems: %T %v", err, err)
	}
	return probs
}

// wantProblem asserts that probs holds one starting with at ("t.yaml:5:3: path") whose message
// contains msg.
func wantProblem(t *testing.T, probs Problems, at, msg string) {
	t.Helper()
	for _, p := range probs {
		s := p.String()
		if strings.HasPrefix(s, at+": ") && strings.Contains(s[len(at):], msg) {
			return
		}
	}
	t.Errorf("no problem %q containing %q; got:\n%v", at, msg, probs)
}

func mustParse(t *testing.T, src string) *Playbook {
	t.Helper()
	p, err := Parse("t.yaml", []byte(src), testDrivers)
	if err != nil {
		t.Fatalf("Parse:\n%s\nerror:\n%v", src, err)
	}
	return p
}

// Five kinds of bad input, each refused with its exact position.
func TestAcceptanceCases(t *testing.T) {
	cases := []struct {
		name, src, at, msg string
	}{
		{"unknown key", base + "engine: {sync_level: 2, snapshot_blok: 1MiB}\n",
			"t.yaml:5:25: engine.snapshot_blok", `unknown key (did you mean "snapshot_block"?); valid in engine: sync_level, snapshot_block`},
		{"negative probe rate", "name: t\nload: {probe_rate: -100/s}\nduration: 30s\n",
			"t.yaml:2:20: load.probe_rate", `"-100/s" is negative; want a rate such as 1000/s`},
		{"kill of a node that does not exist", base + "timeline:\n  - {at: 10s, kill: {node: node-5}}\n",
			"t.yaml:6:28: timeline[0].kill.node", `"node-5" does not exist: cluster has servers node-0..node-2 (or use leader, follower, other-follower)`},
		{"action after the end of the run", base + "timeline:\n  - {at: 5s, snapshot: {}}\n  - {at: 31s, snapshot: {}}\n",
			"t.yaml:7:10: timeline[1].at", "31s is at or after the end of the run (duration 30s)"},
		{"duration without a unit", "name: t\nload: {probe_rate: 1000/s}\nduration: 30\n",
			"t.yaml:3:11: duration", `"30" has no unit; write 30s or 30ms`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			probs := problemsOf(t, c.src)
			if len(probs) != 1 {
				t.Errorf("want exactly one problem, got %d:\n%v", len(probs), probs)
			}
			wantProblem(t, probs, c.at, c.msg)
		})
	}
}

// Every rule, each with a bad input and the exact file:line:column it must point at.
func TestRules(t *testing.T) {
	cases := []struct {
		name, src, at, msg string
	}{
		// cluster
		{"no servers", "name: t\ncluster: {servers: 0}\nload: {probe_rate: 1/s}\nduration: 9s\n",
			"t.yaml:2:20: cluster.servers", "0 is out of range; want servers, 1..99"},
		{"no clients", "name: t\ncluster: {clients: 0}\nload: {probe_rate: 1/s}\nduration: 9s\n",
			"t.yaml:2:20: cluster.clients", "0 is out of range"},
		{"kill needs 3 servers", "name: t\ncluster: {servers: 2}\nload: {probe_rate: 1/s}\nduration: 9s\ntimeline:\n  - {at: 1s, kill: {node: follower}}\n",
			"t.yaml:6:20: timeline[0].kill", "needs cluster.servers >= 3 (it is 2)"},
		{"step-down needs 3 servers", "name: t\ncluster: {servers: 1}\nload: {probe_rate: 1/s}\nduration: 9s\ntimeline:\n  - {at: 1s, step_down: {}}\n",
			"t.yaml:6:25: timeline[0].step_down", "steps the leader down, which needs cluster.servers >= 3 (it is 1)"},
		{"servers not a number", "name: t\ncluster: {servers: three}\nload: {probe_rate: 1/s}\nduration: 9s\n",
			"t.yaml:2:20: cluster.servers", `"three" is not a whole number`},
		// engine
		{"sync level", base + "engine: {sync_level: 3}\n", "t.yaml:5:22: engine.sync_level", "want 0 (no sync), 1 (fdatasync) or 2 (fsync)"},
		{"block without binary unit", base + "engine: {snapshot_block: 16M}\n", "t.yaml:5:26: engine.snapshot_block", `(did you mean 16MiB?)`},
		{"block too small", base + "engine: {snapshot_block: 512}\n", "t.yaml:5:26: engine.snapshot_block", "want 4KiB..1GiB"},
		{"no encode threads", base + "engine: {encode_threads: 0}\n", "t.yaml:5:26: engine.encode_threads", "0 is out of range"},
		{"heartbeat below raft minimum", base + "engine: {heartbeat_timeout: 1ms}\n", "t.yaml:5:29: engine.heartbeat_timeout", "5ms (raft's minimum)"},
		{"election below heartbeat", base + "engine:\n  heartbeat_timeout: 500ms\n  election_timeout: 100ms\n",
			"t.yaml:7:21: engine.election_timeout", "100ms is shorter than engine.heartbeat_timeout (500ms)"},
		{"flight recorder not a boolean", base + "engine: {flight_recorder: yes}\n", "t.yaml:5:27: engine.flight_recorder", `"yes" is not true or false`},
		{"flight recorder window without the recorder", base + "engine: {flight_recorder_window: 30s}\n", "t.yaml:5:34: engine.flight_recorder_window",
			"30s is set but engine.flight_recorder is not true"},
		{"flight recorder reach below the timeline's gap", "name: t\nload: {probe_rate: 1/s}\nduration: 100s\nengine: {flight_recorder: true, flight_recorder_window: 20s}\ntimeline:\n  - {at: 10s, snapshot: {}}\n  - {at: 50s, snapshot: {}}\n",
			"t.yaml:4:57: engine.flight_recorder_window", "the recorder reaches 20s back, but its recording is taken after timeline[1] (50s) and next at the end of the run, 50s later; set engine.flight_recorder_window to at least 55s"},
		{"flight recorder default reach below the timeline's gap", "name: t\nload: {probe_rate: 1/s}\nduration: 100s\nengine: {flight_recorder: true}\ntimeline:\n  - {at: 10s, snapshot: {}}\n",
			"t.yaml:4:9: engine.flight_recorder_window", "the recorder reaches 1m0s back, but its recording is taken after timeline[0] (10s) and next at the end of the run, 1m30s later"},
		{"flight recorder window too short", base + "engine: {flight_recorder: true, flight_recorder_window: 500ms}\n", "t.yaml:5:57: engine.flight_recorder_window",
			"want how far back the flight recorder reaches, 1s..10m"},
		// units
		{"negative duration", base + "warmup: -1s\n", "t.yaml:5:9: warmup", `"-1s" is negative`},
		{"warmup not below duration", base + "warmup: 30s\n", "t.yaml:5:9: warmup", "30s is not shorter than the run (duration 30s)"},
		{"rate without time unit", "name: t\nload: {probe_rate: 1000}\nduration: 9s\n", "t.yaml:2:20: load.probe_rate", `"1000" has no time unit; write 1000/s`},
		{"zero rate", "name: t\nload: {probe_rate: 0/s}\nduration: 9s\n", "t.yaml:2:20: load.probe_rate", "want more than 0"},
		{"spin past the wait", "name: t\nload: {probe_rate: 1/s, spin: 3ms}\nduration: 9s\n", "t.yaml:2:31: load.spin", "3ms is out of range; want a duration from 0 to 2ms"},
		{"negative count", base + "preload: {orders: -5}\n", "t.yaml:5:19: preload.orders", "is negative"},
		{"zero instruments", base + "preload: {instruments: 0}\n", "t.yaml:5:24: preload.instruments", "0 is out of range"},
		{"zero rounds", base + "rounds: 0\n", "t.yaml:5:9: rounds", "want a whole number 1..1000"},
		// required
		{"missing duration", "name: t\nload: {probe_rate: 1/s}\n", "t.yaml:1:1: duration", "missing; want the length of the run"},
		{"missing probe rate", "name: t\nload: {}\nduration: 9s\n", "t.yaml:2:7: load.probe_rate", "missing"},
		{"bad name", "name: \"my run\"\nload: {probe_rate: 1/s}\nduration: 9s\n", "t.yaml:1:7: name", "is not a name"},
		// timeline shape
		{"timeline not a list", base + "timeline: {at: 1s}\n", "t.yaml:5:11: timeline", "want a list of actions"},
		{"entry without at", base + "timeline:\n  - {snapshot: {}}\n", "t.yaml:6:5: timeline[0].at", "missing; want the action's offset"},
		{"entry without action", base + "timeline:\n  - at: 1s\n", "t.yaml:6:5: timeline[0]", "no action; want exactly one of snapshot, kill, step_down, burst, wait_for"},
		{"two actions", base + "timeline:\n  - {at: 1s, snapshot: {}, step_down: {}}\n", "t.yaml:6:5: timeline[0]", "snapshot and step_down in one entry"},
		{"unknown action", base + "timeline:\n  - {at: 1s, snapshot: {}, restart: {}}\n", "t.yaml:6:28: timeline[0].restart", "unknown key; valid in timeline[0]: at, snapshot, kill"},
		{"snapshot takes nothing", base + "timeline:\n  - {at: 1s, snapshot: {node: leader}}\n", "t.yaml:6:25: timeline[0].snapshot.node", "nothing may be set in timeline[0].snapshot"},
		{"at without unit", base + "timeline:\n  - {at: 10, snapshot: {}}\n", "t.yaml:6:10: timeline[0].at", `"10" has no unit`},
		{"offsets decrease", base + "timeline:\n  - {at: 10s, snapshot: {}}\n  - {at: 5s, snapshot: {}}\n",
			"t.yaml:7:10: timeline[1].at", "5s is before the previous action (timeline[0] at 10s)"},
		{"action at the end", base + "timeline:\n  - {at: 30s, snapshot: {}}\n", "t.yaml:6:10: timeline[0].at", "at or after the end of the run"},
		// kill
		{"kill without node", base + "timeline:\n  - {at: 1s, kill: {signal: KILL}}\n", "t.yaml:6:20: timeline[0].kill.node", "missing; want which server to kill"},
		{"node reference form", base + "timeline:\n  - {at: 1s, kill: {node: node5}}\n", "t.yaml:6:27: timeline[0].kill.node", `"node5" is not a node; want leader, follower, other-follower or node-N`},
		{"signal", base + "timeline:\n  - {at: 1s, kill: {node: leader, signal: STOP}}\n", "t.yaml:6:43: timeline[0].kill.signal", `"STOP" is not a signal a kill may send; want KILL or TERM`},
		{"relaunch after the end", base + "timeline:\n  - {at: 20s, kill: {node: follower, relaunch_after: 10s}}\n",
			"t.yaml:6:54: timeline[0].kill.relaunch_after", "the relaunch at 30s (at 20s + 10s) is at or after the end of the run"},
		{"zero relaunch", base + "timeline:\n  - {at: 1s, kill: {node: follower, relaunch_after: 0s}}\n",
			"t.yaml:6:53: timeline[0].kill.relaunch_after", "leave it out to keep the node down"},
		{"majority lost", base + "timeline:\n  - {at: 1s, kill: {node: node-1, relaunch_after: 10s}}\n  - {at: 5s, kill: {node: node-2, relaunch_after: 10s}}\n",
			"t.yaml:7:20: timeline[1].kill", "leaves 2 of 3 servers down at 5s (still down: timeline[0] node-1); at most 1 may be down"},
		{"node killed while down", "name: t\ncluster: {servers: 5}\nload: {probe_rate: 1/s}\nduration: 30s\ntimeline:\n  - {at: 1s, kill: {node: node-1, relaunch_after: 10s}}\n  - {at: 5s, kill: {node: node-1}}\n",
			"t.yaml:7:27: timeline[1].kill.node", "node-1 is still down at 5s (timeline[0] kill took it down at 1s, back at 11s)"},
		// The timeline's state knows a power loss (node down until its relaunch), and
		// every server down at once is an opt-in
		{"kill while its power is off", base + "timeline:\n  - {at: 1s, power_loss: {nodes: node-0, relaunch_after: 5s}}\n  - {at: 4s, kill: {node: node-0}}\n",
			"t.yaml:7:27: timeline[1].kill.node", "node-0 is still down at 4s (timeline[0] power_loss took it down at 1s, back at 6s)"},
		{"partition while its power is off", base + "timeline:\n  - {at: 1s, power_loss: {nodes: node-1+node-2, relaunch_after: 5s}}\n  - {at: 3s, partition: {node: node-2, for: 1s}}\n",
			"t.yaml:7:32: timeline[1].partition.node", "node-2 is still down at 3s (timeline[0] power_loss took it down at 1s, back at 6s)"},
		{"power cut of a killed node", base + "timeline:\n  - {at: 1s, kill: {node: node-2}}\n  - {at: 3s, power_loss: {nodes: node-0+node-2, relaunch_after: 1s}}\n",
			"t.yaml:7:34: timeline[1].power_loss.nodes", "node-2 is still down at 3s (timeline[0] kill took it down at 1s, for the rest of the run)"},
		{"all servers down", base + "timeline:\n  - {at: 1s, power_loss: {nodes: node-0+node-1, relaunch_after: 5s}}\n  - {at: 2s, kill: {node: node-2, relaunch_after: 1s}}\n",
			"t.yaml:7:20: timeline[1].kill", "leaves all 3 servers down at 2s (still down: timeline[0] node-0, timeline[0] node-1): nothing serves until one is back; if that is the experiment, say so with allow_all_down: true"},
		{"whole-cluster power loss", base + "timeline:\n  - {at: 1s, power_loss: {nodes: node-0+node-1+node-2, relaunch_after: 5s}}\n",
			"t.yaml:6:26: timeline[0].power_loss", "leaves all 3 servers down at 1s (still down: none before it)"},
		{"kill beside a power loss", "name: t\ncluster: {servers: 5}\nload: {probe_rate: 1/s}\nduration: 30s\ntimeline:\n  - {at: 1s, power_loss: {nodes: node-0+node-1+node-2, relaunch_after: 5s}}\n  - {at: 2s, kill: {node: node-3}}\n",
			"t.yaml:7:20: timeline[1].kill", "leaves 4 of 5 servers down at 2s"},
		// A delay's round-trip probe must fit in the time the links stay delayed
		{"delay probe outlasts the run", "name: t\nload: {probe_rate: 1/s}\nduration: 15s\ntimeline:\n  - {at: 4s, delay: {node: node-1, delay: 10s}}\n",
			"t.yaml:5:43: timeline[0].delay.delay", "the round-trip probe after the change measures 5 round trips on each of up to 5 pairs, at least 8m20s at this delay, but the links stay delayed 11s (to the end of the run); want delay at most 220ms here"},
		{"delay probe outlasts for", base + "timeline:\n  - {at: 4s, delay: {node: node-1, to: node-2, delay: 200ms, for: 1s}}\n",
			"t.yaml:6:55: timeline[0].delay.delay", "on each of up to 2 pairs, at least 4s at this delay, but the links stay delayed 1s (for:); want delay at most 50ms here"},
		{"delay probe with zones", base + "placement: {zones: {a: [node-0], b: [node-1, node-2, client-0]}, between_zones: {delay: 100ms}}\ntimeline:\n  - {at: 4s, delay: {node: node-1, to: node-0, delay: 1ms, for: 1s}}\n",
			"t.yaml:7:55: timeline[0].delay.delay", "at least 2.02s at this delay, but the links stay delayed 1s (for:); want a window of at least 2s (a longer for: or run)"},
		{"role while a majority is down", base + "allow_all_down: true\ntimeline:\n  - {at: 1s, power_loss: {nodes: leader+follower, relaunch_after: 5s}}\n  - {at: 2s, kill: {node: follower}}\n",
			"t.yaml:8:27: timeline[1].kill.node", `"follower" is a role, but at 2s 2 of 3 servers are down (timeline[0] leader, timeline[0] follower), so there is no leader to resolve it by; want node-N`},
		{"allow_all_down value", base + "allow_all_down: yes\n", "t.yaml:5:17: allow_all_down", `"yes": want true`},
		{"wait for a node never relaunched", base + "timeline:\n  - {at: 1s, kill: {node: follower}}\n  - {at: 2s, wait_for: {phase: ready}}\n",
			"t.yaml:7:24: timeline[1].wait_for", "timeline[0] kill takes follower down for the rest of the run, so it can only time out"},
		// wait_for
		{"phase", base + "timeline:\n  - {at: 1s, wait_for: {phase: up}}\n", "t.yaml:6:32: timeline[0].wait_for.phase", "want one of starting, restoring, joining, replaying, catching-up, ready"},
		{"phase missing", base + "timeline:\n  - {at: 1s, wait_for: {timeout: 5s}}\n", "t.yaml:6:24: timeline[0].wait_for.phase", "missing"},
		{"wait for missing node", base + "timeline:\n  - {at: 1s, wait_for: {phase: ready, node: node-3}}\n",
			"t.yaml:6:45: timeline[0].wait_for.node", `"node-3" does not exist`},
		// burst
		{"burst without every", base + "timeline:\n  - {at: 1s, burst: {messages: 10k, count: 3}}\n", "t.yaml:6:21: timeline[0].burst.every", "count is 3"},
		{"burst past the end", base + "timeline:\n  - {at: 10s, burst: {messages: 10k, every: 10s, count: 3}}\n",
			"t.yaml:6:57: timeline[0].burst.count", "the last of 3 bursts starts at 30s"},
		{"empty burst", base + "timeline:\n  - {at: 1s, burst: {messages: 0}}\n", "t.yaml:6:32: timeline[0].burst.messages", "want 1..100M"},
		{"burst size", base + "timeline:\n  - {at: 1s, burst: {messages: 1k, size: 2KiB}}\n", "t.yaml:6:42: timeline[0].burst.size", "want 88..1400 bytes"},
		{"burst senders", base + "timeline:\n  - {at: 1s, burst: {messages: 1k, senders: 0}}\n", "t.yaml:6:45: timeline[0].burst.senders", "want 1..64 senders"},
		{"senders per client", base + "timeline:\n  - {at: 1s, burst: {messages: 1k, senders: 20}}\n", "t.yaml:6:45: timeline[0].burst.senders", "at most 16 per client node"},
		{"udp rcvbuf", base + "engine: {udp_rcvbuf: 1KiB}\n", "t.yaml:5:22: engine.udp_rcvbuf", "want 4KiB.."},
		// tuning
		{"unknown kernel key", base + "tuning: {vm.dirty_ration: 20}\n", "t.yaml:5:10: tuning.vm.dirty_ration", `(did you mean "vm.dirty_ratio"?)`},
		{"thp value", base + "tuning: {thp: off}\n", "t.yaml:5:15: tuning.thp", "want one of always, madvise, never"},
		{"ratio range", base + "tuning: {vm.dirty_ratio: 120}\n", "t.yaml:5:26: tuning.vm.dirty_ratio", "0..100"},
		{"background above ratio", base + "tuning:\n  vm.dirty_ratio: 10\n  vm.dirty_background_ratio: 10\n",
			"t.yaml:7:30: tuning.vm.dirty_background_ratio", "10 is not below vm.dirty_ratio (10)"},
		{"rmem too big", base + "tuning: {net.core.rmem_max: 4GiB}\n", "t.yaml:5:29: tuning.net.core.rmem_max", "4096 to 2147483647"},
		{"ena rings", base + "tuning: {ena_rings: \"eth0:rx=8192,mtu=9001\"}\n", "t.yaml:5:21: tuning.ena_rings", `ring "mtu=9001" is not rx=N or tx=N`},
		// matrix
		{"matrix path", base + "matrix: {engine.sync: [0, 2]}\n", "t.yaml:5:10: matrix.engine.sync", `"sync" is not a setting of the reference driver (did you mean "sync_level"?)`},
		{"matrix value", base + "matrix: {engine.sync_level: [0, 3]}\n", "t.yaml:5:33: matrix.engine.sync_level[1]", "3 is out of range (at most 2); want 0 (no sync), 1 (fdatasync) or 2 (fsync)"},
		{"matrix value without unit", base + "matrix: {duration: [30s, 60]}\n", "t.yaml:5:26: matrix.duration[1]", `"60" has no unit`},
		{"matrix empty", base + "matrix: {preload.orders: []}\n", "t.yaml:5:26: matrix.preload.orders", "want a non-empty list"},
		{"matrix duplicate", base + "matrix: {preload.orders: [1M, 1000k]}\n", "t.yaml:5:31: matrix.preload.orders[1]", "1000k repeats matrix.preload.orders[0] (1M)"},
		{"matrix rounds", base + "matrix: {rounds: [1, 2]}\n", "t.yaml:5:10: matrix.rounds", "rounds cannot vary in a matrix"},
		{"matrix timeline index", base + "matrix:\n  timeline[0].at: [1s]\n", "t.yaml:6:3: matrix.timeline[0].at", "there is no timeline[0]: the timeline has 0 entries"},
		{"flow key with brackets", base + "matrix: {timeline[0].at: [1s]}\n", "t.yaml:5:10", "inside { } a key with brackets must be quoted"},
		{"matrix timeline kind", base + "timeline:\n  - {at: 1s, snapshot: {}}\nmatrix:\n  timeline[0].burst.messages: [1k]\n",
			"t.yaml:8:3: matrix.timeline[0].burst.messages", "timeline[0] is a snapshot, not a burst"},
		{"matrix combination", base + "timeline:\n  - {at: 20s, snapshot: {}}\nmatrix: {duration: [30s, 15s]}\n",
			"t.yaml:6:10: timeline[0].at", "20s is at or after the end of the run (duration 15s); want an offset below 15s (in the run with duration=15s)"},
		{"matrix too big", base + "rounds: 100\nmatrix: {preload.orders: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}\n", "t.yaml:6:1: matrix", "expands to 1100 runs"},
		// YAML itself
		{"syntax", base + "engine: {sync_level: 2\n", "t.yaml:5:9", "YAML syntax"},
		{"duplicate key", base + "duration: 20s\n", "t.yaml:5:1", `mapping key "duration" already defined`},
		{"not a mapping", "- 1\n", "t.yaml:1:1", "want a mapping of playbook keys"},
		{"empty file", "# nothing\n", "t.yaml:1:1", "the file is empty"},
		{"two documents", base + "---\nname: u\n", "t.yaml:6:1", "a second YAML document"},
		{"section not a mapping", base + "engine: fast\n", "t.yaml:5:9: engine", `want a mapping with sync_level, snapshot_block`},
		{"list where a value belongs", base + "warmup: [1s]\n", "t.yaml:5:9: warmup", "want a single value, got a list"},
		{"no value", base + "warmup:\n", "t.yaml:5:9: warmup", "has no value"},
		{"interleave", base + "interleave: true\n", "t.yaml:5:1: interleave", "rounds are always interleaved"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantProblem(t, problemsOf(t, c.src), c.at, c.msg)
		})
	}
}

// A power loss whose nodes did not parse adds nothing to the timeline's state (its
// default nodes would make a later kill look like the last server down).
func TestTimelineStateQuietOnABadNodeList(t *testing.T) {
	probs := problemsOf(t, base+"timeline:\n  - {at: 1s, power_loss: {nodes: node-x, relaunch_after: 5s}}\n  - {at: 2s, kill: {node: node-2}}\n")
	if len(probs) != 1 || !strings.Contains(probs[0].String(), "timeline[0].power_loss.nodes") {
		t.Errorf("want the one problem of the node list; got:\n%v", probs)
	}
}

// Parse reports every problem in one pass, in source order, and skips rules that would only
// repeat a problem already reported (a duration that did not parse says nothing about offsets).
func TestAllProblemsInOnePass(t *testing.T) {
	src := `name: t
clustr: {servers: 3}
engine: {sync_level: 5}
load: {probe_rate: -1/s}
duration: 30
timeline:
  - {at: 5s, kill: {node: node-9, signal: HUP}}
  - {at: 40, snapshot: {}}
`
	probs := problemsOf(t, src)
	want := []string{
		"t.yaml:2:1: clustr:",
		"t.yaml:3:22: engine.sync_level:",
		"t.yaml:4:20: load.probe_rate:",
		"t.yaml:5:11: duration:",
		"t.yaml:7:27: timeline[0].kill.node:",
		"t.yaml:7:43: timeline[0].kill.signal:",
		"t.yaml:8:10: timeline[1].at:",
	}
	if len(probs) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(probs), len(want), probs)
	}
	for i, w := range want {
		if !strings.HasPrefix(probs[i].String(), w) {
			t.Errorf("problem %d = %q, want prefix %q", i, probs[i], w)
		}
	}
	if lines := strings.Split(Problems(probs).Error(), "\n"); len(lines) != len(want) {
		t.Errorf("Error() has %d lines, want one per problem", len(lines))
	}
}

func TestDefaultsAndBaseUnits(t *testing.T) {
	p := mustParse(t, `# comment
load: {probe_rate: 5k/s}
duration: 1m30s
engine: {snapshot_block: 16MiB, heartbeat_timeout: 250ms}
preload: {orders: 1.5M}
timeline:
  - {at: 10s, kill: {node: follower, relaunch_after: 15s}}
  - {at: 30s, wait_for: {phase: ready}}
  - {at: 31s, burst: {messages: 50k}}
`)
	if p.Name != "t" {
		t.Errorf("name = %q, want it taken from the file name", p.Name)
	}
	if p.Cluster != (Cluster{Servers: DefaultServers, Clients: DefaultClients}) {
		t.Errorf("cluster = %+v", p.Cluster)
	}
	if s := p.Engine.Settings(); s["sync_level"] != "2" || s["snapshot_block"] != "16777216" || s["heartbeat_timeout"] != "250ms" {
		t.Errorf("engine = %+v", p.Engine)
	}
	if p.Preload != (Preload{Orders: 1_500_000, Instruments: DefaultInstruments}) {
		t.Errorf("preload = %+v", p.Preload)
	}
	if p.Load.ProbeRate != 5000 || p.Duration != 90*time.Second || p.Warmup != DefaultWarmup || p.Rounds != 1 {
		t.Errorf("load %v duration %v warmup %v rounds %d", p.Load.ProbeRate, p.Duration, p.Warmup, p.Rounds)
	}
	k := p.Timeline[0]
	if k.Kind != "kill" || *k.Spec.(*actions.Kill) != (actions.Kill{Node: "follower", Signal: "KILL", RelaunchAfter: 15 * time.Second}) || k.Pos.Line != 7 || k.Pos.Column != 5 {
		t.Errorf("kill = %+v %+v", k, k.Spec)
	}
	if w := p.Timeline[1].Spec.(*actions.WaitFor); *w != (actions.WaitFor{Phase: "ready", Timeout: actions.DefaultWaitForTimeout}) {
		t.Errorf("wait_for = %+v", w)
	}
	if b := p.Timeline[2].Spec.(*actions.Burst); *b != (actions.Burst{Messages: 50_000, Count: 1, Size: actions.DefaultBurstSize}) {
		t.Errorf("burst = %+v", b)
	}
}

func TestTuningKeepsFileOrderInBaseUnits(t *testing.T) {
	p := mustParse(t, base+`tuning:
  vm.swappiness: 1
  thp: never
  net.core.rmem_max: 128MiB
  ena_rings: "eth0: tx=1024, rx=8192"
  net.core.netdev_max_backlog: 250k
`)
	want := []Setting{{"vm.swappiness", "1"}, {"thp", "never"}, {"net.core.rmem_max", "134217728"},
		{"ena_rings", "eth0:rx=8192,tx=1024"}, {"net.core.netdev_max_backlog", "250000"}}
	if len(p.Tuning) != len(want) {
		t.Fatalf("tuning = %v", p.Tuning)
	}
	for i := range want {
		if p.Tuning[i] != want[i] {
			t.Errorf("tuning[%d] = %v, want %v", i, p.Tuning[i], want[i])
		}
	}
}

func TestAnchorsAndAliases(t *testing.T) {
	p := mustParse(t, base+`timeline:
  - {at: 5s, kill: &k {node: follower, relaunch_after: 5s}}
  - {at: 15s, kill: *k}
`)
	if k := p.Timeline[1].Spec.(*actions.Kill); k.Node != "follower" || k.RelaunchAfter != 5*time.Second {
		t.Errorf("alias not resolved: %+v", k)
	}
	wantProblem(t, problemsOf(t, base+"warmup: *nope\n"), "t.yaml:5:9", "alias *nope refers to no anchor")
}

func TestWaitForStableLeader(t *testing.T) {
	base := "name: x\nduration: 5s\nload: {probe_rate: 10/s}\ntimeline:\n  - {at: 1s, wait_for: "
	p, err := Parse("x.yaml", []byte(base+"{stable_leader: 2s}}\n"), testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	if w := p.Timeline[0].Spec.(*actions.WaitFor); w.StableLeader != 2*time.Second || w.Phase != "ready" || w.Timeout != actions.DefaultWaitForTimeout {
		t.Errorf("wait_for %+v, want stable 2s, phase ready, default timeout", w)
	}
	for _, bad := range []string{"{stable_leader: 2s, phase: catching-up}}", "{stable_leader: 2s, node: node-1}}", "{stable_leader: 1ms}}"} {
		if _, err := Parse("x.yaml", []byte(base+bad+"\n"), testDrivers); err == nil || !strings.Contains(err.Error(), "stable_leader") {
			t.Errorf("%s: %v, want a problem at stable_leader", bad, err)
		}
	}
}
