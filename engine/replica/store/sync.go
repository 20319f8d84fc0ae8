// Package store is the reference engine's durable raft storage: a segmented, CRC-checked
// hashicorp/raft LogStore and an atomically rewritten StableStore whose durability follows the
// engine's sync level (docs/architecture.md, "Reference engine"). raft-boltdb can only say "sync"
// or "no sync"; the rig compares level 0 (writes stay in the page cache), level 1 (fdatasync) and
// level 2 (fsync), so the level has to reach the syscall, and it does so in exactly one place:
// Sync.
package store

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// SyncLevel is how hard a write is pushed to the device before it is acknowledged.
type SyncLevel int

const (
	SyncNone SyncLevel = 0 // no sync: acknowledged data may live only in the page cache
	SyncData SyncLevel = 1 // fdatasync: data plus the metadata needed to read it back (size)
	SyncFull SyncLevel = 2 // fsync: data and all inode metadata
)

func (l SyncLevel) String() string {
	switch l {
	case SyncNone:
		return "none"
	case SyncData:
		return "fdatasync"
	case SyncFull:
		return "fsync"
	}
	return fmt.Sprintf("SyncLevel(%d)", int(l))
}

func (l SyncLevel) valid() error {
	if l < SyncNone || l > SyncFull {
		return fmt.Errorf("%w: %d (valid: 0 none, 1 fdatasync, 2 fsync)", ErrBadSyncLevel, int(l))
	}
	return nil
}

// Sentinel errors; callers classify with errors.Is.
var (
	ErrBadSyncLevel = errors.New("invalid sync level")
	// ErrCorrupt: stored data failed a check somewhere other than a torn tail. The store refuses
	// to open rather than drop entries that may have been acknowledged.
	ErrCorrupt = errors.New("corrupt raft store")
	// ErrOutOfOrder: StoreLogs was given indexes that do not extend the log by one each.
	ErrOutOfOrder = errors.New("log index out of order")
	// ErrBroken: an earlier write or sync failed, so what reached the disk is unknown (after a
	// failed fsync Linux may already have dropped the dirty pages); the store takes no more writes.
	ErrBroken = errors.New("raft store unusable after failed write or sync")
	ErrClosed = errors.New("raft store closed")
	ErrLocked = errors.New("raft store directory in use by another process")
	// ErrNotFound is what raft v1.7.2 expects from StableStore.Get/GetUint64 for a missing key:
	// it compares err.Error() with "not found" (raft.go, api.go), so the text must not change.
	ErrNotFound = errors.New("not found")
)

// Sync makes f durable at level: nothing at 0, fdatasync at 1, fsync at 2. It is the one place
// a sync level becomes a syscall; the snapshot writer uses it too.
func Sync(f *os.File, level SyncLevel) error {
	switch level {
	case SyncNone:
		return nil
	case SyncData:
		return fdatasync(f)
	case SyncFull:
		return f.Sync()
	}
	return level.valid()
}

// SyncDir makes the names in dir durable after a create, rename or unlink (a no-op at level 0).
// A directory is always fsynced, at level 1 too: a new name is metadata, which fdatasync is
// allowed to skip on some filesystems.
func SyncDir(dir string, level SyncLevel) error {
	if err := level.valid(); err != nil {
		return err
	}
	if level == SyncNone {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	err = Sync(d, SyncFull)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// SyncSpan is one sync syscall of a store: the file (or folder) made durable, at which level,
// when the call began and how long it took.
type SyncSpan struct {
	Path  string
	Level SyncLevel
	Start time.Time
	Dur   time.Duration
}

// counters are the figures behind Stats. Only real syscalls are counted: level 0 adds nothing.
type counters struct {
	syncs, syncNanos, bytes, entries, batches, tornBytes, reads atomic.Int64
	// onSync, where set (Options.OnSync), hears of every sync as it returns.
	onSync func(SyncSpan)
}

// synced counts a sync of path that began at t.
func (c *counters) synced(path string, level SyncLevel, t time.Time) {
	d := time.Since(t)
	c.syncNanos.Add(int64(d))
	c.syncs.Add(1)
	if c.onSync != nil {
		c.onSync(SyncSpan{Path: path, Level: level, Start: t, Dur: d})
	}
}

func (c *counters) sync(f *os.File, level SyncLevel) error {
	if level == SyncNone {
		return nil
	}
	t := time.Now()
	err := Sync(f, level)
	c.synced(f.Name(), level, t)
	if err != nil {
		return fmt.Errorf("%s %s: %w", level, f.Name(), err)
	}
	return nil
}

func (c *counters) syncDir(dir string, level SyncLevel) error {
	if level == SyncNone {
		return nil
	}
	t := time.Now()
	err := SyncDir(dir, level)
	c.synced(dir, SyncFull, t) // a folder is always fsynced (SyncDir)
	return err
}
