package history

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/rig-dev/rig/archive"
	"github.com/rig-dev/rig/internal/mdtext"
	"github.com/rig-dev/rig/rundir"
	"github.com/rig-dev/rig/sweep"
)

// Skip is a folder (or archived run) the import left out, and why.
type Skip struct {
	Path   string
	Reason string
}

// ImportReport says what an import added and what it skipped.
type ImportReport struct {
	Added   []string // run ids
	Skipped []Skip
}

// ImportOptions tune Import.
type ImportOptions struct {
	Now func() time.Time // for telling a running run from an abandoned one (default time.Now)
	// TmpDir is where archived runs are unpacked to be read (default os.TempDir()).
	TmpDir string
	// Source, when set, is the archive root was unpacked from (s3://bucket/prefix/): each run
	// folder directly in root is recorded as Source<run-id>.tar.zst, not as its temporary path.
	Source string
}

// MaxDepth bounds the walk below the folder given: results/<sweep>/rNN is depth 2. A folder
// below it is named in the report, not searched.
const MaxDepth = 6

// notRunTrees are folders of a results tree that hold no run to index: stored books, a sweep's
// earlier tries (superseded by the runs its resume kept or ran again), plots.
var notRunTrees = map[string]bool{"books": true, sweep.AttemptsDir: true, rundir.PlotsDir: true}

// Import adds every run under root to the index, one transaction per run: a sweep folder's runs
// (sweep.json), a run folder, or a folder of archives (`rig archive --to DIR`: each
// <run-id>.tar.zst verified against its manifest and unpacked to be read). A run that is partial
// or unreadable is skipped and named: still running, abandoned or interrupted, a truncated or
// missing summary.json or manifest.json, a sweep's run that never started, an archive that does
// not match its manifest; so are a symlinked folder (not followed), folders deeper than MaxDepth
// (not searched) and a second folder of a run id already read (the first is kept). A run already
// in the index from an earlier import is replaced.
func Import(ctx context.Context, x *Index, root string, o ImportOptions) (*ImportReport, error) {
	return ImportAll(ctx, x, []string{root}, func(string) ImportOptions { return o })
}

// ImportAll imports each root in turn as Import does, as one import: a run id is read once
// across all of them.
func ImportAll(ctx context.Context, x *Index, roots []string, opts func(root string) ImportOptions) (*ImportReport, error) {
	im := &importer{x: x, rep: &ImportReport{}, seen: map[string]string{}}
	for _, root := range roots {
		im.o = ImportOptions{}
		if opts != nil {
			im.o = opts(root)
		}
		if im.o.Now == nil {
			im.o.Now = time.Now
		}
		fi, err := os.Stat(root)
		if err != nil {
			return im.rep, fmt.Errorf("import %s: %w", root, err)
		}
		if !fi.IsDir() {
			return im.rep, fmt.Errorf("import %s: not a folder", root)
		}
		im.root = root
		if err := im.dir(ctx, root, 0); err != nil {
			return im.rep, err
		}
	}
	return im.rep, nil
}

