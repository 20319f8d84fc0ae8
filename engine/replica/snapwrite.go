package replica

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rig-dev/rig/engine/book"
	"github.com/rig-dev/rig/engine/replica/store"
	"github.com/rig-dev/rig/engine/snapshot"
)

// SnapshotWrite says how a take is written to its file.
type SnapshotWrite struct {
	SyncLevel store.SyncLevel
	BlockSize int
	Threads   int
}

// SnapshotTimes are a take's stats and its two times: Encode until the last block was written
// (and, at sync level > 0, synced), Persisted until the file was durable and visible.
type SnapshotTimes struct {
	snapshot.Stats
	Encode, Persisted time.Duration
}

// WriteSnapshotFile writes b as dir/SnapshotFileName(meta.LogIndex) the way the engine's take
// does: through the block writer into a temporary file, syncing after every block at sync level
// > 0, then the file, then renamed into place and the folder synced. rig bench disk times the
// same function on a bare folder and on a disk model.
func WriteSnapshotFile(dir string, b *book.Book, meta snapshot.Meta, w SnapshotWrite) (SnapshotTimes, error) {
	start := time.Now()
	tmp := filepath.Join(dir, snapshotName(meta.LogIndex)+".tmp")
	file, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return SnapshotTimes{}, fmt.Errorf("create snapshot file: %w", err)
	}
	defer os.Remove(tmp) // no-op after the rename
	st, err := snapshot.Write(file, b, meta, snapshot.Options{
		Threads:        w.Threads,
		BlockSize:      w.BlockSize,
		Sync:           func() error { return store.Sync(file, w.SyncLevel) },
		SyncEveryBlock: w.SyncLevel > 0,
	})
	t := SnapshotTimes{Stats: st, Encode: time.Since(start)}
	if err == nil {
		err = store.Sync(file, w.SyncLevel)
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return t, fmt.Errorf("write snapshot at index %d: %w", meta.LogIndex, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, SnapshotFileName(meta.LogIndex))); err != nil {
		return t, fmt.Errorf("publish snapshot: %w", err)
	}
	if err := store.SyncDir(dir, w.SyncLevel); err != nil {
		return t, fmt.Errorf("sync snapshot dir: %w", err)
	}
	t.Persisted = time.Since(start)
	return t, nil
}
