package sweep

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
)

func TestTracker(t *testing.T) {
	pb, err := playbooks.Open("snapshot-pause", testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := pb.Plan()
	if err != nil {
		t.Fatal(err)
	}
	res := t.TempDir()
	var out bytes.Buffer
	tr, err := Start(res, pl, "snapshot-pause", StartOptions{Progress: &out, Target: "local"})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	tr.now = func() time.Time { return clock }
	n := len(pl.Runs)

	tr.Begin(0)
	first := out.String()
	if !regexp.MustCompile(`run 1/24 \(preload.orders=1M engine.sync_level=0 engine.snapshot_block=1MiB engine.encode_threads=1, round 1\), ETA \d\d:\d\d \(~\S+ left, from the plan's estimate`).MatchString(first) {
		t.Errorf("first progress line: %q", first)
	}
	dir, id := tr.RunDir(0)
	if filepath.Base(dir) != "r01" || !strings.HasSuffix(id, "-r01") || filepath.Dir(dir) != tr.Dir {
		t.Errorf("run dir %s id %s", dir, id)
	}
	// The first run took twice its estimate: the ETA of the rest doubles.
	est := pl.Estimates()
	clock = clock.Add(2 * est[0].Total)
	if err := tr.End(0, id, rundir.StatusOK); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	tr.Begin(1)
	var left time.Duration
	for _, e := range est[1:] {
		left += e.Total
	}
	if want := "~" + (2 * left).Round(time.Second).String() + " left)"; !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "run 2/24") {
		t.Errorf("second progress line %q, want %q", out.String(), want)
	}

	sw, err := Read(tr.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.Runs) != n || sw.Runs[0].Status != rundir.StatusOK || sw.Runs[0].RunID != id || sw.Runs[1].Status != rundir.StatusRunning || sw.Runs[1].Attempt != 1 || sw.PlaybookHash == "" || sw.Target != "local" || len(sw.Attempts) != 1 || sw.WarmFrom != 2 {
		t.Errorf("sweep.json runs: %+v", sw.Runs[:2])
	}
	out.Reset()
	path, err := tr.Finish(Status([]string{rundir.StatusOK, rundir.StatusFailed}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), path) {
		t.Errorf("finish printed %q, want the report path %s", out.String(), path)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), "Status **failed**") || !strings.Contains(string(b), "| r24 | 1 |") {
		t.Errorf("report:\n%s", b)
	}
	if Status([]string{"ok", "interrupted", "failed"}) != "interrupted" || Status([]string{"ok"}) != "ok" {
		t.Error("Status")
	}
}
