package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/sweep"
)

// A sweep folder of two rounds of one run: `rig report SWEEP_DIR` re-analyses each run and
// writes the sweep report; `rig compare` reads it back.
func TestReportSweepAndCompare(t *testing.T) {
	dir := t.TempDir()
	sw := &sweep.Sweep{ID: "S", Playbook: "mini", Status: "ok", Rounds: 2, WarmFrom: 2}
	for i := 1; i <= 2; i++ {
		rd := sweep.RunDir(i, 2)
		if err := os.CopyFS(filepath.Join(dir, rd), os.DirFS(miniRun(t))); err != nil {
			t.Fatal(err)
		}
		sw.Runs = append(sw.Runs, sweep.Run{Dir: rd, Index: i, Round: i})
	}
	sw.Runs = append(sw.Runs, sweep.Run{Dir: "r03", Index: 3, Round: 3}) // planned, never ran
	if err := sw.Write(dir); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := reportSweep(&out, &errOut, dir, sweep.Options{}); err != nil {
		t.Fatalf("reportSweep: %v (%s)", err, errOut.String())
	}
	if !strings.Contains(out.String(), "2 of 3 run(s) with figures") {
		t.Errorf("stdout: %s", out.String())
	}
	for _, f := range []string{"report.md", "r01/summary.json", "r02/report.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	if !strings.Contains(string(md), "| (one setting) | 2/3 |") || !strings.Contains(string(md), "| r03 | 3 |") {
		t.Errorf("sweep report:\n%s", md)
	}
	if _, err := os.Stat(filepath.Join(dir, "r03")); err == nil {
		t.Error("report created the folder of a run that never ran")
	}

	if err := reportSweep(&out, &errOut, dir, sweep.Options{Baseline: "x"}); !errors.Is(err, errUsage) {
		t.Errorf("bad --baseline: %v, want a usage error", err)
	}

	cmpOut, _, err := runRig(t, "compare", dir, filepath.Join(dir, "r01"))
	if err != nil {
		t.Fatalf("compare: %v", err)
	}
	if !strings.Contains(cmpOut, "| p50 | ms | lower |") {
		t.Errorf("compare output:\n%s", cmpOut)
	}
	if _, _, err := runRig(t, "compare", dir, filepath.Join(dir, "nope")); !errors.Is(err, errUsage) {
		t.Errorf("compare with a missing folder: %v, want a usage error", err)
	}
}
