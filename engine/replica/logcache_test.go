package replica

import (
	"bytes"
	"errors"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/rig-dev/rig/engine/replica/store"
)

func cachedLogForTest(tb testing.TB, entries int) (*cachedLog, *store.Log) {
	tb.Helper()
	l, err := store.OpenLog(tb.TempDir(), store.Options{SyncLevel: store.SyncNone})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return newCachedLog(guardedLog{l, &Node{}}, entries), l
}

func entries(from, to, term uint64, data []byte) []*raft.Log {
	var logs []*raft.Log
	for i := from; i <= to; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: append([]byte{byte(i)}, data...)})
	}
	return logs
}

// The newest entries are read back from memory once stored; a compaction (prefix delete)
// forgets only the entries it deletes, and a follower's truncated suffix is never read from
// memory after it was deleted. Store reads are counted to tell the cache from the disk.
func TestCachedLogServesNewestEntries(t *testing.T) {
	c, l := cachedLogForTest(t, 4)
	if err := c.StoreLogs(entries(1, 6, 1, nil)); err != nil {
		t.Fatal(err)
	}
	reads := func() int64 { return l.Stats().Reads }
	get := func(i uint64) (raft.Log, error) {
		var e raft.Log
		err := c.GetLog(i, &e)
		return e, err
	}

	if err := c.DeleteRange(1, 4); err != nil { // compaction after a snapshot at 4
		t.Fatal(err)
	}
	before := reads()
	for _, i := range []uint64{5, 6} {
		if e, err := get(i); err != nil || e.Index != i || e.Data[0] != byte(i) {
			t.Fatalf("entry %d after compacting 1..4: %+v, %v", i, e, err)
		}
	}
	if n := reads() - before; n != 0 {
		t.Fatalf("entries 5 and 6 after compacting 1..4: %d store reads; want 0 (both kept in the cache)", n)
	}
	for _, i := range []uint64{3, 4} { // cached before the compaction, deleted by it
		if e, err := get(i); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("entry %d after compacting 1..4: %+v, %v; want raft.ErrLogNotFound", i, e, err)
		}
	}

	if err := c.DeleteRange(6, 6); err != nil { // a follower's truncated suffix
		t.Fatal(err)
	}
	if e, err := get(6); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("entry 6 after truncating it: %+v, %v; want raft.ErrLogNotFound", e, err)
	}
	if err := c.StoreLogs(entries(6, 6, 2, nil)); err != nil {
		t.Fatal(err)
	}
	before = reads()
	if e, err := get(6); err != nil || e.Term != 2 {
		t.Fatalf("entry 6 after truncation and rewrite: %+v, %v; want term 2", e, err)
	}
	if e, err := get(5); err != nil || e.Term != 1 {
		t.Fatalf("entry 5 after truncating 6: %+v, %v; want term 1", e, err)
	}
	if n := reads() - before; n != 0 {
		t.Fatalf("entries 5 and 6 after truncating and rewriting 6: %d store reads; want 0", n)
	}
}

// BenchmarkCachedLogReadAfterCompaction: one op reads back the newest entries (raft replicating
// or applying them) after a compaction deleted the older ones (a path for a log that compacts:
// this engine's never does; a follower's suffix truncation keeps the entries before it alike). A read from the store
// does not refill the cache, so every op pays what the compaction dropped; store-reads/op counts
// the reads the cache did not answer.
func BenchmarkCachedLogReadAfterCompaction(b *testing.B) {
	n := uint64(logCacheEntries)
	c, l := cachedLogForTest(b, logCacheEntries)
	data := bytes.Repeat([]byte{0xab}, 64<<10)
	if err := c.StoreLogs(entries(1, 2*n, 1, data)); err != nil {
		b.Fatal(err)
	}
	if err := c.DeleteRange(1, n); err != nil {
		b.Fatal(err)
	}
	before := l.Stats().Reads
	var e raft.Log
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := n + 1; j <= 2*n; j++ {
			if err := c.GetLog(j, &e); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(l.Stats().Reads-before)/float64(b.N), "store-reads/op")
}
