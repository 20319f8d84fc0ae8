package analysis

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/rundir"
)

// t0 is load_start in every fixture; offsets are in milliseconds so that every boundary is exact.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// fixture writes a run folder the way the runner does: events through rundir.EventLog, probes
// through rundir.CreateProbes, <node>/status.json as engine.Status, manifest.json.
type fixture struct {
	t   testing.TB
	dir string
	ev  *rundir.EventLog
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	ev, err := rundir.CreateEventLog(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, dir: dir, ev: ev}
}

// add writes one event given as its events.jsonl line (kind, envelope fields, detail), decoded
// into the typed event first: the fixtures read like the file they produce.
func (f *fixture) add(ms int64, line map[string]any) {
	f.t.Helper()
	line["t"] = at(ms)
	b, err := json.Marshal(line)
	if err != nil {
		f.t.Fatal(err)
	}
	var e rundir.Event
	if err := json.Unmarshal(b, &e); err != nil {
		f.t.Fatalf("fixture event %s: %v", b, err)
	}
	if err := f.ev.Add(e); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) run(ms int64, phase string) {
	f.add(ms, map[string]any{"kind": "run", "phase": phase})
}

func (f *fixture) action(ms int64, action, node string, detail map[string]any) {
	f.add(ms, map[string]any{"kind": "action", "action": action, "node": node, "detail": detail})
}

func (f *fixture) phase(ms int64, node, to string) {
	f.add(ms, map[string]any{"kind": "phase", "node": node, "phase": to})
}

func (f *fixture) role(ms int64, node, to string) {
	f.add(ms, map[string]any{"kind": "role", "node": node, "role": to})
}

func (f *fixture) snap(ms int64, node string, index int, takeMs float64, extra map[string]any) {
	d := map[string]any{"index": index, "take_ms": takeMs, "restored": false}
	for k, v := range extra {
		d[k] = v
	}
	f.add(ms, map[string]any{"kind": "snapshot", "node": node, "detail": d})
}

