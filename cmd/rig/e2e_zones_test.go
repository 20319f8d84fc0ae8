package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/linkproxy"
	"github.com/rig-dev/rig/rundir"
)

// zonesRun is a short run with the client beside node-0 and every other server in a zone of its
// own; a playbook adds its name, the distance and its timeline.
const zonesRun = `
cluster: {servers: 3, clients: 1}
engine: {sync_level: 1}
preload: {orders: 20k}
load: {probe_rate: 500/s}
warmup: 2s
duration: 10s
placement:
  zones: {a: [node-0, client-0], b: [node-1], c: [node-2]}
`

// zonesPlaybook puts the zones 2 ms apart each way and steps the leader down once.
const zonesPlaybook = "name: zones" + zonesRun + `  between_zones: {delay: 2ms}
timeline:
  - {at: 3s, wait_for: {stable_leader: 1s}}
  - {at: 3s, step_down: {}}
`

// A real 3-node local run with servers in three zones 2 ms apart: the round trip of every pair
// through its route is measured before load and recorded beside the asked 4 ms, within
// 20 % + 300 µs; the links are probed again under load; the run is ok; and the distance takes
// effect: a probe's commit needs the leader and a follower in another zone, so the median probe
// takes at least a round trip between zones.
func TestZonesEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	t.Parallel() // its own addresses and folders
	res := shortResults(t)
	out := runRigOK(t, "run", "--results", res, "--first-address", "127.0.72.11", writePlaybook(t, zonesPlaybook))
	dir := runDirOf(t, out)
	var m rundir.Manifest
	readJSON(t, filepath.Join(dir, rundir.ManifestFile), &m)
	if m.Status != rundir.StatusOK {
		t.Fatalf("status %q: %s", m.Status, m.Error)
	}
	// 6 raft pairs (each way its own link) + client-0 → node-1, node-2; node-0 ↔ client-0 share a zone.
	if len(m.LinkRTTs) != 8 {
		t.Fatalf("link_rtts: %d pairs, want 8: %+v", len(m.LinkRTTs), m.LinkRTTs)
	}
	for _, pp := range m.LinkRTTs {
		if pp.Probe.Set != 4*time.Millisecond || len(pp.LoadAvg) != 3 {
			t.Errorf("%s → %s: asked %v, load average %v; want 4ms and the load average", pp.From, pp.To, pp.Probe.Set, pp.LoadAvg)
		}
		if err := pp.Check(linkproxy.Tolerance, linkproxy.Floor); err != nil {
			t.Errorf("%v", err)
		}
	}
	// Probed again halfway through the load, with the run's traffic in the links.
	if len(m.LinkRTTsLoad) != 8 {
		t.Errorf("link_rtts_load: %d pairs, want 8: %+v", len(m.LinkRTTsLoad), m.LinkRTTsLoad)
	}
	for _, pp := range m.LinkRTTsLoad {
		if pp.Error != "" || pp.Probe.Set != 4*time.Millisecond || pp.Probe.Min < 4*time.Millisecond {
			t.Errorf("under load %s → %s: %+v", pp.From, pp.To, pp)
		}
	}
	var s struct {
		summary
		Probes struct {
			N     int     `json:"n"`
			P50Us float64 `json:"p50_us"`
		} `json:"probes"`
		StepDowns []struct {
			ClientGapMs *float64 `json:"client_gap_ms"`
		} `json:"step_downs"`
	}
	readJSON(t, filepath.Join(dir, "summary.json"), &s)
	if s.Status != "ok" || s.Probes.N < 2000 || len(s.StepDowns) != 1 {
		t.Fatalf("summary %+v", s)
	}
	if s.Probes.P50Us < 4000 {
		t.Errorf("probe p50 %.0f µs: below the 4 ms round trip between zones that every commit needs", s.Probes.P50Us)
	}
}

// delayPlaybook slows the leader's links by 5 ms each way for 3 s, then the links between the two
// followers by 2 ms for the rest of the run, on top of zones 1 ms apart.
const delayPlaybook = "name: delay" + zonesRun + `  between_zones: {delay: 1ms}
timeline:
  - {at: 3s, delay: {node: leader, delay: 5ms, for: 3s}}
  - {at: 4s, delay: {node: follower, to: other-follower, delay: 2ms}}
`

// A real run with delay actions: each records the round trips of the links it changed, measured
// right after on the links themselves (the zones' delay plus its own), the first its end; the run
// is ok (the servers agree on a final state).
func TestDelayEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	t.Parallel()
	res := shortResults(t)
	dir := runDirOf(t, runRigOK(t, "run", "--results", res, "--first-address", "127.0.76.11", writePlaybook(t, delayPlaybook)))
	var s summary
	readJSON(t, filepath.Join(dir, "summary.json"), &s)
	if s.Status != "ok" {
		t.Fatalf("status %q: %s %s", s.Status, s.StatusReason, s.Error)
	}
	evs, _, err := rundir.ReadEvents(filepath.Join(dir, rundir.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	var delays, heals []rundir.Event
	for _, e := range evs {
		switch {
		case e.IsAction(actions.ActDelay):
			delays = append(delays, e)
		case e.IsAction(actions.ActDelayHeal):
			heals = append(heals, e)
		}
	}
	if len(delays) != 2 || len(heals) != 1 {
		t.Fatalf("%d delay and %d delay_heal events, want 2 and 1", len(delays), len(heals))
	}
	leader, pair := actions.DelayOf(delays[0]), actions.DelayOf(delays[1])
	// The leader's 2 peers each way and the client's link to it; the followers' 2 links.
	if leader.Links != 5 || len(leader.RTTs) != 5 || pair.Links != 2 || len(pair.RTTs) != 2 || actions.DelayOf(heals[0]).Links != 5 {
		t.Fatalf("delays %+v, %+v, heal %+v", leader, pair, actions.DelayOf(heals[0]))
	}
	for _, d := range []*actions.DelayAction{leader, pair} {
		for _, r := range d.RTTs {
			if r.Error != "" || r.Probe.Min < r.Probe.Set || r.Probe.Set < 2*time.Duration(d.DelayMs*1e6) {
				t.Errorf("%s → %s after a %v ms delay: %+v", r.From, r.To, d.DelayMs, r)
			}
		}
	}
}
