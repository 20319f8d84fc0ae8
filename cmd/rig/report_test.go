package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/results"
)

// miniRun writes a small run folder: 300 probes at 2 ms around one snapshot, no manifest.
func miniRun(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	ev, err := results.CreateEventLog(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ev.Add(results.Event{T: t0, Kind: results.KindRun, Phase: "load_start"})
	ev.Add(results.Event{T: t0.Add(time.Second), Kind: results.KindRun, Phase: "warmup_end"})
	ev.Add(results.Event{T: t0.Add(2 * time.Second), Kind: results.KindAction, Action: "snapshot", Node: "node-0", Detail: map[string]any{"index": 9}})
	ev.Add(results.Event{T: t0.Add(2100 * time.Millisecond), Kind: results.KindSnapshot, Node: "node-0", Detail: map[string]any{"index": 9, "take_ms": 80}})
	ev.Add(results.Event{T: t0.Add(3 * time.Second), Kind: results.KindRun, Phase: "load_end"})
	ev.Close()
	os.MkdirAll(filepath.Join(dir, "loadgen"), 0o755)
	pw, err := results.CreateProbes(filepath.Join(dir, "loadgen", "probes.bin"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		pw.Write(results.Probe{IntendedNs: t0.Add(time.Duration(i) * 10 * time.Millisecond).UnixNano(), LatencyNs: 2_000_000})
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
	for _, f := range []string{"summary.json", "report.md", results.PlotLatency} {
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
		rootCmd.SetArgs(c.args)
		rootCmd.SetOut(&bytes.Buffer{})
		rootCmd.SetErr(&bytes.Buffer{})
		err := rootCmd.Execute()
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
