package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/actions"
	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/rundir"
)

// miniRun writes a small run folder: 300 probes at 2 ms around one snapshot and the load
// generator's stats.json declaring them, no manifest.
func miniRun(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	ev, err := rundir.CreateEventLog(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	index := uint64(9)
	ev.Add(rundir.Event{T: t0, Run: &rundir.Run{Phase: rundir.LoadStart}})
	ev.Add(rundir.Event{T: t0.Add(time.Second), Run: &rundir.Run{Phase: rundir.WarmupEnd}})
	snap, err := actions.NewEvent(t0.Add(2*time.Second), "node-0", actions.ActSnapshot, "", actions.SnapshotAction{Index: &index})
	if err != nil {
		t.Fatal(err)
	}
	ev.Add(snap)
	ev.Add(rundir.Event{T: t0.Add(2100 * time.Millisecond), Node: "node-0", Snapshot: &rundir.SnapshotTaken{Snapshot: engine.Snapshot{Index: 9, TakeMs: 80}}})
	ev.Add(rundir.Event{T: t0.Add(3 * time.Second), Run: &rundir.Run{Phase: rundir.LoadEnd}})
	ev.Close()
	os.MkdirAll(filepath.Join(dir, "loadgen"), 0o755)
	pw, err := rundir.CreateProbes(filepath.Join(dir, "loadgen", "probes.bin"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		pw.Write(rundir.Probe{IntendedNs: t0.Add(time.Duration(i) * 10 * time.Millisecond).UnixNano(), LatencyNs: 2_000_000})
	}
	pw.Close()
	if err := atomicfile.WriteJSON(filepath.Join(dir, rundir.LoadgenDir, rundir.StatsFile), rundir.ProbeStats{Scheduled: 300, Answered: 300}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestReportRewritesRunFolder(t *testing.T) {
	dir := miniRun(t)
	var out, errOut bytes.Buffer
	if err := report(&out, &errOut, dir); err != nil {
		t.Fatal(err)
	}
	// No status.json: the hashes are not checked, which is no difference.
	if !strings.Contains(out.String(), "probes n=200 lost=0 p50 2.00 ms · 1 snapshot(s)") || !strings.Contains(out.String(), "state hashes not checked") {
		t.Errorf("stdout: %q", out.String())
	}
	if !strings.Contains(errOut.String(), "warning: no manifest.json") {
		t.Errorf("stderr: %q", errOut.String())
	}
	for _, f := range []string{"summary.json", "report.md", analysis.PlotLatency} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

func TestReportBadInput(t *testing.T) {
	empty := t.TempDir()
	file := filepath.Join(empty, "x.txt")
	os.WriteFile(file, []byte("x"), 0o644)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"report"}, "report takes one RUN_DIR"},
		{[]string{"report", empty, empty}, "got 2 arguments"},
		{[]string{"report", filepath.Join(empty, "nope")}, "no such file"},
		{[]string{"report", file}, "is a file"},
		{[]string{"report", empty}, "is not a run folder: it holds none of manifest.json, events.jsonl, loadgen/probes.bin"},
	} {
		_, _, err := runRig(t, c.args...)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("rig %v: %v, want a usage error containing %q", c.args, err, c.msg)
		}
	}
	// Bad input changes nothing.
	entries, _ := os.ReadDir(empty)
	if len(entries) != 1 {
		t.Errorf("folder changed by a rejected report: %v", entries)
	}
}

// A run folder is named by the user to rig report and may hold anything: a symlink to /dev/zero
// in place of manifest.json, a FIFO in place of a node's status.json or of summary.json in a
// sweep. Each is refused as a file by the one guarded reader (internal/untrusted) and reported
// as a warning naming it; rig report neither hangs nor reads without end.
func TestReportRefusesNonFiles(t *testing.T) {
	dir := miniRun(t)
	if err := os.Symlink("/dev/zero", filepath.Join(dir, rundir.ManifestFile)); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "node-0"), 0o755)
	if err := syscall.Mkfifo(filepath.Join(dir, "node-0", rundir.StatusFile), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- report(&out, &errOut, dir) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second): // a guard against hanging the suite, not a measurement
		t.Fatal("rig report blocked on a FIFO or read /dev/zero")
	}
	for _, want := range []string{
		"manifest.json: leads outside the run folder (a symlink to /dev/zero): refused",
		"status.json node-0/status.json is a named pipe (FIFO)",
	} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
}

// reportIn runs rig report on dir, failing the test if it does not return within a minute (a
// guard against hanging the suite, not a measurement).
func reportIn(t *testing.T, dir string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- report(&out, &errOut, dir) }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("rig report did not return in 60 s")
	}
	return out.String(), errOut.String(), err
}

