package history

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/archive"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/stats"
	"github.com/rig-dev/rig/sweep"
)

// testdata/run is a real run folder's manifest.json and summary.json (the snapshots playbook of
// docs/results.md, rig run --engine-version v2, local target).

// writeRun copies testdata/run to dir as run id, with the manifest changed by edit and the
// summary's warm snapshot takes (the leader's) set to takes.
func writeRun(t testing.TB, dir, id string, edit func(m map[string]any), takes []float64) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var m, s map[string]any
	for name, v := range map[string]*map[string]any{rundir.ManifestFile: &m, rundir.SummaryFile: &s} {
		b, err := os.ReadFile(filepath.Join("testdata/run", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatal(err)
		}
	}
	m["run_id"], s["run_id"] = id, id
	if edit != nil {
		edit(m)
	}
	if takes != nil {
		snaps := s["snapshots"].([]any)
		for i, tk := range takes { // snapshot #1 is cold; #2.. are the warm ones
			sn := snaps[i+1].(map[string]any)
			sn["take_ms"] = map[string]any{sn["leader"].(string): tk}
		}
	}
	for name, v := range map[string]any{rundir.ManifestFile: m, rundir.SummaryFile: s} {
		b, _ := json.Marshal(v)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func engineVersion(v string, started time.Time) func(m map[string]any) {
	return func(m map[string]any) {
		m["engine_build"].(map[string]any)["version"] = v
		m["started"] = started.Format(time.RFC3339Nano)
	}
}

func openTemp(t testing.TB) *Index {
	t.Helper()
	x, err := Open(filepath.Join(t.TempDir(), DefaultFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// TestImportSkipsPartial: a tree with a good run, a truncated summary.json, a run still running
// and a sweep interrupted mid-way: the complete runs are indexed, each of the others named.
func TestImportSkipsPartial(t *testing.T) {
	root := t.TempDir()
	ctx := context.Background()
	writeRun(t, filepath.Join(root, "20261201-100000-snapshots"), "20261201-100000-snapshots", nil, nil)
	trunc := filepath.Join(root, "20261201-110000-snapshots")
	writeRun(t, trunc, "20261201-110000-snapshots", nil, nil)
	b, _ := os.ReadFile(filepath.Join(trunc, rundir.SummaryFile))
	os.WriteFile(filepath.Join(trunc, rundir.SummaryFile), b[:len(b)/2], 0o644)
	running := filepath.Join(root, "20261201-120000-snapshots")
	writeRun(t, running, "20261201-120000-snapshots", func(m map[string]any) { m["status"] = rundir.StatusRunning }, nil)
	os.Remove(filepath.Join(running, rundir.SummaryFile)) // a running run has none yet
	// This process is the "controller": alive, heard from now.
	if err := rundir.WriteControllerBeat(running, time.Second); err != nil {
		t.Fatal(err)
	}

	sw := filepath.Join(root, "20261201-130000-snapshots")
	os.MkdirAll(sw, 0o755)
	s := &sweep.Sweep{ID: "20261201-130000-snapshots", Playbook: "snapshots", Status: rundir.StatusInterrupted, Rounds: 4,
		Axes: []sweep.Axis{{Key: "engine.snapshot_block", Values: []string{"16MiB"}}}}
	for i := 1; i <= 4; i++ {
		s.Runs = append(s.Runs, sweep.Run{Dir: sweep.RunDir(i, 4), Index: i, Round: i, RunID: fmt.Sprintf("%s-r%02d", s.ID, i),
			Settings: map[string]string{"engine.snapshot_block": "16MiB"}})
	}
	for i := 1; i <= 3; i++ {
		status := rundir.StatusOK
		if i == 3 {
			status = rundir.StatusInterrupted
		}
		s.Runs[i-1].Status = status
		writeRun(t, filepath.Join(sw, s.Runs[i-1].Dir), s.Runs[i-1].RunID, func(m map[string]any) { m["status"] = status }, nil)
	}
	if err := s.Write(sw); err != nil {
		t.Fatal(err)
	}

	x := openTemp(t)
	rep, err := Import(ctx, x, root, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rep.Added)
	want := []string{"20261201-100000-snapshots", "20261201-130000-snapshots-r01", "20261201-130000-snapshots-r02"}
	if !slices.Equal(rep.Added, want) {
		t.Errorf("added %v, want %v", rep.Added, want)
	}
	skipped := map[string]string{}
	for _, s := range rep.Skipped {
		skipped[filepath.Base(s.Path)] = s.Reason
	}
	for dir, reason := range map[string]string{
		"20261201-110000-snapshots": "unexpected end of JSON input",
		"20261201-120000-snapshots": "still running",
		"r03":                       "interrupted",
		"r04":                       "never started: sweep 20261201-130000-snapshots stopped before it (sweep.json status interrupted)",
	} {
		if !strings.Contains(skipped[dir], reason) {
			t.Errorf("skipped %s: %q, want it to say %q (all: %v)", dir, skipped[dir], reason, rep.Skipped)
		}
	}
	if len(rep.Skipped) != 4 {
		t.Errorf("%d skipped: %v", len(rep.Skipped), rep.Skipped)
	}
	runs, err := x.Runs(ctx, Filter{Status: "all"})
	if err != nil || len(runs) != 3 {
		t.Fatalf("index holds %d runs (%v)", len(runs), err)
	}
	r := runs[1]
	if r.SweepID != s.ID || r.RunDir != "r01" || r.Combination != "engine.snapshot_block=16MiB" || r.EngineLabel() != "v2" ||
		r.Engine.SHA256 == "" || len(r.Command) == 0 || r.Load1Start == nil || r.Machine == "" {
		t.Errorf("run read back: %+v", r)
	}
	figs, err := x.Figures(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var take *Figure
	for i := range figs {
		if figs[i].Key == "snapshot.take" {
			take = &figs[i]
		}
	}
	if take == nil || take.Sample.N != 3 || take.Unit != "ms" || take.Dir != stats.LowerIsBetter {
		t.Errorf("snapshot.take: %+v", take)
	}
	sets, _ := x.Settings(ctx, r.ID)
	found := 0
	for _, st := range sets {
		if st.Key == "engine.snapshot_block" && st.Value == "16777216" && st.Matrix || st.Key == "engine.sync_level" && st.Value == "2" && !st.Matrix {
			found++
		}
	}
	if found != 2 {
		t.Errorf("settings: %+v", sets)
	}
	// Filters: by a setting, by engine version, by date.
	// Sizes, counts and durations match in any spelling: the lone run's snapshot_block is no
	// matrix value, the sweep's are.
	for _, w := range []map[string]string{{"engine.snapshot_block": "16MiB"}, {"engine.snapshot_block": "16777216"},
		{"preload.orders": "200k", "warmup": "2s", "load.probe_rate": "500/s"}} {
		if rs, _ := x.Runs(ctx, Filter{Where: w}); len(rs) != 3 {
			t.Errorf("where %v: %d runs", w, len(rs))
		}
	}
	if rs, _ := x.Runs(ctx, Filter{Where: map[string]string{"engine.snapshot_block": "64KiB"}}); len(rs) != 0 {
		t.Errorf("where snapshot_block=64KiB: %d runs", len(rs))
	}
	if rs, _ := x.Runs(ctx, Filter{Engine: "v3"}); len(rs) != 0 {
		t.Errorf("engine v3: %d runs", len(rs))
	}
	if rs, _ := x.Runs(ctx, Filter{Since: time.Now().Add(24 * time.Hour)}); len(rs) != 0 {
		t.Errorf("since tomorrow: %d runs", len(rs))
	}

	// Importing again replaces, never duplicates.
	if _, err := Import(ctx, x, root, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if runs, _ := x.Runs(ctx, Filter{Status: "all"}); len(runs) != 3 {
		t.Errorf("after a second import: %d runs", len(runs))
	}
}

// TestAddIsOneTransaction: a run whose figures cannot all be written leaves nothing behind.
func TestAddIsOneTransaction(t *testing.T) {
	x := openTemp(t)
	ctx := context.Background()
	r := &Record{RunID: "x", Folder: "f", Status: "ok", Started: time.Now(),
		Settings: []Setting{{Key: "a", Value: "1"}},
		Figures:  []Figure{{Key: "f", Values: []float64{1}}, {Key: "f", Values: []float64{2}}}} // the same key twice
	if err := x.Add(ctx, r); err == nil {
		t.Fatal("a run with a figure twice was added")
	}
	var n int
	for _, table := range []string{"runs", "settings", "figures"} {
		x.db.QueryRow("SELECT count(*) FROM " + table).Scan(&n)
		if n != 0 {
			t.Errorf("%s holds %d rows after the failed add", table, n)
		}
	}
}

// TestTrendOneChangePoint: ten versions, the seventh and later slower: one change point at v7,
// sized with the before and after values.
func TestTrendOneChangePoint(t *testing.T) {
	root := t.TempDir()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for v := 1; v <= 10; v++ {
		for run := range 3 {
			base := 30.0 + float64((v*7+run*3)%5)
			if v >= 7 {
				base += 60
			}
			id := fmt.Sprintf("20261201-%02d%02d00-snapshots", v, run)
			writeRun(t, filepath.Join(root, id), id, engineVersion(fmt.Sprintf("v%d", v), start.Add(time.Duration(v*10+run)*time.Minute)),
				[]float64{base, base + 1, base - 1})
		}
	}
	x := openTemp(t)
	ctx := context.Background()
	if _, err := Import(ctx, x, root, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, order := range []string{OrderDate, OrderVersion} {
		tr, err := x.Trend(ctx, TrendOptions{Figure: "snapshot.take", Order: order, EDivisiveOptions: stats.EDivisiveOptions{Seed: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Versions) != 10 || tr.Versions[9].Label != "v10" {
			t.Fatalf("%s order: versions %v", order, labels(tr))
		}
		if len(tr.Changes) != 1 || tr.Changes[0].Label != "v7" || tr.Changes[0].P >= 0.05 || tr.Changes[0].Verdict != stats.Worse {
			t.Fatalf("%s order: changes %+v", order, tr.Changes)
		}
		c := tr.Changes[0]
		if c.Size.Base.N != 54 || c.Size.Contender.N != 36 || c.Size.Welch == nil || c.Size.Welch.Lo < 50 || c.Size.Welch.Hi > 70 {
			t.Errorf("size: before n=%d after n=%d welch %+v", c.Size.Base.N, c.Size.Contender.N, c.Size.Welch)
		}
	}
	var b strings.Builder
	tr, _ := x.Trend(ctx, TrendOptions{Figure: "snapshot.take", EDivisiveOptions: stats.EDivisiveOptions{Seed: 1}})
	tr.Markdown(&b, TrendOptions{})
	if !strings.Contains(b.String(), "| v7 ◀ change |") || !strings.Contains(b.String(), "| v7 | — |") {
		t.Errorf("markdown:\n%s", b.String())
	}
	if err := tr.Plot(filepath.Join(t.TempDir(), "trend.png")); err != nil {
		t.Error(err)
	}
	if _, err := x.Trend(ctx, TrendOptions{Figure: "no.such"}); err == nil || !strings.Contains(err.Error(), "snapshot.take") {
		t.Errorf("unknown figure: %v", err)
	}
	// The log: one entry per run, the change point on v7's first entry.
	md, err := x.Log(ctx, LogOptions{Trend: TrendOptions{EDivisiveOptions: stats.EDivisiveOptions{Seed: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(md, "\n## "); n != 30 {
		t.Errorf("%d entries", n)
	}
	if n := strings.Count(md, "**worse** from engine v7"); n != 3 {
		t.Errorf("the change point is on %d entries, want v7's 3:\n%s", n, md)
	}
}

func labels(t *Trend) []string {
	var out []string
	for _, v := range t.Versions {
		out = append(out, v.Label)
	}
	return out
}

func TestVersionCompare(t *testing.T) {
	for _, c := range []struct{ a, b string }{{"v2", "v10"}, {"1.9.0", "1.10.0"}, {"v1", "v1.1"}, {"a", "b"}, {"v09", "v10"}} {
		if versionCompare(c.a, c.b) >= 0 || versionCompare(c.b, c.a) <= 0 {
			t.Errorf("%s < %s not held", c.a, c.b)
		}
	}
}

// TestImportArchiveFolder: a folder of archives (rig archive --to DIR) is verified, unpacked and
// indexed run by run; an archive whose tarball is missing is named and skipped.
func TestImportArchiveFolder(t *testing.T) {
	ctx := context.Background()
	results := t.TempDir()
	dest := archive.Dir{Path: t.TempDir()}
	for _, id := range []string{"20261201-100000-snapshots", "20261201-110000-snapshots"} {
		writeRun(t, filepath.Join(results, id), id, nil, nil)
		if _, err := archive.Archive(ctx, archive.Options{RunDir: filepath.Join(results, id), Dest: dest}); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(filepath.Join(dest.Path, archive.ArchiveName("20261201-110000-snapshots")))
	x := openTemp(t)
	rep, err := Import(ctx, x, dest.Path, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Added) != 1 || rep.Added[0] != "20261201-100000-snapshots" || len(rep.Skipped) != 1 ||
		!strings.HasSuffix(rep.Skipped[0].Path, archive.ArchiveName("20261201-110000-snapshots")) {
		t.Fatalf("added %v, skipped %+v", rep.Added, rep.Skipped)
	}
	runs, _ := x.Runs(ctx, Filter{})
	if len(runs) != 1 || runs[0].Folder != dest.String()+archive.ArchiveName("20261201-100000-snapshots") {
		t.Errorf("folder recorded: %+v", runs)
	}
}

// TestTrendCommitOrder: --order commit follows the commits' order, not the runs' dates; a
// version whose commit is not listed follows, by date.
func TestTrendCommitOrder(t *testing.T) {
	root := t.TempDir()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	commits := []string{"aaaaaaa1111", "bbbbbbb2222", "ccccccc3333"}
	for i, c := range []string{"ccccccc3333", "aaaaaaa1111", "bbbbbbb2222", "ddddddd4444"} { // run in another order
		id := fmt.Sprintf("20261201-0%d0000-snapshots", i)
		writeRun(t, filepath.Join(root, id), id, func(m map[string]any) {
			eb := m["engine_build"].(map[string]any)
			eb["version"], eb["commit"] = "", c
			m["started"] = start.Add(time.Duration(i) * time.Hour).Format(time.RFC3339)
		}, nil)
	}
	x := openTemp(t)
	ctx := context.Background()
	if _, err := Import(ctx, x, root, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := x.Trend(ctx, TrendOptions{Figure: "snapshot.take", Order: OrderCommit, Commits: commits})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(labels(tr), " "); got != "aaaaaaa1111 bbbbbbb2222 ccccccc3333 ddddddd4444" {
		t.Errorf("commit order: %s", got)
	}
}

// TestOpenRefusesNonFile: a FIFO named as the index is refused, not opened.
func TestOpenRefusesNonFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "index.db")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skip(err)
	}
	if _, err := Open(p); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Open(fifo): %v", err)
	}
}
