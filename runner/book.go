package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/rig-dev/rig/engine/driver"
	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/loadgen/loadspec"
	"github.com/rig-dev/rig/playbooks"
	"github.com/rig-dev/rig/rundir"
)

// booksDir is the store of books inside the results folder: <key>.snap (an engine snapshot of
// the book, the driver's BookInstaller.WriteBook) and <key>.json (bookRecord). Runs whose preload options
// build the same book (loadspec.BookShape.Key) — whatever their sync level, block size, encode threads
// or timers — build it through the log once; later runs install the stored snapshot in every
// server's snapshots folder before the engines start, and each node restores it.
const booksDir = "books"

// An engine that captures its own book (playbooks.Engine.BookCapture) keeps it as
// <key>.<engine>/ (the files its capture wrote, at their paths in a server's data folder) and
// <key>.<engine>.json, the engine being playbooks.Engine.BookStoreName.

// bookRecord is <key>.json (<key>.<engine>.json) in the book store.
type bookRecord struct {
	Key       string    `json:"key"`
	Orders    int64     `json:"orders"`
	StateHash string    `json:"state_hash"`
	BuiltBy   string    `json:"built_by"` // the run whose preload built it through the log
	Stored    time.Time `json:"stored"`
	// A captured book: its files, relative to a server's data folder, and the version the engine
	// reported at capture (it restores only on the same version).
	Files         []string `json:"files,omitempty"`
	EngineVersion string   `json:"engine_version,omitempty"`
}

// bookPaths are the stored book of key (a file, or a captured book's folder) and its record.
func bookPaths(resultsDir string, e playbooks.Engine, key string) (book, rec string) {
	base := filepath.Join(resultsDir, booksDir, key)
	if name := e.BookStoreName(); name != "" {
		return base + "." + name, base + "." + name + ".json"
	}
	return base + ".snap", base + ".json"
}

func (r *run) bookPaths(key string) (book, rec string) {
	return bookPaths(r.opts.ResultsDir, r.pb.Engine, key)
}

// BookStored reports whether the book a run of pb preloads is in resultsDir's book store, so
// the run will install it instead of preloading (for `rig validate`'s estimates).
func BookStored(resultsDir string, pb *playbooks.Playbook) bool {
	if pb.Preload.Orders == 0 || !pb.Engine.StoresBooks() {
		return false
	}
	key, err := loadspec.BookShape{Orders: pb.Preload.Orders, Instruments: pb.Preload.Instruments}.Key()
	if err != nil {
		return false
	}
	book, rec := bookPaths(resultsDir, pb.Engine, key)
	for _, f := range []string{rec, book} {
		if _, err := os.Stat(f); err != nil {
			return false
		}
	}
	return true
}

