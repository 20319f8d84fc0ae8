package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rig-dev/rig/history"
	"github.com/rig-dev/rig/rundir"
)

// historyResults is a results folder with testdata/run under runID at each of dirs.
func historyResults(t *testing.T, runID string, dirs ...string) string {
	t.Helper()
	results := t.TempDir()
	for _, d := range dirs {
		run := filepath.Join(results, d)
		os.MkdirAll(run, 0o755)
		for _, f := range []string{rundir.ManifestFile, rundir.SummaryFile} {
			b, err := os.ReadFile(filepath.Join("..", "..", "history", "testdata", "run", f))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(run, f), []byte(strings.ReplaceAll(string(b), "20261206-153433-snapshots-r01", runID)), 0o644)
		}
	}
	return results
}

// Hostile or careless history input: an --index that reads as a SQLite URI, an empty index file,
// an --out that is a symlink or a FIFO, import --fresh beside a writer, two folders of one run
// id, and flags beyond their limits. Each is refused, confined or named.
func TestHistoryHostileInput(t *testing.T) {
	id := "20261206-153433-snapshots"
	results := historyResults(t, id, id)

	t.Run("index is a file name", func(t *testing.T) {
		index := filepath.Join(t.TempDir(), "idx.db?mode=memory")
		out, _, err := runRig(t, "history", "import", results, "--index", index)
		if err != nil || !strings.Contains(out, "1 run(s) indexed") {
			t.Fatalf("import: %v\n%s", err, out)
		}
		if fi, err := os.Stat(index); err != nil || fi.Size() == 0 {
			t.Fatalf("no index at the path given: %v", err)
		}
		if out, _, err := runRig(t, "history", "--index", index); err != nil || !strings.Contains(out, id) {
			t.Fatalf("list: %v\n%s", err, out)
		}
	})
	t.Run("reading an empty index writes nothing", func(t *testing.T) {
		index := filepath.Join(t.TempDir(), "empty.db")
		os.WriteFile(index, nil, 0o644)
		if _, _, err := runRig(t, "history", "--index", index); !errors.Is(err, errUsage) {
			t.Fatalf("want a usage error, got %v", err)
		}
		ents, _ := os.ReadDir(filepath.Dir(index))
		if fi, _ := os.Stat(index); fi.Size() != 0 || len(ents) != 1 {
			t.Fatalf("a reading verb wrote to an empty index (%d bytes, %d files)", fi.Size(), len(ents))
		}
	})

	index := filepath.Join(t.TempDir(), history.DefaultFile)
	if _, _, err := runRig(t, "history", "import", results, "--index", index); err != nil {
		t.Fatal(err)
	}
	t.Run("--out refuses a symlink and a FIFO", func(t *testing.T) {
		dir := t.TempDir()
		victim := filepath.Join(dir, "victim")
		os.WriteFile(victim, []byte("keep"), 0o644)
		link := filepath.Join(dir, "log.md")
		os.Symlink(victim, link)
		fifo := filepath.Join(dir, "fifo.md")
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, out := range []string{link, fifo} {
			if _, _, err := runRig(t, "history", "log", "--index", index, "--out", out); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("--out %s: %v, want a usage error", out, err)
			}
		}
		if b, _ := os.ReadFile(victim); string(b) != "keep" {
			t.Fatal("--out wrote through a symlink")
		}
		if _, _, err := runRig(t, "history", "trend", "snapshot.take", "--index", index, "--plot", link+".png"); err != nil {
			t.Fatal(err)
		}
		os.Symlink(victim, filepath.Join(dir, "p.svg"))
		if _, _, err := runRig(t, "history", "trend", "snapshot.take", "--index", index, "--plot", filepath.Join(dir, "p.svg")); !errors.Is(err, errUsage) {
			t.Errorf("--plot to a symlink: %v, want a usage error", err)
		}
	})
	t.Run("fresh import beside a writer", func(t *testing.T) {
		w, err := history.Open(index)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		before, _ := os.ReadFile(index)
		_, _, err = runRig(t, "history", "import", "--fresh", results, "--index", index)
		if !errors.Is(err, history.ErrBusy) {
			t.Fatalf("want a refusal while a writer holds the index, got %v", err)
		}
		if after, _ := os.ReadFile(index); string(after) != string(before) {
			t.Fatal("the refused rebuild changed the index")
		}
		if _, err := os.Stat(index + ".rebuild"); err == nil {
			t.Fatal(".rebuild left behind")
		}
	})
	t.Run("two folders of one run id", func(t *testing.T) {
		dup := historyResults(t, id, "a/"+id, "b/"+id)
		out, _, err := runRig(t, "history", "import", dup, "--index", filepath.Join(t.TempDir(), "i.db"))
		if err != nil || !strings.Contains(out, "1 run(s) indexed, 1 skipped") || !strings.Contains(out, "run id "+id+" again") {
			t.Fatalf("%v\n%s", err, out)
		}
	})
	t.Run("limits", func(t *testing.T) {
		var where []string
		for i := range 1000 {
			where = append(where, "--where", fmt.Sprintf("engine.k%d=1", i))
		}
		for _, c := range []struct {
			args []string
			want string
		}{
			{append([]string{"history"}, where...), "at most 100"},
			{[]string{"history", "trend", "snapshot.take", "--permutations", "100000000"}, "at most 99999 permutations"},
		} {
			_, _, err := runRig(t, append(c.args, "--index", index)...)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%.60v: %v, want a usage error naming %q", c.args, err, c.want)
			}
		}
	})
}
