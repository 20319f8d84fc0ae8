package history

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rig-dev/rig/internal/testfs"
	"github.com/rig-dev/rig/stats"
)

// addOne writes one run under id to x.
func addOne(t *testing.T, x *Index, id string) {
	t.Helper()
	if err := x.Add(context.Background(), &Record{RunID: id, Folder: "f", Status: "ok", Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// An index path is a file name, never a SQLite URI: ?mode=memory and # are part of the name, and
// the file SQLite writes is the one the regular-file check looked at.
func TestIndexPathIsAFileName(t *testing.T) {
	for _, name := range []string{"idx.db?mode=memory", "a#b.db", "x%20y.db", "q?vfs=unix-none&immutable=1"} {
		dir := t.TempDir()
		p := filepath.Join(dir, name)
		x, err := Open(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		addOne(t, x, "r1")
		x.Close()
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Fatalf("%s: the index is not the file named: %v", name, err)
		}
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if e.Name() != name && e.Name() != name+LockSuffix {
				t.Errorf("%s: SQLite wrote %s", name, e.Name())
			}
		}
		r, err := OpenReadOnly(p)
		if err != nil {
			t.Fatal(err)
		}
		runs, err := r.Runs(context.Background(), Filter{})
		r.Close()
		if err != nil || len(runs) != 1 {
			t.Fatalf("%s: read back %d runs: %v", name, len(runs), err)
		}
	}
	// A symlink or a FIFO named as the index is refused without following or opening it.
	dir := t.TempDir()
	other := filepath.Join(dir, "other.db")
	os.WriteFile(other, nil, 0o644)
	link := filepath.Join(dir, "link.db")
	os.Symlink(other, link)
	fifo := filepath.Join(dir, "fifo.db")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{link, fifo} {
		if _, err := Open(p); !errors.Is(err, ErrNotRegular) {
			t.Errorf("Open %s: %v, want ErrNotRegular", p, err)
		}
		if _, err := OpenReadOnly(p); !errors.Is(err, ErrNotRegular) {
			t.Errorf("OpenReadOnly %s: %v, want ErrNotRegular", p, err)
		}
	}
	if fi, _ := os.Stat(other); fi.Size() != 0 {
		t.Error("the symlink's target was written")
	}
}

// A reading verb's open writes nothing: an empty file stays empty (ErrEmpty), and an index on a
// read-only mount is read.
func TestOpenReadOnlyWritesNothing(t *testing.T) {
	p := filepath.Join(t.TempDir(), DefaultFile)
	os.WriteFile(p, nil, 0o644)
	if _, err := OpenReadOnly(p); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty file: %v, want ErrEmpty", err)
	}
	ents, _ := os.ReadDir(filepath.Dir(p))
	if fi, _ := os.Stat(p); fi.Size() != 0 || len(ents) != 1 {
		t.Fatalf("an empty file was written to (%d bytes, %d files)", fi.Size(), len(ents))
	}

	mnt := testfs.Tmpfs(t, 4<<20)
	p = filepath.Join(mnt, DefaultFile)
	x, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	addOne(t, x, "r1")
	x.Close()
	if out, err := exec.Command("mount", "-o", "remount,ro", mnt).CombinedOutput(); err != nil {
		t.Fatalf("remount read-only: %v: %s", err, out)
	}
	r, err := OpenReadOnly(p)
	if err != nil {
		t.Fatalf("read-only mount: %v", err)
	}
	defer r.Close()
	if runs, err := r.Runs(context.Background(), Filter{}); err != nil || len(runs) != 1 {
		t.Fatalf("read-only mount: %d runs, %v", len(runs), err)
	}
}

// import --fresh refuses while a writer (a run, an import) has the index open, and a writer
// cannot open it while a rebuild holds it: the rename would lose the writer's rows.
func TestRebuildTakesTheIndexLock(t *testing.T) {
	root := t.TempDir()
	writeRun(t, filepath.Join(root, "20261201-100000-snapshots"), "20261201-100000-snapshots", nil, nil)
	p := filepath.Join(t.TempDir(), DefaultFile)
	w, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	addOne(t, w, "live")
	if _, err := Rebuild(context.Background(), p, []string{root}, nil); !errors.Is(err, ErrBusy) {
		t.Fatalf("rebuild beside a writer: %v, want ErrBusy", err)
	}
	addOne(t, w, "live-2") // the writer goes on, its rows kept
	w.Close()
	r, _ := OpenReadOnly(p)
	runs, _ := r.Runs(context.Background(), Filter{})
	r.Close()
	if len(runs) != 2 {
		t.Fatalf("the writer's rows: %d, want 2", len(runs))
	}
	// A rebuild in progress (its lock held) keeps writers out.
	lock, err := lockIndex(p, syscall.LOCK_EX)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(p); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "rebuilt") {
		t.Fatalf("a writer during a rebuild: %v, want ErrBusy", err)
	}
	lock.Close()
}

