package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/rundir"
)

// hogPlaybook: a cpu_hog on every CPU of the leader's host (the local target: this machine)
// for 3 s, and a snapshot inside it, on the reference engine.
const hogPlaybook = `
name: cpu-hog-short
cluster: {servers: 3, clients: 1}
engine: {sync_level: 1}
preload: {orders: 20k}
load: {probe_rate: 400/s}
warmup: 1s
duration: 8s
timeline:
  - {at: 2s, cpu_hog: {node: leader, for: 3s}}
  - {at: 3s, snapshot: {}}
`

// TestCPUHogEndToEnd ("every pause explained") runs a cpu_hog action on real processes:
// the leader's agent starts `rig agent hog` with a thread per CPU for 3 s, which the run records
// when asked for and when it ended (by itself, at its time); the latency it makes is named
// host_cpu from the OS samples and, while it lasts (actions.Spanner), the cpu_hog action; and
// no hog outlives the run.
func TestCPUHogEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run takes ~35 s")
	}
	res := t.TempDir()
	stdout := runRigOK(t, "run", "--results", res, "--first-address", "127.0.157.11", writePlaybook(t, hogPlaybook))
	dir := runDirOf(t, stdout)
	var s analysis.Summary
	readJSON(t, filepath.Join(dir, rundir.SummaryFile), &s)
	evs, _, err := rundir.ReadEvents(filepath.Join(dir, rundir.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	var origin time.Time
	var start, end *actions.CPUHogAction
	var hogS float64
	for _, e := range evs {
		if e.IsRun(rundir.LoadStart) {
			origin = e.T
		}
		for name, into := range map[rundir.ActionName]**actions.CPUHogAction{actions.ActCPUHog: &start, actions.ActCPUHogEnd: &end} {
			if !e.IsAction(name) {
				continue
			}
			*into = new(actions.CPUHogAction)
			if err := json.Unmarshal(e.Action.Payload, *into); err != nil {
				t.Fatalf("%s payload %s: %v", name, e.Action.Payload, err)
			}
			if name == actions.ActCPUHog {
				hogS = e.T.Sub(origin).Seconds()
			}
		}
	}
	if start == nil || end == nil {
		t.Fatalf("events.jsonl has cpu_hog %v and cpu_hog_end %v; want both", start, end)
	}
	if start.As != "leader" || start.PID <= 0 || start.Threads != runtime.NumCPU() || start.Nice != 0 || start.ForMs != 3000 {
		t.Errorf("cpu_hog payload %+v; want the leader's hog, a thread per CPU (%d), nice 0, for 3 s", *start, runtime.NumCPU())
	}
	if took := end.Ended.Sub(end.Started); end.PID != start.PID || end.StoppedEarly || took < 3*time.Second || took > 5*time.Second {
		t.Errorf("cpu_hog_end payload %+v after %s; want the same hog, ended by itself after its 3 s", *end, took)
	}
	// host_cpu, from the OS samples: in a window inside the hog, or an excursion inside it.
	named, hostCPU := 0, 0
	for _, w := range s.Windows {
		if w.ToS < hogS || w.FromS > hogS+3 { // overlapping the hog
			continue
		}
		for _, r := range w.Rows {
			if r.Cause == string(analysis.CauseHostCPU) && r.Count > 0 {
				hostCPU++
				t.Logf("%s #%d at %.3f s (hog from %.3f s): %s %s, %.1f ms of CPU", w.Kind, w.Index, w.FromS, hogS, r.Node, r.Cause, r.TotalMs)
			}
		}
	}
	if s.Excursions != nil {
		for _, e := range s.Excursions.List {
			var kinds []string
			hog := false
			for _, c := range e.Causes {
				kinds = append(kinds, string(c.Kind)+" "+c.Evidence)
				if c.Kind == analysis.CauseAction && strings.Contains(c.Evidence, string(actions.ActCPUHog)) {
					hog = true
				}
				if c.Kind == analysis.CauseHostCPU && e.EndS >= hogS && e.StartS <= hogS+3 {
					hostCPU++
				}
			}
			t.Logf("excursion %.3f–%.3f s, peak %.1f ms: %v", e.StartS, e.EndS, e.PeakMs, kinds)
			// The hog explains what overlaps it (actions.Spanner: until its cpu_hog_end).
			if e.EndS >= hogS && e.StartS <= hogS+3 {
				if !hog {
					t.Errorf("excursion %.3f–%.3f s, overlapping the hog from %.3f s, does not name the cpu_hog action: %+v", e.StartS, e.EndS, hogS, e.Causes)
				}
				named++
			}
		}
	}
	if hostCPU == 0 {
		t.Errorf("nothing inside the hog (from %.3f s) named host_cpu: windows %+v, excursions %+v", hogS, s.Windows, s.Excursions)
	}
	if named == 0 {
		t.Errorf("no excursion overlapping the hog (from %.3f s) to name it", hogS)
	}
	if t.Failed() {
		rep, _ := os.ReadFile(filepath.Join(dir, rundir.ReportFile))
		t.Logf("report.md:\n%s", rep)
	}
	assertNoProcessesUnder(t, res)
	// The hog's command line names no folder of the run: look for the subcommand itself.
	assertNoneRunning(t, func(b []byte) bool { return bytes.HasPrefix(b, []byte(rigBin+"\x00agent\x00hog\x00")) })
}
