package playbooks

import (
	"strings"
	"testing"
)

// The timeline's state knows who can lead: what acts on the leader, or on a node by its role, is
// refused at a moment no majority is up; what acts on a node is refused while the part of it the
// entry needs is down; and a node is not taken down while a lasting entry needs it. Each is
// refused where the entry stands, saying what would be valid.
func TestTimelineStateKnowsWhoLeads(t *testing.T) {
	const majorityOff = "  - {at: 1s, power_loss: {nodes: leader+follower, relaunch_after: 15s}}\n"
	for _, c := range []struct{ name, timeline, at, msg string }{
		{"snapshot while a majority has no power", majorityOff + "  - {at: 14s, snapshot: {}}\n",
			"t.yaml:7:25: timeline[1].snapshot", "acts on the leader, but at 14s 2 of 3 servers are down (timeline[0] leader, timeline[0] follower), so none can be elected; want an offset after a majority is back (with a wait_for: {phase: ready} before it)"},
		{"step_down while a majority has no power", majorityOff + "  - {at: 3s, step_down: {}}\n",
			"t.yaml:7:25: timeline[1].step_down", "acts on the leader, but at 3s 2 of 3 servers are down"},
		{"cpu_hog on the leader while a majority has no power", majorityOff + "  - {at: 3s, cpu_hog: {node: leader, for: 2s}}\n",
			"t.yaml:7:30: timeline[1].cpu_hog.node", `"leader" is a role, but at 3s 2 of 3 servers are down (timeline[0] leader, timeline[0] follower), so there is no leader to resolve it by; want node-N`},
		{"gc on the leader while a majority is killed", "  - {at: 1s, power_loss: {nodes: node-0+node-1, relaunch_after: 15s, unsynced: keep}}\n  - {at: 3s, gc: {}}\n",
			"t.yaml:7:18: timeline[1].gc.node", `"leader" is a role, but at 3s 2 of 3 servers are down`},
		{"gc on a killed node", "  - {at: 1s, kill: {node: node-1, relaunch_after: 5s}}\n  - {at: 3s, gc: {node: node-1}}\n",
			"t.yaml:7:25: timeline[1].gc.node", "node-1's engine is down at 3s (timeline[0] kill took it down at 1s, back at 6s), and gc needs its engine up; want an offset after it is back, or another node"},
		{"cpu_hog on a node without power", "  - {at: 1s, power_loss: {nodes: node-2, relaunch_after: 5s}}\n  - {at: 3s, cpu_hog: {node: node-2, for: 1s}}\n",
			"t.yaml:7:30: timeline[1].cpu_hog.node", "node-2's host is down at 3s (timeline[0] power_loss took it down at 1s, back at 6s), and cpu_hog needs its host up"},
		{"power loss under a cpu_hog", "  - {at: 2s, cpu_hog: {node: node-0, for: 5s}}\n  - {at: 3s, power_loss: {nodes: node-0, relaunch_after: 2s}}\n",
			"t.yaml:7:34: timeline[1].power_loss.nodes", "takes node-0's host down at 3s, while timeline[0] cpu_hog (from 2s until 7s) needs it up; want an offset at 7s or later, or another node"},
		{"power loss with a cpu_hog at its offset", "  - {at: 3s, power_loss: {nodes: node-0, relaunch_after: 2s}}\n  - {at: 3s, cpu_hog: {node: node-0, for: 5s}}\n",
			"t.yaml:7:30: timeline[1].cpu_hog.node", "node-0's host is down at 3s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			probs := problemsOf(t, base+"timeline:\n"+c.timeline)
			wantProblem(t, probs, c.at, c.msg)
			if len(probs) != 1 {
				t.Errorf("want one problem; got:\n%v", probs)
			}
		})
	}
}

// What a node keeps while part of it is down is still there to act on: a partitioned node's
// engine answers its agent (gc) and its host spins (cpu_hog); a killed node's host spins; a hog
// and a kill of the engine beside it, or a crash that keeps the disks, leave the host up; once a
// majority is back the leader can be acted on again.
func TestTimelineStateAllowsWhatStandsUp(t *testing.T) {
	for _, tl := range []string{
		"  - {at: 1s, partition: {node: node-1, for: 5s}}\n  - {at: 2s, gc: {node: node-1}}\n  - {at: 3s, cpu_hog: {node: node-1, for: 1s}}\n",
		"  - {at: 1s, kill: {node: node-1, relaunch_after: 5s}}\n  - {at: 2s, cpu_hog: {node: node-1, for: 1s}}\n",
		"  - {at: 1s, cpu_hog: {node: node-0, for: 5s}}\n  - {at: 2s, kill: {node: node-0, relaunch_after: 1s}}\n",
		"  - {at: 1s, cpu_hog: {node: node-0, for: 5s}}\n  - {at: 2s, power_loss: {nodes: node-0, relaunch_after: 1s, unsynced: keep}}\n",
		"  - {at: 1s, cpu_hog: {node: node-0, for: 5s}}\n  - {at: 6s, power_loss: {nodes: node-0, relaunch_after: 1s}}\n",
		"  - {at: 1s, power_loss: {nodes: leader+follower, relaunch_after: 5s}}\n  - {at: 6s, wait_for: {phase: ready}}\n  - {at: 7s, snapshot: {}}\n  - {at: 8s, gc: {}}\n",
	} {
		if _, err := Parse("t.yaml", []byte(base+"timeline:\n"+tl), testDrivers); err != nil {
			t.Errorf("refused:\n%s%v", tl, err)
		}
	}
}

// A duration's refusal names both ends of its range: a hog, a partition, a kill's relaunch are
// capped at 24h, and saying only "1ms or more" sent the reader to try 1000h.
func TestDurationRangeNamesBothEnds(t *testing.T) {
	for _, entry := range []string{
		"{at: 1s, cpu_hog: {for: 1000h}}",
		"{at: 1s, partition: {node: node-1, for: 1000h}}",
		"{at: 1s, kill: {node: node-1, relaunch_after: 1000h}}",
	} {
		probs := problemsOf(t, base+"timeline:\n  - "+entry+"\n")
		if !strings.Contains(probs.Error(), "1000h is out of range; want a duration from 1ms to 24h") {
			t.Errorf("%s: %v", entry, probs)
		}
	}
}