// chooseBook decides, before the engines start, whether this run installs a stored book. Only
// an engine whose driver is a driver.BookInstaller restores a stored file, or one that captures
// its own book (engine.book_capture); another always preloads through the log.
func (r *run) chooseBook(ctx context.Context) error {
	if r.pb.Preload.Orders == 0 {
		return nil
	}
	if !r.pb.Engine.StoresBooks() {
		r.progress("the %s engine cannot install a stored book: preloading through the log", r.pb.Engine.DriverName())
		return nil
	}
	r.installer, _ = r.pb.Engine.EngineDriver().(driver.BookInstaller)
	cfg := r.loadgenConfig()
	key, err := cfg.Book().Key()
	if err != nil {
		return fmt.Errorf("book key: %w", err)
	}
	use := &rundir.BookUse{Key: key, Orders: r.pb.Preload.Orders}
	snapPath, recPath := r.bookPaths(key)
	if b, err := os.ReadFile(recPath); err == nil {
		var rec bookRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return fmt.Errorf("stored book %s: %w", recPath, err)
		}
		if _, err := os.Stat(snapPath); err == nil {
			use.Reused, use.BuiltBy, use.StateHash = true, rec.BuiltBy, rec.StateHash
			r.bookFiles = rec.Files
			if err := r.checkBookVersion(ctx, snapPath, rec); err != nil {
				return err
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("stored book: %w", err)
	}
	r.book = use
	r.updateManifest(func(m *rundir.Manifest) { m.Book = use })
	return nil
}

// dataPath is rel inside a server's engine data folder, as the node sees it.
func (r *run) dataPath(n inventory.Node, rel string) string {
	if r.srv(n.Name).dataRoot != "" {
		return path.Join(r.dataDir(n), rel)
	}
	return r.cl.NodePath(n, path.Join(r.dataDir(n), rel))
}

// installBook copies the stored book into every server's snapshots folder, where the engine
// restores it at launch as if it had taken it.
func (r *run) installBook(ctx context.Context) error {
	r.mark("preload_start")
	r.progress("installing stored book %s (%d orders, built by run %s) on %d servers", r.book.Key, r.book.Orders, r.book.BuiltBy, len(r.servers))
	snapPath, _ := r.bookPaths(r.book.Key)
	for _, n := range r.servers {
		if r.installer == nil { // a captured book: its files, each where the capture found it
			for _, f := range r.bookFiles {
				if err := r.cl.Transport().Upload(ctx, n, filepath.Join(snapPath, filepath.FromSlash(f)), r.dataPath(n, f), 0o644); err != nil {
					return fmt.Errorf("install stored book on %s: %w", n.Name, err)
				}
			}
			continue
		}
		dst := r.dataPath(n, r.installer.BookFile())
		if err := r.cl.Transport().Upload(ctx, n, snapPath, dst, 0o644); err != nil {
			return fmt.Errorf("install stored book on %s: %w", n.Name, err)
		}
	}
	return nil
}

// checkInstalledBook runs once the cluster is ready: every server must hold the stored book's
// state, or the run would measure a different book than it says.
func (r *run) checkInstalledBook(ctx context.Context) error {
	for _, n := range r.servers {
		st, err := r.agent(n.Name).EngineStatusHash(ctx)
		if err != nil {
			return fmt.Errorf("state hash of %s after installing the stored book: %w", n.Name, err)
		}
		if st.StateHash != r.book.StateHash || int64(st.Orders) != r.book.Orders {
			return fmt.Errorf("%s restored the stored book %s as %d orders with state hash %s; the book has %d orders and hash %s",
				n.Name, r.book.Key, st.Orders, st.StateHash, r.book.Orders, r.book.StateHash)
		}
	}
	r.mark("preload_end")
	r.progress("stored book %s restored on every server (state hash %s)", r.book.Key, r.book.StateHash)
	return nil
}

// storeBook runs after a run that preloaded through the log: it writes the book once, here, and
// keeps it if its state hash is the one every server ended with (probes cross nothing, so the
// book they end with is the preloaded one; a preload that lost batches to a leader change may
// hold them in another order, and that book is not stored). The time it takes is part of the
// run's overhead. The caller holds no lock and saves the manifest.
func (r *run) storeBook() {
	if r.captured != nil || r.captureErr != "" {
		// A captured book's staging folder, whatever becomes of it (after the rename, nothing).
		defer func() { b, _ := r.bookPaths(r.book.Key); os.RemoveAll(b + ".tmp") }()
	}
	if r.book == nil || r.book.Reused || r.man.Status != rundir.StatusOK {
		return
	}
	bk := r.book
	notStored := func(format string, args ...any) {
		r.manMu.Lock()
		bk.NotStored = fmt.Sprintf(format, args...)
		r.manMu.Unlock()
		r.progress("book %s not stored: %s", bk.Key, bk.NotStored)
	}
	snapPath, recPath := r.bookPaths(bk.Key)
	if _, err := os.Stat(recPath); err == nil {
		notStored("already stored")
		return
	}
	if r.installer == nil {
		r.storeCapturedBook(notStored)
		return
	}
	hash, _, err := r.finalHash()
	if err != nil {
		notStored("%v", err)
		return
	}
	start := time.Now()
	defer os.Remove(snapPath + ".tmp") // after the rename, nothing to remove
	st, err := writeBook(snapPath, r.installer, r.loadgenConfig())
	if err != nil {
		notStored("%v", err)
		return
	}
	if st.StateHash != hash {
		notStored("the servers ended with state hash %s; the book built order by order has %s", hash, st.StateHash)
		return
	}
	d, err := r.keepBook(snapPath, recPath, bookRecord{Key: bk.Key, Orders: st.Orders, StateHash: st.StateHash, BuiltBy: r.id}, start)
	if err != nil {
		notStored("%v", err)
		return
	}
	r.progress("stored book %s (%d orders, state hash %s) in %s for later runs", bk.Key, st.Orders, st.StateHash, d.Round(time.Millisecond))
}

// keepBook moves a book written beside path (path+".tmp": the reference engine's snapshot file,
// a captured book's folder) into place and writes its record; the time since start is the
// store's, part of the run's overhead.
func (r *run) keepBook(path, recPath string, rec bookRecord, start time.Time) (time.Duration, error) {
	rec.Stored = time.Now().UTC()
	b, _ := json.MarshalIndent(rec, "", "  ")
	os.RemoveAll(path) // left by a store that failed before its record
	if err := os.Rename(path+".tmp", path); err != nil {
		return 0, err
	}
	if err := atomicfile.WriteFile(recPath, b, 0o644); err != nil {
		return 0, err
	}
	d := time.Since(start)
	r.manMu.Lock()
	r.book.Stored, r.book.StateHash, r.book.StoreS = true, rec.StateHash, d.Seconds()
	if r.man.OverheadS != nil {
		*r.man.OverheadS += d.Seconds()
	}
	r.manMu.Unlock()
	return d, nil
}

// writeBook writes the book of cfg's preload to path+".tmp" in bi's format, synced.
func writeBook(path string, bi driver.BookInstaller, cfg loadspec.Config) (driver.BookStats, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return driver.BookStats{}, fmt.Errorf("book store: %w", err)
	}
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return driver.BookStats{}, fmt.Errorf("book store: %w", err)
	}
	st, err := bi.WriteBook(f, cfg.Book())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return st, err
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
