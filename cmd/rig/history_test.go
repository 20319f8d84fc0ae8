package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/history"
	"github.com/rig-dev/rig/rundir"
)

// TestHistoryVerbs: import a results folder, then list, table, trend and log it; bad input is a
// usage error that creates nothing.
func TestHistoryVerbs(t *testing.T) {
	results := t.TempDir()
	run := filepath.Join(results, "20261206-153433-snapshots")
	os.MkdirAll(run, 0o755)
	for _, f := range []string{rundir.ManifestFile, rundir.SummaryFile} {
		b, err := os.ReadFile(filepath.Join("..", "..", "history", "testdata", "run", f))
		if err != nil {
			t.Fatal(err)
		}
		// testdata/run is r01 of a sweep; alone here, under its own run id.
		b = []byte(strings.ReplaceAll(string(b), "20261206-153433-snapshots-r01", "20261206-153433-snapshots"))
		os.WriteFile(filepath.Join(run, f), b, 0o644)
	}
	index := filepath.Join(results, history.DefaultFile)

	// Nothing to read yet: refused, and no index made.
	for _, args := range [][]string{{"history"}, {"history", "table", "snapshot.take"}, {"history", "log"}} {
		if _, _, err := runRig(t, append(args, "--results", results)...); !errors.Is(err, errUsage) {
			t.Errorf("%v without an index: %v", args, err)
		}
	}
	if _, err := os.Stat(index); !os.IsNotExist(err) {
		t.Fatalf("a reading verb made %s", index)
	}

	out, _, err := runRig(t, "history", "import", results, "--results", results)
	if err != nil || !strings.Contains(out, "1 run(s) indexed, 0 skipped") {
		t.Fatalf("import: %v\n%s", err, out)
	}
	out, _, err = runRig(t, "history", "--results", results, "--where", "engine.sync_level=2", "--engine", "v2")
	if err != nil || !strings.Contains(out, "20261206-153433-snapshots") || !strings.Contains(out, "v2") {
		t.Errorf("list: %v\n%s", err, out)
	}
	out, _, _ = runRig(t, "history", "--results", results, "--where", "engine.sync_level=0")
	if strings.Contains(out, "20261206-153433-snapshots") {
		t.Errorf("sync level 0 listed the run:\n%s", out)
	}
	out, _, err = runRig(t, "history", "table", "snapshot.take", "--results", results)
	if err != nil || !strings.Contains(out, "n=3") {
		t.Errorf("table: %v\n%s", err, out)
	}
	plot := filepath.Join(t.TempDir(), "trend.svg")
	out, _, err = runRig(t, "history", "trend", "snapshot.take", "--results", results, "--order", "version", "--plot", plot)
	if err != nil || !strings.Contains(out, "No change point.") {
		t.Errorf("trend: %v\n%s", err, out)
	}
	if _, err := os.Stat(plot); err != nil {
		t.Error(err)
	}
	page := filepath.Join(results, "log.md")
	if _, _, err := runRig(t, "history", "log", "--results", results, "--out", page); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(page); !strings.Contains(string(b), "[20261206-153433-snapshots](20261206-153433-snapshots/report.md)") ||
		!strings.Contains(string(b), "`rig-fast run snapshots.yaml --results results --engine-version v2 -q`") {
		t.Errorf("log:\n%s", b)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"history", "--where", "nonsense"}, "--where"},
		{[]string{"history", "--since", "yesterday"}, "--since"},
		{[]string{"history", "--status", "good"}, "--status"},
		{[]string{"history", "table", "no.such"}, "snapshot.take"},
		{[]string{"history", "trend", "snapshot.take", "--order", "random"}, "--order"},
		{[]string{"history", "trend", "snapshot.take", "--order", "commit"}, "--commits"},
		{[]string{"history", "trend", "snapshot.take", "--max-p", "2"}, "--max-p"},
		{[]string{"history", "trend", "snapshot.take", "--plot", "x.jpg"}, "--plot"},
		{[]string{"history", "import", filepath.Join(results, "missing")}, "not a folder"},
		{[]string{"history", "import", "ftp://x/y"}, "s3://"},
	} {
		_, _, err := runRig(t, append(c.args, "--results", results)...)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want a usage error naming %s", c.args, err, c.want)
		}
	}
}