// A probes.bin padded with zeros past what the load generator wrote is refused before it is
// read, naming the file, the count stats.json declares and what the file holds: the padding once
// grew rig report to gigabytes and its zero latencies panicked the log-scale plot. The rest of
// the run is still reported.
func TestReportRefusesPaddedProbes(t *testing.T) {
	dir := miniRun(t)
	probes := filepath.Join(dir, rundir.LoadgenDir, rundir.ProbesFile)
	if err := os.Truncate(probes, 64<<20); err != nil { // zeros past the 300 records: 3,947,579 probes at the epoch
		t.Fatal(err)
	}
	_, stderr, err := reportIn(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := "loadgen/probes.bin holds 3,947,579 records (67,108,864 bytes); loadgen/stats.json declares 300: more records than the run declared: refused, not read"
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, rundir.ReportFile)); err != nil {
		t.Errorf("no report: %v", err)
	}
}

// A load generator's stats.json declaring more probes than this machine could hold, beside a
// probes.bin that holds them (sparse: no disk is spent), is refused before anything is read or
// written, naming what the analysis would need and what there is, as rig validate refuses a
// book that does not fit.
func TestReportRefusesWhatDoesNotFitInMemory(t *testing.T) {
	dir := miniRun(t)
	const n = 1 << 36 // 64 Gi probes: 4 TiB of them resident
	if err := atomicfile.WriteJSON(filepath.Join(dir, rundir.LoadgenDir, rundir.StatsFile), rundir.ProbeStats{Scheduled: n, Answered: n}); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, rundir.LoadgenDir, rundir.ProbesFile), 8+17*n); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadDir(dir)
	_, _, err := reportIn(t, dir)
	if !errors.Is(err, analysis.ErrMemory) {
		t.Fatalf("err = %v, want analysis.ErrMemory", err)
	}
	for _, want := range []string{"68,719,476,736 probes × 64 B", "this machine has", "MemAvailable in this machine's /proc/meminfo"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nlacks %q", err, want)
		}
	}
	if after, _ := os.ReadDir(dir); len(after) != len(before) {
		t.Errorf("a refused report changed the folder: %v, was %v", after, before)
	}
}

// Every file rig report reads or writes stays inside the run folder: events.jsonl, a node's
// status.json and OS samples that are symlinks leading out, and a plots folder that is one, are
// refused, each named in a warning; nothing is written where the plots symlink points, and what
// the other files hold is not reported.
func TestReportConfinedToRunFolder(t *testing.T) {
	dir := miniRun(t)
	outside := t.TempDir()
	// Elsewhere, files a run folder could point at: another run's events (a different snapshot
	// count), a status.
	if err := os.Rename(filepath.Join(dir, rundir.EventsFile), filepath.Join(outside, rundir.EventsFile)); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(outside, rundir.StatusFile), []byte(`{"phase":"ready","state_hash":"OUTSIDE"}`), 0o644)
	os.WriteFile(filepath.Join(outside, "os.ndjson"), []byte(`{"time":"2025-03-01T12:00:01Z","cpus":1,"load":{"load1":99,"overloaded":true}}`+"\n"), 0o644)
	plotsOut := filepath.Join(outside, "plots")
	os.MkdirAll(plotsOut, 0o755)
	os.MkdirAll(filepath.Join(dir, "node-0", rundir.SamplesDir), 0o755)
	for link, target := range map[string]string{
		rundir.EventsFile:                       filepath.Join(outside, rundir.EventsFile),
		"node-0/" + rundir.StatusFile:           filepath.Join(outside, rundir.StatusFile),
		"node-0/" + rundir.TransitionsFile:      filepath.Join(outside, rundir.StatusFile),
		"node-0/samples/os" + rundir.SamplesExt: "../../" + strings.Repeat("../", strings.Count(outside, "/")) + outside[1:] + "/os.ndjson",
		rundir.PlotsDir:                         plotsOut,
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	_, stderr, err := reportIn(t, dir)
	if !errors.Is(err, rundir.ErrOutside) || !strings.Contains(err.Error(), "plots/latency.png") {
		t.Errorf("err = %v, want the plots refused (rundir.ErrOutside)", err)
	}
	for _, want := range []string{
		"events.jsonl: leads outside the run folder (a symlink to " + filepath.Join(outside, rundir.EventsFile) + "): refused",
		"node-0/status.json: leads outside the run folder (a symlink to " + filepath.Join(outside, rundir.StatusFile) + "): refused",
		"node-0/samples/os.ndjson: leads outside the run folder (a symlink to ../../",
		"plots/latency.png: leads outside the run folder (plots is a symlink to " + plotsOut + "): refused",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if es, _ := os.ReadDir(plotsOut); len(es) > 0 {
		t.Errorf("rig report wrote outside the run folder: %v", es)
	}
	b, err := os.ReadFile(filepath.Join(dir, rundir.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"OUTSIDE", `"node-0": 0`} {
		if strings.Contains(string(b), leak) {
			t.Errorf("summary.json holds %q, from a file outside the run folder", leak)
		}
	}
	if strings.Contains(string(b), `"at_s": 2`) {
		t.Error("summary.json has the snapshot of the events outside the run folder")
	}
}
