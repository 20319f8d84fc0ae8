package sweep

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/internal/testfs"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
)

const resumeBook = `
name: rs
cluster: {servers: 1, clients: 1}
preload: {orders: 1k}
load: {probe_rate: 100/s}
warmup: 0s
duration: 1s
matrix: {engine.sync_level: [0, 1]}
rounds: 3
`

func resumePlan(t *testing.T, body string) *playbooks.Plan {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rs.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	pb, err := playbooks.Open(p, testDrivers)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := pb.Plan()
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// fakeRun leaves what a run's folder holds at the end (manifest with status, and a summary when
// it ended).
func fakeRun(t *testing.T, dir, status string, summary bool) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := rundir.WriteManifest(dir, &rundir.Manifest{RunID: filepath.Base(dir), Status: status}); err != nil {
		t.Fatal(err)
	}
	if summary {
		if err := os.WriteFile(filepath.Join(dir, rundir.SummaryFile), []byte(`{"status":"`+status+`"}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A controller killed at each point of a sweep leaves a folder Resume accepts and continues
// correctly: sweep.json behind the run folders (a run ended ok but not recorded; a run begun but
// its folder not made), a folder without a manifest, a failed run, and a resume killed between
// recording its moves and making them.
func TestResumeAfterEachCrashPoint(t *testing.T) {
	pl := resumePlan(t, resumeBook)
	res := t.TempDir()
	tr, err := Start(res, pl, "rs", StartOptions{Target: "local"})
	if err != nil {
		t.Fatal(err)
	}
	d := tr.Dir
	// r01 ok and recorded; r02 failed and recorded; r03 ended ok, killed before End;
	// r04 begun, killed before its manifest; r05 begun, killed before its folder; r06 never.
	for i := 0; i < 5; i++ {
		if err := tr.Begin(i); err != nil {
			t.Fatal(err)
		}
	}
	fakeRun(t, filepath.Join(d, "r01"), rundir.StatusOK, true)
	tr.End(0, "x-r01", rundir.StatusOK)
	fakeRun(t, filepath.Join(d, "r02"), rundir.StatusFailed, true)
	tr.End(1, "x-r02", rundir.StatusFailed)
	fakeRun(t, filepath.Join(d, "r03"), rundir.StatusOK, true)
	os.Mkdir(filepath.Join(d, "r04"), 0o755)
	tr.unlock() // the controller is gone

	// The folder is accepted by the report as it is.
	if _, err := Load(d); err != nil {
		t.Fatalf("Load of the killed sweep: %v", err)
	}
	// A second controller while one holds the lock is refused.
	held, err := lockSweep(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Resume(d, pl, ResumeOptions{StartOptions: StartOptions{Target: "local"}}); !errors.Is(err, ErrLocked) {
		t.Fatalf("resume while locked: %v, want ErrLocked", err)
	}
	held.Close()
	// Another target is refused, naming both.
	if _, err := Resume(d, pl, ResumeOptions{StartOptions: StartOptions{Target: "inventory:x.json"}}); !errors.Is(err, ErrResumeRefused) ||
		!strings.Contains(err.Error(), "the sweep ran on local, this would run on inventory:x.json") {
		t.Fatalf("resume on another target: %v", err)
	}
	// Another plan is refused, naming the fields.
	other := resumePlan(t, strings.Replace(resumeBook, "rounds: 3", "rounds: 2", 1))
	if _, err := Resume(d, other, ResumeOptions{StartOptions: StartOptions{Target: "local"}}); err == nil || !strings.Contains(err.Error(), "rounds: 3 → 2") {
		t.Fatalf("resume with another plan: %v", err)
	}
	if pend, err := Pending(d); err != nil || len(pend) != 4 || pend[0] != 1 || pend[1] != 3 {
		t.Fatalf("Pending: %v %v, want every run but r01 and r03", pend, err)
	}

	// Killed after recording the moves, before making them: sweep.json says moved, the folders
	// are still in place. Simulated by writing what Resume writes, then undoing its renames.
	tr2, err := Resume(d, pl, ResumeOptions{StartOptions: StartOptions{Target: "local"}})
	if err != nil {
		t.Fatal(err)
	}
	tr2.unlock()
	for _, r := range []string{"r02", "r04"} {
		if err := os.Rename(filepath.Join(d, AttemptsDir, "1", r), filepath.Join(d, r)); err != nil {
			t.Fatalf("undo the move of %s: %v", r, err)
		}
	}
	tr3, err := Resume(d, pl, ResumeOptions{StartOptions: StartOptions{Target: "local"}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr3.unlock()
	sw := tr3.Sweep
	for i, want := range []bool{true, false, true, false, false, false} {
		if tr3.Kept(i) != want {
			t.Errorf("run %d kept %v, want %v", i+1, tr3.Kept(i), want)
		}
	}
	if r := sw.Runs[2]; r.Status != rundir.StatusOK || r.Attempt != 1 || r.RunID != "r03" {
		t.Errorf("r03 (ended ok, not recorded): %+v; want ok from attempt 1 with its manifest's run id", r)
	}
	for _, c := range []struct {
		i           int
		dir, status string
	}{{1, "attempts/1/r02", rundir.StatusFailed}, {3, "attempts/1/r04", rundir.StatusAbandoned}, {4, "", rundir.StatusAbandoned}} {
		r := sw.Runs[c.i]
		if len(r.Earlier) != 1 || r.Earlier[0].Dir != c.dir || r.Earlier[0].Status != c.status || r.Earlier[0].Attempt != 1 || r.Status != "" || r.Attempt != 0 {
			t.Errorf("%s: %+v; want one earlier try (attempt 1, %s, %q) and not started", r.Dir, r, c.status, c.dir)
		}
		if c.dir != "" {
			if _, err := os.Stat(filepath.Join(d, c.dir)); err != nil {
				t.Errorf("%s not moved: %v", c.dir, err)
			}
			if _, err := os.Stat(filepath.Join(d, r.Dir)); err == nil {
				t.Errorf("%s still in place", r.Dir)
			}
		}
	}
	if len(sw.Runs[5].Earlier) != 0 || len(sw.Attempts) != 3 || sw.Attempts[0].Status != rundir.StatusAbandoned || sw.Attempts[2].Status != rundir.StatusRunning {
		t.Errorf("r06 %+v, attempts %+v", sw.Runs[5], sw.Attempts)
	}
	// The next run begun is attempt 3's, with its own run id.
	if err := tr3.Begin(1); err != nil {
		t.Fatal(err)
	}
	if _, id := tr3.RunDir(1); !strings.HasSuffix(id, "-r02-a3") {
		t.Errorf("rerun id %s, want …-r02-a3", id)
	}
	back, err := Read(d)
	if err != nil {
		t.Fatal(err)
	}
	if back.Runs[1].Attempt != 3 || back.Runs[1].Status != rundir.StatusRunning || back.Runs[1].Started.IsZero() {
		t.Errorf("sweep.json after Begin: %+v", back.Runs[1])
	}
}

// rig compare's warnings for a resumed sweep name what changed between its attempts: the rig's
// commit and the controller's load; runs of one attempt give none.
func TestAttemptDifferences(t *testing.T) {
	run := func(attempt int, commit string, load float64) *RunData {
		return &RunData{Ref: Run{Attempt: attempt}, Manifest: &rundir.Manifest{Target: "local", CPUs: 2, ConfigHash: "abc",
			Rig: rundir.BuildInfo{Version: "dev", Commit: commit}, LoadAvg: rundir.LoadAvg{Start: []float64{load, 0, 0}}}}
	}
	got := attemptDifferences("baseline", []*RunData{run(1, "aaaa", 0.4), run(1, "aaaa", 0.6), run(2, "bbbb", 2.5)})
	if len(got) != 2 || !strings.Contains(got[0], "rig version changed between the sweep's attempts (attempt 1: dev aaaa; attempt 2: dev bbbb)") ||
		!strings.Contains(got[1], "load average at run start changed between the sweep's attempts (mean 1-minute: attempt 1: 0.50; attempt 2: 2.50)") {
		t.Errorf("differences: %q", got)
	}
	if got := attemptDifferences("baseline", []*RunData{run(1, "aaaa", 0.4), run(2, "aaaa", 0.5)}); len(got) != 0 {
		t.Errorf("same environment in both attempts: %q", got)
	}
	if got := attemptDifferences("baseline", []*RunData{run(1, "aaaa", 0.4), run(1, "bbbb", 3)}); len(got) != 0 {
		t.Errorf("one attempt: %q", got)
	}
}

// A sweep whose last attempt ran another rig is refused, naming both, unless AcceptRig, which
// records the new rig in the new attempt.
func TestResumeOtherRig(t *testing.T) {
	pl := resumePlan(t, resumeBook)
	tr, err := Start(t.TempDir(), pl, "rs", StartOptions{Target: "local"})
	if err != nil {
		t.Fatal(err)
	}
	tr.Sweep.Attempts[0].Rig = rundir.BuildInfo{Version: "v0.9.0", Commit: "0123456789abcdef"}
	if err := tr.Sweep.Write(tr.Dir); err != nil {
		t.Fatal(err)
	}
	tr.unlock()
	o := ResumeOptions{StartOptions: StartOptions{Target: "local"}}
	_, err = Resume(tr.Dir, pl, o)
	if !errors.Is(err, ErrResumeRefused) || !strings.Contains(err.Error(), "the rig differs: the sweep's last attempt ran rig v0.9.0 (commit 0123456789ab), this is rig "+rundir.Build().Version) ||
		!strings.Contains(err.Error(), "--accept-rig") {
		t.Fatalf("resume with another rig: %v", err)
	}
	o.AcceptRig = true
	tr2, err := Resume(tr.Dir, pl, o)
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.unlock()
	back, _ := Read(tr.Dir)
	if a := back.Attempts[1]; !a.AcceptedRig || a.Rig != rundir.Build() || back.Attempts[0].Rig.Version != "v0.9.0" {
		t.Errorf("attempts after --accept-rig: %+v", back.Attempts)
	}
}

// A sweep folder someone tampered with cannot lead a resume or a report out of it:
// an attempts symlink made Resume move a run to a folder outside the sweep; a run folder
// symlinked elsewhere had its summary.json and report.md rewritten there; a sweep.json
// symlinked out was read; a run folder named twice was counted twice. Each is refused by Read
// (and so by Resume, Load and Pending), naming the path, and nothing outside the sweep changes.
func TestSweepFolderConfined(t *testing.T) {
	pl := resumePlan(t, resumeBook)
	// sweep makes a sweep whose r01 ended ok and r02 failed (a resume would move r02 aside).
	sweep := func(t *testing.T) string {
		tr, err := Start(t.TempDir(), pl, "rs", StartOptions{Target: "local"})
		if err != nil {
			t.Fatal(err)
		}
		for i, st := range []string{rundir.StatusOK, rundir.StatusFailed} {
			if err := tr.Begin(i); err != nil {
				t.Fatal(err)
			}
			fakeRun(t, filepath.Join(tr.Dir, RunDir(i+1, 6)), st, true)
			tr.End(i, "x", st)
		}
		tr.unlock()
		return tr.Dir
	}
	outside := t.TempDir()
	fakeRun(t, filepath.Join(outside, "r02"), rundir.StatusFailed, true)
	for _, c := range []struct {
		name   string
		tamper func(t *testing.T, d string)
		want   string
	}{
		{"attempts symlinked out", func(t *testing.T, d string) {
			if err := os.Symlink(outside, filepath.Join(d, AttemptsDir)); err != nil {
				t.Fatal(err)
			}
		}, "attempts is a symlink (to " + outside + ")"},
		{"run folder symlinked out", func(t *testing.T, d string) {
			if err := os.RemoveAll(filepath.Join(d, "r02")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(outside, "r02"), filepath.Join(d, "r02")); err != nil {
				t.Fatal(err)
			}
		}, "r02 is a symlink (to " + filepath.Join(outside, "r02") + ")"},
		{"run folder linked to another", func(t *testing.T, d string) {
			if err := os.Symlink("r01", filepath.Join(d, "r03")); err != nil {
				t.Fatal(err)
			}
		}, "r03 is a symlink (to r01)"},
		{"plots symlinked out", func(t *testing.T, d string) {
			if err := os.Symlink(outside, filepath.Join(d, "r01", PlotsDir)); err != nil {
				t.Fatal(err)
			}
		}, filepath.Join("r01", PlotsDir) + " is a symlink"},
		{"duplicate run dir", func(t *testing.T, d string) {
			sw, err := Read(d)
			if err != nil {
				t.Fatal(err)
			}
			sw.Runs[2].Dir = "r01"
			if err := sw.Write(d); err != nil {
				t.Fatal(err)
			}
		}, "runs 1 and 3 both name the folder r01"},
		{"sweep.json symlinked out", func(t *testing.T, d string) {
			b, err := os.ReadFile(filepath.Join(d, FileName))
			if err != nil {
				t.Fatal(err)
			}
			other := filepath.Join(outside, "other.json")
			if err := os.WriteFile(other, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(d, FileName)); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, filepath.Join(d, FileName)); err != nil {
				t.Fatal(err)
			}
		}, "escapes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := sweep(t)
			c.tamper(t, d)
			before := testfs.State(t, outside)
			_, err := Resume(d, pl, ResumeOptions{StartOptions: StartOptions{Target: "local"}})
			if !errors.Is(err, ErrNotConfined) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Resume: %v; want %v naming %q", err, ErrNotConfined, c.want)
			}
			if _, err := Load(d); !errors.Is(err, ErrNotConfined) {
				t.Errorf("Load: %v; want %v", err, ErrNotConfined)
			}
			if _, err := Pending(d); !errors.Is(err, ErrNotConfined) {
				t.Errorf("Pending: %v; want %v", err, ErrNotConfined)
			}
			if after := testfs.State(t, outside); after != before {
				t.Errorf("the folder outside the sweep changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}