// note writes a note; with action "snapshot" it is the index note rigs wrote before the
// snapshot action carried its index.
func (f *fixture) note(ms int64, node, action string, detail map[string]any) {
	line := map[string]any{"kind": "note", "node": node, "action": action, "detail": detail}
	if action == "" {
		f.add(ms, line)
		return
	}
	// No writer makes these any more: append the line as an older rig wrote it.
	line["t"] = at(ms)
	b, err := json.Marshal(line)
	if err != nil {
		f.t.Fatal(err)
	}
	fh, err := os.OpenFile(filepath.Join(f.dir, "events.jsonl"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.Write(append(b, '\n')); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) probes(ps []rundir.Probe) {
	f.t.Helper()
	if err := os.MkdirAll(filepath.Join(f.dir, "loadgen"), 0o755); err != nil {
		f.t.Fatal(err)
	}
	w, err := rundir.CreateProbes(filepath.Join(f.dir, "loadgen", "probes.bin"))
	if err != nil {
		f.t.Fatal(err)
	}
	for _, p := range ps {
		if err := w.Write(p); err != nil {
			f.t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		f.t.Fatal(err)
	}
	// The load generator says how many it wrote: the analysis reads no more than that.
	st := rundir.ProbeStats{Scheduled: int64(len(ps))}
	for _, p := range ps {
		if p.Outcome == rundir.ProbeOK {
			st.Answered++
		} else {
			st.Lost++
		}
	}
	if err := atomicfile.WriteJSON(filepath.Join(f.dir, rundir.LoadgenDir, rundir.StatsFile), st); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) writeJSON(rel string, v any) {
	f.t.Helper()
	path := filepath.Join(f.dir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		f.t.Fatal(err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) status(node string, st engine.Status) {
	st.Node = node
	f.writeJSON(filepath.Join(node, "status.json"), st)
}

func (f *fixture) close() string {
	f.t.Helper()
	if err := f.ev.Close(); err != nil {
		f.t.Fatal(err)
	}
	return f.dir
}

// scenarioProbe is probe k of the follower-restart scenario: one every 10 ms from load start to
// 60 s, with a latency that tells which window it belongs to.
//
//	[0, 2) s warm-up      100 ms (must never show)
//	default               1.0 ms
//	[20, 30) s node-2 down 2.0 ms   [30, 31) s node-2 rejoining 3.0 ms
//	[40, 45) s node-1 down 2.0 ms   [45, 60) s node-1 rejoining 1.5 ms
//	5.0 s: 7 ms (all-up max); 9.0 s: 9 ms (first probe of snapshot 1's window);
//	10.0 s: 450 ms (snapshot 1's pause); 29.99 s: 2.5 ms (last probe of a half-open window);
//	30.0 s: 4 ms (first probe of the rejoin window); lost: 25.0 s, 30.5 s, 50.5 s.
func scenarioProbe(k int) rundir.Probe {
	ms := int64(k) * 10
	us := int64(1000)
	switch {
	case ms < 2000:
		us = 100_000
	case ms >= 20000 && ms < 30000, ms >= 40000 && ms < 45000:
		us = 2000
	case ms >= 30000 && ms < 31000:
		us = 3000
	case ms >= 45000:
		us = 1500
	}
	out := rundir.ProbeOK
	switch ms {
	case 5000:
		us = 7000
	case 9000:
		us = 9000
	case 10000:
		us = 450_000
	case 29990:
		us = 2500
	case 30000:
		us = 4000
	case 25000:
		us, out = 5_000_000, rundir.ProbeLost
	case 30500:
		us, out = 500_000, rundir.ProbeLost
	case 50500:
		us, out = 10_000, rundir.ProbeLost // gave up early: the pause still counts to the end of load
	}
	return rundir.Probe{IntendedNs: at(ms).UnixNano(), LatencyNs: us * 1000, Outcome: out}
}

const scenarioProbes = 6000

// followerRestartRun is the follower-restart playbook's shape, shrunk: a snapshot, a follower killed
// and relaunched that becomes ready, a second one that never does, and a final snapshot while it
// is still restoring.
func followerRestartRun(t testing.TB) string {
	f := newFixture(t)
	f.run(-6000, "start")
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		f.phase(-5900, n, "") // the runner logs a process launch as an empty phase
		f.phase(-5800, n, engine.PhaseStarting)
		f.phase(-5000, n, engine.PhaseReady)
	}
	f.run(-5500, "engines_started")
	f.role(-4900, "node-0", engine.RoleLeader)
	f.role(-4900, "node-1", engine.RoleFollower)
	f.run(-4000, "preload_start")
	f.run(-1000, "preload_end")
	f.run(0, "load_start")
	f.run(2000, "warmup_end")

	f.action(10000, "snapshot", "node-0", map[string]any{"index": 500, "leader": "node-0"})
	f.snap(10200, "node-0", 500, 150, map[string]any{"persisted_ms": 160, "bytes": 1_000_000})
	f.snap(10300, "node-1", 500, 180, nil)
	f.snap(10500, "node-2", 500, 200, nil)
	f.note(15000, "node-1", "", map[string]any{"warning": "engine.sync_level read back as 1"})

	f.action(20000, "kill", "node-2", map[string]any{"signal": "KILL", "as": "follower"})
	f.phase(20001, "node-2", "KILL") // the runner logs the signal as a phase: not an engine phase
	f.phase(20010, "node-2", "down")
	f.action(30000, "relaunch", "node-2", nil)
	f.phase(30005, "node-2", "")
	f.phase(30020, "node-2", engine.PhaseStarting)
	f.phase(30200, "node-2", engine.PhaseRestoring)
	f.snap(30300, "node-2", 500, 200, map[string]any{"restored": true, "restore_ms": 90})
	f.phase(30400, "node-2", engine.PhaseReplaying)
	f.phase(30500, "node-2", engine.PhaseCatchingUp)
	f.phase(31000, "node-2", engine.PhaseReady)

	f.action(40000, "kill", "node-1", map[string]any{"signal": "KILL"})
	f.phase(40010, "node-1", "down")
	f.action(45000, "relaunch", "node-1", nil)
	f.phase(45050, "node-1", engine.PhaseStarting)
	f.phase(46000, "node-1", engine.PhaseRestoring)

	// As the runner does it: the action carries no index; a note after the leader answered does.
	f.action(50000, "snapshot", "node-0", map[string]any{"leader": "node-0"})
	f.snap(50400, "node-0", 900, 300, nil)
	f.snap(50600, "node-2", 900, 320, nil)
	f.note(50700, "node-0", "snapshot", map[string]any{"index": 900, "leader": "node-0", "leader_take_ms": 300})
	f.snap(58000, "node-1", 900, 250, nil) // restoring at the action: listed, but no longer window

	f.run(60500, "load_end")
	f.run(61000, "end")

	ps := make([]rundir.Probe, scenarioProbes)
	for k := range ps {
		ps[k] = scenarioProbe(k)
	}
	// Completion order, not send order: the stalled probe at 10.0 s lands after later ones.
	ps[1000], ps[1040] = ps[1040], ps[1000]
	f.probes(ps)

	f.status("node-0", engine.Status{Role: "leader", Phase: "ready", AppliedIndex: 1000, Orders: 42, StateHash: "h1"})
	f.status("node-1", engine.Status{Role: "follower", Phase: "restoring", AppliedIndex: 1000, Orders: 42, StateHash: "h1"})
	f.status("node-2", engine.Status{Role: "follower", Phase: "ready", AppliedIndex: 999, Orders: 41, StateHash: "h2"})
	if err := os.MkdirAll(filepath.Join(f.dir, "node-3"), 0o755); err != nil { // the client node
		t.Fatal(err)
	}
	f.writeJSON("manifest.json", map[string]any{
		"run_id": "20250301-120000-follower-restart", "status": "interrupted", "cpus": 2,
		"load_avg": map[string]any{"start": []float64{1.0, 0.5, 0.25}, "end": []float64{3.5, 2, 1}},
		"playbook": map[string]any{
			"name":    "follower-restart",
			"engine":  map[string]any{"sync_level": 2, "snapshot_block": 16 << 20, "encode_threads": 8},
			"preload": map[string]any{"orders": 5_000_000},
			"load":    map[string]any{"probe_rate": 100},
		},
		"inventory": map[string]any{"nodes": []any{}}, // fields the analysis does not read
	})
	return f.close()
}

// roles makes leader the leader and the others followers from ms on.
func (f *fixture) roles(ms int64, leader string, followers ...string) {
	f.role(ms, leader, engine.RoleLeader)
	for _, n := range followers {
		f.role(ms, n, engine.RoleFollower)
	}
}

// excursions closes the fixture, analyses it and returns its summary and its excursions, which
// must be n; what, if any, says which case failed.
func (f *fixture) excursions(n int, what string) (*Summary, []Excursion) {
	f.t.Helper()
	s, err := Analyze(f.close())
	if err != nil {
		f.t.Fatal(err)
	}
	if s.Excursions == nil || s.Excursions.Count != n {
		if what != "" {
			what += ": "
		}
		f.t.Fatalf("%sexcursions %+v, want %d", what, s.Excursions, n)
	}
	return s, s.Excursions.List
}