// A rebuild stopped by a signal (its ctx cancelled) between two sources leaves the old index as
// it was, removes the .rebuild and its -wal and -shm, and reports nothing indexed.
func TestRebuildCleansUpWhenInterrupted(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeRun(t, filepath.Join(a, "20261201-100000-snapshots"), "20261201-100000-snapshots", nil, nil)
	writeRun(t, filepath.Join(b, "20261201-110000-snapshots"), "20261201-110000-snapshots", nil, nil)
	dir := t.TempDir()
	p := filepath.Join(dir, DefaultFile)
	x, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	addOne(t, x, "old")
	x.Close()
	before, _ := os.ReadFile(p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rep, err := Rebuild(ctx, p, []string{a, b}, func(root string) ImportOptions {
		if root == b {
			cancel() // SIGTERM once the first source is in
		}
		return ImportOptions{}
	})
	if !errors.Is(err, context.Canceled) || rep != nil {
		t.Fatalf("got %+v %v, want no report and context.Canceled", rep, err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{DefaultFile, DefaultFile + LockSuffix}) {
		t.Fatalf("left behind: %v", names)
	}
	if after, _ := os.ReadFile(p); string(after) != string(before) {
		t.Fatal("the old index changed")
	}
}

// errAfter is a context whose Err turns to Canceled after n calls, as if SIGINT came while a
// trend's permutation test ran: no clock involved.
type errAfter struct {
	context.Context
	n atomic.Int64
}

func (c *errAfter) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// A trend stops with context.Canceled when its ctx is cancelled mid-search, and --permutations
// has an upper bound.
func TestTrendStopsOnCancel(t *testing.T) {
	root := t.TempDir()
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i, v := range []string{"v1", "v2", "v3", "v4"} {
		id := "20261201-1" + string(rune('0'+i)) + "0000-snapshots"
		takes := []float64{10, 11, 12}
		if i >= 2 {
			takes = []float64{30, 31, 32}
		}
		writeRun(t, filepath.Join(root, id), id, engineVersion(v, base.Add(time.Duration(i)*time.Hour)), takes)
	}
	x := openTemp(t)
	if _, err := Import(context.Background(), x, root, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx := &errAfter{Context: context.Background()}
	ctx.n.Store(1000)
	o := TrendOptions{Figure: "snapshot.take", PerRun: true, EDivisiveOptions: stats.EDivisiveOptions{Permutations: MaxPermutations}}
	if _, err := x.Trend(ctx, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled trend: %v, want context.Canceled", err)
	}
	o.Permutations = MaxPermutations + 1
	if _, err := x.Trend(context.Background(), o); !errors.Is(err, ErrPermutations) {
		t.Fatalf("%d permutations: %v, want ErrPermutations", o.Permutations, err)
	}
}

// Import names what it leaves out or merges: a second folder of one run id, a symlinked run
// folder, a run deeper than MaxDepth; each is counted as skipped.
func TestImportNamesDuplicatesSymlinksAndDepth(t *testing.T) {
	root := t.TempDir()
	id := "20261201-100000-snapshots"
	writeRun(t, filepath.Join(root, "a", id), id, nil, nil)
	writeRun(t, filepath.Join(root, "b", id), id, nil, nil)
	elsewhere := t.TempDir()
	writeRun(t, filepath.Join(elsewhere, "20261201-110000-snapshots"), "20261201-110000-snapshots", nil, nil)
	os.Symlink(filepath.Join(elsewhere, "20261201-110000-snapshots"), filepath.Join(root, "linked"))
	deep := root
	for i := 0; i < MaxDepth+1; i++ {
		deep = filepath.Join(deep, "d")
	}
	writeRun(t, filepath.Join(deep, "20261201-120000-snapshots"), "20261201-120000-snapshots", nil, nil)
	x := openTemp(t)
	rep, err := Import(context.Background(), x, root, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Added, []string{id}) {
		t.Errorf("added %v, want %s once", rep.Added, id)
	}
	named := ""
	for _, s := range rep.Skipped {
		named += s.Path + ": " + s.Reason + "\n"
	}
	for _, want := range []string{
		filepath.Join(root, "b", id) + ": run id " + id + " again: the index keeps " + filepath.Join(root, "a", id),
		filepath.Join(root, "linked") + ": a symlink to a folder: not followed",
		"more than 6 folders below " + root + ": not searched",
	} {
		if !strings.Contains(named, want) {
			t.Errorf("skips do not say %q:\n%s", want, named)
		}
	}
	if len(rep.Skipped) != 3 {
		t.Errorf("%d skipped, want 3:\n%s", len(rep.Skipped), named)
	}
	// Too many settings to match is refused naming the limit, before SQLite's own error.
	f := Filter{Where: map[string]string{}}
	for i := range 1000 {
		f.Where["engine.k"+string(rune('a'+i%26))+strings.Repeat("x", i/26)] = "1"
	}
	if _, err := x.Runs(context.Background(), f); !errors.Is(err, ErrFilter) || !strings.Contains(err.Error(), "at most 100") {
		t.Fatalf("1,000 --where pairs: %v, want ErrFilter naming the limit", err)
	}
}
