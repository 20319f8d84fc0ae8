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

	"github.com/rig-dev/rig/analysis"
	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/rundir"
)

// miniRun writes a small run folder: 300 probes at 2 ms around one snapshot, no manifest.
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
	ev.Add(rundir.Event{T: t0.Add(2 * time.Second), Node: "node-0", Action: &rundir.Action{Name: rundir.ActSnapshot, Snapshot: &rundir.SnapshotAction{Index: &index}}})
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
	return dir
}

func TestReportRewritesRunFolder(t *testing.T) {
	dir := miniRun(t)
	var out, errOut bytes.Buffer
	if err := report(&out, &errOut, dir); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "probes n=200 lost=0 p50 2.00 ms · 1 snapshot(s)") {
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
// as a warning naming it; rig report neither hangs nor reads without end (issue 33).
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
		"manifest.json " + filepath.Join(dir, rundir.ManifestFile) + " is a character device",
		"status.json " + filepath.Join(dir, "node-0", rundir.StatusFile) + " is a named pipe (FIFO)",
	} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
}
