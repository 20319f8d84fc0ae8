package replica

import (
	"sync"

	"github.com/hashicorp/raft"
)

// logCacheEntries is how many of the newest log entries raft reads from memory: twice the
// preload's batches in flight, so at most ~16 MiB of 1 MiB batches is held.
const logCacheEntries = 16

// cachedLog answers raft's reads of the entries it has just stored from memory: the leader
// reads each back to replicate it and a follower to apply it, and a 1 MiB preload batch is
// otherwise a pread and a copy on every node. An entry is kept only once the store has it (at
// the sync level), and store errors pass through unwrapped (raft's own LogCache quotes them,
// which hides ENOSPC from errors.Is).
type cachedLog struct {
	guardedLog
	mu   sync.RWMutex
	ring []*raft.Log // ring[index % len]
}

func newCachedLog(g guardedLog, entries int) *cachedLog {
	return &cachedLog{guardedLog: g, ring: make([]*raft.Log, entries)}
}

func (c *cachedLog) GetLog(index uint64, out *raft.Log) error {
	c.mu.RLock()
	e := c.ring[index%uint64(len(c.ring))]
	c.mu.RUnlock()
	if e != nil && e.Index == index {
		*out = *e
		return nil
	}
	return c.guardedLog.GetLog(index, out)
}

func (c *cachedLog) StoreLog(e *raft.Log) error { return c.StoreLogs([]*raft.Log{e}) }

func (c *cachedLog) StoreLogs(logs []*raft.Log) error {
	if err := c.guardedLog.StoreLogs(logs); err != nil {
		return err
	}
	c.mu.Lock()
	for _, e := range logs {
		c.ring[e.Index%uint64(len(c.ring))] = e
	}
	c.mu.Unlock()
	return nil
}

// DeleteRange forgets the cached entries in lo..hi before the store deletes them, so a
// follower truncating a conflicting suffix never reads an entry it deleted. Entries outside the
// range stay: a truncation deletes only the suffix, and the entries before it (which raft reads
// again to replicate or apply) would otherwise come back from disk. A compaction would delete
// only old entries, keeping the newest; this engine never compacts its log (SnapshotThreshold in
// replica.go), so that path is for a store configured to.
func (c *cachedLog) DeleteRange(lo, hi uint64) error {
	c.mu.Lock()
	for i, e := range c.ring {
		if e != nil && e.Index >= lo && e.Index <= hi {
			c.ring[i] = nil
		}
	}
	c.mu.Unlock()
	return c.guardedLog.DeleteRange(lo, hi)
}
