package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// The validation half of the fault suite (docs/security.md "Bad input"): playbooks that
// rig validate accepted and whose runs then failed or hung, and stack config items refused
// without a place or not at all. Each is given to the built rig as a user would and must be
// refused, exit 2, with file:line:column and what would be valid.
func TestFaultValidatedThenFailedRefused(t *testing.T) {
	dir := t.TempDir()
	const head = "name: f\nduration: 15s\nload: {probe_rate: 100/s}\n"
	for _, c := range []struct {
		what, body string
		wants      []string
	}{
		{"kill of a node without power",
			"disk: {sync_latency: 2ms}\ntimeline:\n  - {at: 1s, power_loss: {nodes: node-0, relaunch_after: 4s}}\n  - {at: 4s, kill: {node: node-0}}\n",
			[]string{":7:27: timeline[1].kill.node: node-0 is still down at 4s (timeline[0] power_loss took it down at 1s, back at 5s)"}},
		{"every server down",
			"disk: {sync_latency: 2ms}\ntimeline:\n  - {at: 1s, power_loss: {nodes: node-0+node-1, relaunch_after: 5s}}\n  - {at: 2s, kill: {node: node-2, relaunch_after: 1s}}\n",
			[]string{":7:20: timeline[1].kill: leaves all 3 servers down at 2s", "allow_all_down: true"}},
		{"delay whose probe outlasts the run",
			"timeline:\n  - {at: 4s, delay: {node: node-1, delay: 10s}}\n",
			[]string{":5:43: timeline[0].delay.delay: the round-trip probe after the change", "want delay at most 220ms here"}},
		{"disk probe of minutes", "disk: {sync_latency: 10s}\n",
			[]string{":4:22: disk.sync_latency: the model makes the disk probe before load", "take 3m30s a pass", "want sync_latency at most 952.1ms"}},
		{"disk: {}", "disk: {}\n", []string{":4:7: disk: models nothing", "want at least one of throughput"}},
		{"disk throughput 0/s", "disk: {throughput: 0/s}\n", []string{":4:7: disk: models nothing"}},
	} {
		p := writeFile(t, dir, strings.NewReplacer(" ", "-", "/", "-").Replace(c.what)+".yaml", head+c.body)
		errOut, rss := rigRefuses(t, "validate", p)
		for i := range c.wants {
			if strings.HasPrefix(c.wants[i], ":") {
				c.wants[i] = p + c.wants[i]
			}
		}
		wantRefusal(t, c.what, errOut, rss, c.wants...)
	}

	// The same timeline with the opt-in is valid, and the plan names the moment.
	allDown := writeFile(t, dir, "all-down-allowed.yaml", head+"allow_all_down: true\ndisk: {sync_latency: 2ms}\ntimeline:\n"+
		"  - {at: 1s, power_loss: {nodes: node-0+node-1, relaunch_after: 5s}}\n  - {at: 2s, kill: {node: node-2, relaunch_after: 1s}}\n")
	if out, errOut, code := rigRun(t, "validate", allDown); code != 0 || !strings.Contains(out, "all 3 servers down at +2s (timeline[0], timeline[1]; the first back at +3s)") {
		t.Errorf("allow_all_down: exit %d\n%s\n%s", code, out, errOut)
	}
}

// A rig:dataVolumes item's problem names the item at its line:column; a setting given twice and a
// unit other than the setting's own are refused (they were last-wins and ignored).
func TestFaultStackConfigItemsRefused(t *testing.T) {
	body, err := os.ReadFile("../../infra/spec/testdata/Pulumi.valid.yaml")
	if err != nil {
		t.Fatal(err)
	}
	base := strings.NewReplacer("  rig:volumeThroughput: \"1000\"\n", "", "  rig:volumeIops: \"4000\"\n", "").Replace(string(body))
	if strings.Contains(base, "rig:volume") {
		t.Fatal("the test stack config sets volume keys this test does not expect")
	}
	line := strings.Count(base, "\n") + 2 // the item's line, after "  rig:dataVolumes:"
	dir := t.TempDir()
	for _, c := range []struct{ what, item, want string }{
		{"volume name as a path", `"../x"`, `rig:dataVolumes[0] = "../x"`},
		{"size given twice", "a type=gp3 size=200 size=9 iops=3000 throughput=125", "rig:dataVolumes[0].size = \"size=9\": allowed each setting once"},
		{"size in MiB/s", "a type=gp3 size=200MiB/s iops=3000 throughput=125",
			`rig:dataVolumes[0].size = "200MiB/s": allowed a whole number, optionally followed by GiB (e.g. size=200 or size=200GiB) (MiB/s is not a unit of size)`},
		{"throughput in GiB", "a type=gp3 size=200 iops=3000 throughput=125GiB",
			`rig:dataVolumes[0].throughput = "125GiB": allowed a whole number, optionally followed by MiB/s`},
	} {
		p := writeFile(t, dir, "Pulumi.items.yaml", base+"  rig:dataVolumes:\n    - "+c.item+"\n")
		errOut, rss := rigRefuses(t, "validate", "quickstart", "--stack-config", p)
		wantRefusal(t, c.what, errOut, rss, p+":"+strconv.Itoa(line)+":7: "+c.want)
	}
}
