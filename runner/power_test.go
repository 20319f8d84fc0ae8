package runner

import (
	"os"
	"strings"
	"testing"

	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/target"
	"github.com/rig-dev/rig/target/local"
	sshtarget "github.com/rig-dev/rig/target/ssh"
	"github.com/rig-dev/rig/target/targettest"
)

const powerLossYAML = `
name: p
cluster: {servers: 3, clients: 1}
load: {probe_rate: 100/s}
duration: 20s
timeline:
  - {at: 4s, power_loss: {nodes: leader+follower, relaunch_after: 1s}}
`

// A power loss runs where the target can cut its servers' power, with what that needs: the local
// target a disk: block (its disk models lose the writes), a stack none (its nodes reboot), an
// inventory only when its agents get a SysRq trigger. Everything else is refused before anything
// starts, naming the entry and what would work; unsynced: keep (a kill -9) runs anywhere.
func TestCheckTargetPowerLoss(t *testing.T) {
	withDisk := strings.Replace(powerLossYAML, "duration: 20s", "duration: 20s\ndisk: {sync_latency: 2ms}", 1)
	keep := strings.Replace(powerLossYAML, "relaunch_after: 1s", "relaunch_after: 1s, unsynced: keep", 1)
	inv := inventory.FileTarget{Path: "nodes.json"}
	noTrigger := sshtarget.New(sshtarget.TargetOptions{Nodes: inv})
	rebooting := sshtarget.New(sshtarget.TargetOptions{Nodes: inv, SysrqTrigger: sshtarget.PowerCutNodes})
	for _, c := range []struct {
		name string
		body string
		t    target.Target
		want []string // nil: accepted
	}{
		{"local, disk:", withDisk, local.New(local.Options{}), nil},
		{"local, no disk:", powerLossYAML, local.New(local.Options{}), []string{"timeline[0] power_loss", "disk: block", "sync_latency"}},
		{"no power cuts", powerLossYAML, &targettest.Target{}, []string{"timeline[0] power_loss", "cannot cut its servers' power", "local target with a disk: block"}},
		{"inventory without a trigger", powerLossYAML, noTrigger, []string{"timeline[0] power_loss", "--stack", "--sysrq-trigger /proc/sysrq-trigger", "unsynced: keep"}},
		{"inventory without a trigger, keep", keep, noTrigger, nil},
		{"nodes that reboot", powerLossYAML, rebooting, nil},
		{"nodes that reboot, disk:", withDisk, rebooting, []string{"timeline[0] power_loss", "reboots each node without sync", "leave disk: out"}},
	} {
		err := CheckTarget(planOf(t, c.body), c.t)
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: refused: %v", c.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: accepted; want a refusal", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v; want it to say %q", c.name, err, w)
			}
		}
	}
	// rig run checks before anything starts: no run folder.
	res := t.TempDir()
	if _, err := Run(t.Context(), planOf(t, powerLossYAML), Options{Target: noTrigger, ResultsDir: res}); err == nil || !strings.Contains(err.Error(), "power_loss") {
		t.Errorf("Run: %v; want the refusal", err)
	}
	if ents, _ := os.ReadDir(res); len(ents) != 0 {
		t.Errorf("a refused run left %d entries in the results folder", len(ents))
	}
}
