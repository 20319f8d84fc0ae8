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

	"github.com/rig-dev/rig/engine/replica"
	snapfile "github.com/rig-dev/rig/engine/snapshot"
	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/inventory"
	"github.com/rig-dev/rig/loadgen"
	"github.com/rig-dev/rig/rundir"
)

// booksDir is the store of books inside the results folder: <key>.snap (an engine snapshot of
// the book, loadgen.WriteBookSnapshot) and <key>.json (bookRecord). Runs whose preload options
// build the same book (loadgen.BookKey) — whatever their sync level, block size, encode threads
// or timers — build it through the log once; later runs install the stored snapshot in every
// server's snapshots folder before the engines start, and each node restores it.
const booksDir = "books"

// bookRecord is <key>.json in the book store.
type bookRecord struct {
	Key       string    `json:"key"`
	Orders    int64     `json:"orders"`
	StateHash string    `json:"state_hash"`
	BuiltBy   string    `json:"built_by"` // the run whose preload built it through the log
	Stored    time.Time `json:"stored"`
}

func (r *run) bookPaths(key string) (snap, rec string) {
	dir := filepath.Join(r.opts.ResultsDir, booksDir)
	return filepath.Join(dir, key+".snap"), filepath.Join(dir, key+".json")
}

// chooseBook decides, before the engines start, whether this run installs a stored book.
func (r *run) chooseBook() error {
	if r.pb.Preload.Orders == 0 {
		return nil
	}
	cfg := r.loadgenConfig()
	key, err := loadgen.BookKey(cfg.PreloadOptions())
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
	if r.dataRoot[n.Name] != "" {
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
		dst := r.dataPath(n, path.Join("snapshots", replica.SnapshotFileName(loadgen.StoredBookMeta.LogIndex)))
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
// book they end with is the preloaded one; a preload that resent batches after a leader change
// may have queued orders in another order, and that book is not stored).
func (r *run) storeBook() {
	if r.book == nil || r.book.Reused || r.man.Status != rundir.StatusOK {
		return
	}
	snapPath, recPath := r.bookPaths(r.book.Key)
	if _, err := os.Stat(recPath); err == nil {
		return // stored meanwhile
	}
	final := map[string]bool{}
	for _, n := range r.servers {
		var st struct {
			StateHash string `json:"state_hash"`
		}
		b, err := os.ReadFile(filepath.Join(r.dir, n.Name, "status.json"))
		if err == nil {
			err = json.Unmarshal(b, &st)
		}
		if err != nil {
			r.log.Info("book not stored: no final state", "node", n.Name, "err", err)
			return
		}
		final[st.StateHash] = true
	}
	start := time.Now()
	if err := os.MkdirAll(filepath.Dir(snapPath), 0o755); err != nil {
		r.log.Warn("store book", "err", err)
		return
	}
	tmp := snapPath + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		r.log.Warn("store book", "err", err)
		return
	}
	defer os.Remove(tmp)
	cfg := r.loadgenConfig()
	st, err := loadgen.WriteBookSnapshot(f, cfg.PreloadOptions(), snapfile.Options{BlockSize: 16 << 20})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.log.Warn("store book", "err", err)
		return
	}
	if len(final) != 1 || !final[st.StateHash] {
		r.progress("book %s not stored: the servers ended with state hash(es) %v, the book built order by order has %s", r.book.Key, keys(final), st.StateHash)
		return
	}
	rec, _ := json.MarshalIndent(bookRecord{Key: r.book.Key, Orders: st.Orders, StateHash: st.StateHash, BuiltBy: r.id, Stored: time.Now().UTC()}, "", "  ")
	if err := os.Rename(tmp, snapPath); err != nil {
		r.log.Warn("store book", "err", err)
		return
	}
	if err := atomicfile.WriteFile(recPath, rec, 0o644); err != nil {
		r.log.Warn("store book", "err", err)
		return
	}
	r.progress("stored book %s (%d orders, state hash %s) in %s for later runs", r.book.Key, st.Orders, st.StateHash, time.Since(start).Round(time.Millisecond))
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