type importer struct {
	x    *Index
	o    ImportOptions
	rep  *ImportReport
	root string
	seen map[string]string // run id -> the folder it was indexed from, in this import
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func (im *importer) dir(ctx context.Context, path string, depth int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	switch {
	case exists(filepath.Join(path, sweep.FileName)):
		return im.sweep(ctx, path)
	case exists(filepath.Join(path, rundir.ManifestFile)) || exists(filepath.Join(path, rundir.SummaryFile)):
		folder := path
		if im.o.Source != "" && depth == 1 {
			folder = im.o.Source + archive.ArchiveName(filepath.Base(path))
		}
		return im.run(ctx, path, folder)
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		im.skip(path, err.Error())
		return nil
	}
	if ids, err := (archive.Dir{Path: path}).List(ctx); err == nil && len(ids) > 0 {
		return importArchive(ctx, im, archive.Dir{Path: path}, ids)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") || notRunTrees[e.Name()] {
			continue
		}
		p := filepath.Join(path, e.Name())
		if e.Type()&fs.ModeSymlink != 0 {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				im.skip(p, "a symlink to a folder: not followed (import the folder it points to by its own path)")
			}
			continue
		}
		if !e.IsDir() {
			continue
		}
		if depth >= MaxDepth {
			im.skip(p, fmt.Sprintf("more than %d folders below %s: not searched (import it, or a folder nearer it, by its own path)", MaxDepth, im.root))
			continue
		}
		if err := im.dir(ctx, p, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (im *importer) skip(path, reason string) {
	im.rep.Skipped = append(im.rep.Skipped, Skip{Path: path, Reason: reason})
}

func (im *importer) add(ctx context.Context, r *Record) error {
	if first, ok := im.seen[r.RunID]; ok {
		im.skip(r.Folder, fmt.Sprintf("run id %s again: the index keeps %s, read first", r.RunID, first))
		return nil
	}
	if err := im.x.Add(ctx, r); err != nil {
		return err // the index itself failed: stop, nothing half-written (one transaction)
	}
	im.rep.Added = append(im.rep.Added, r.RunID)
	if im.seen != nil {
		im.seen[r.RunID] = r.Folder
	}
	return nil
}

func (im *importer) sweep(ctx context.Context, path string) error {
	set, err := sweep.Load(path)
	if err != nil {
		im.skip(path, "sweep: "+err.Error())
		return nil
	}
	sw := set.Sweep
	for _, rd := range set.Runs {
		runPath := filepath.Join(path, rd.Ref.Dir)
		if rd.Manifest == nil && !exists(runPath) {
			why := fmt.Sprintf("never started: sweep %s stopped before it (sweep.json status %s)", sw.ID, sw.Status)
			if sw.Status == rundir.StatusRunning {
				why = fmt.Sprintf("not started: sweep %s is still running, or its controller died (sweep.json status running)", sw.ID)
			}
			im.skip(runPath, why)
			continue
		}
		r, why := newRecord(rd, sw, runPath, im.o.Now())
		if r == nil {
			im.skip(runPath, why)
			continue
		}
		if err := im.add(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

func (im *importer) run(ctx context.Context, path, folder string) error {
	set, err := sweep.Load(path)
	if err != nil {
		im.skip(folder, err.Error())
		return nil
	}
	r, why := newRecord(set.Runs[0], nil, folder, im.o.Now())
	if r == nil {
		im.skip(folder, why)
		return nil
	}
	return im.add(ctx, r)
}

// importArchive verifies and unpacks each archived run in turn into a folder of its own
// (os.MkdirTemp; archive.Fetch writes only inside it, through an os.Root), reads it, and removes
// that folder and nothing else.
func importArchive(ctx context.Context, im *importer, dest archive.Dest, ids []string) error {
	sort.Strings(ids)
	for _, id := range ids {
		if err := im.archived(ctx, dest, id); err != nil {
			return err
		}
	}
	return nil
}

func (im *importer) archived(ctx context.Context, dest archive.Dest, id string) error {
	name := dest.String() + archive.ArchiveName(id)
	tmp, err := os.MkdirTemp(im.o.TmpDir, "rig-history-")
	if err != nil {
		return fmt.Errorf("unpack %s: %w", name, err)
	}
	defer os.RemoveAll(tmp)
	if _, err := archive.Fetch(ctx, dest, id, tmp); err != nil {
		if errors.Is(err, context.Canceled) {
			return err
		}
		im.skip(name, err.Error())
		return nil
	}
	return im.run(ctx, filepath.Join(tmp, id), name)
}

// Rebuild imports roots into a fresh index written beside path and renamed over it once every
// root is read, so readers see the old index or the new one, never a half-built one. It holds
// the index's lock exclusively (refusing with ErrBusy while a run or an import has it open, whose
// rows a rename would lose); on any error, a cancelled ctx (SIGINT, SIGTERM) included, it removes
// what it built (.rebuild and its -wal and -shm), leaves path as it was and reports nothing
// indexed.
func Rebuild(ctx context.Context, path string, roots []string, opts func(root string) ImportOptions) (*ImportReport, error) {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("results index %s: %w (%s)", path, ErrNotRegular, fi.Mode().Type())
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("results index %s: %w", path, err)
	}
	lock, err := lockIndex(path, syscall.LOCK_EX)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	tmp := path + ".rebuild"
	removeIndex(tmp) // what a killed rebuild left
	all, err := rebuild(ctx, path, tmp, roots, opts)
	if err != nil {
		removeIndex(tmp)
		return nil, fmt.Errorf("rebuild %s (left as it was): %w", path, err)
	}
	return all, nil
}

func rebuild(ctx context.Context, path, tmp string, roots []string, opts func(root string) ImportOptions) (*ImportReport, error) {
	x, err := open(tmp, false)
	if err != nil {
		return nil, err
	}
	defer x.Close()
	all, err := ImportAll(ctx, x, roots, opts)
	if err != nil {
		return nil, err
	}
	if _, err := x.db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return nil, err
	}
	if err := x.Close(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// No writer has the old index open (the lock): its -wal and -shm, if any, are stale and
	// must not be read as the new file's.
	for _, suf := range []string{"-wal", "-shm"} {
		os.Remove(path + suf)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("replace %s: %w", path, err)
	}
	return all, nil
}

// removeIndex removes an index file with its -wal and -shm.
func removeIndex(p string) {
	for _, suf := range []string{"", "-wal", "-shm"} {
		os.Remove(p + suf)
	}
}

// AddRun indexes one finished run folder (rig run calls it for each run it ran) and says why
// when it did not.
func AddRun(ctx context.Context, x *Index, dir string) (added bool, why string, err error) {
	im := &importer{x: x, o: ImportOptions{Now: time.Now}, rep: &ImportReport{}}
	// A sweep's run folder: read it with its sweep.json, for its combination and attempt.
	parent := filepath.Dir(dir)
	if exists(filepath.Join(parent, sweep.FileName)) {
		if set, err := sweep.Load(parent); err == nil {
			for _, rd := range set.Runs {
				if filepath.Clean(rd.Dir) == filepath.Clean(dir) {
					r, why := newRecord(rd, set.Sweep, dir, time.Now())
					if r == nil {
						return false, why, nil
					}
					return true, "", im.add(ctx, r)
				}
			}
		}
	}
	if err := im.run(ctx, dir, dir); err != nil {
		return false, "", err
	}
	if len(im.rep.Skipped) > 0 {
		return false, im.rep.Skipped[0].Reason, nil
	}
	return len(im.rep.Added) > 0, "", nil
}

// PrintReport writes what an import did: each skipped folder with its reason, then the count.
func PrintReport(w io.Writer, rep *ImportReport, index string) {
	for _, s := range rep.Skipped {
		fmt.Fprintf(w, "skipped %s: %s\n", mdtext.Plain(s.Path), mdtext.Plain(s.Reason))
	}
	fmt.Fprintf(w, "%d run(s) indexed, %d skipped -> %s\n", len(rep.Added), len(rep.Skipped), mdtext.Plain(index))
}
