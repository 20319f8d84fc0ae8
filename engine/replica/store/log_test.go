package store

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// entry is the deterministic content of index i written in term t, so any test can say what a
// read must return. Sizes, types, extensions and timestamps vary with i.
func entry(i, term uint64) *raft.Log {
	e := &raft.Log{Index: i, Term: term, Type: raft.LogCommand,
		Data: []byte(fmt.Sprintf("cmd-%d-term-%d-%s", i, term, strings.Repeat("x", int(i%7)*13)))}
	switch i % 5 {
	case 1:
		e.Extensions = []byte{byte(i), 0xee, byte(term)}
	case 2:
		e.AppendedAt = time.Unix(1_700_000_000, int64(i)*1001)
	case 3:
		e.Type, e.Data = raft.LogNoop, nil
	}
	return e
}

func entries(from, to, term uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, entry(i, term))
	}
	return out
}

func sameLog(a, b *raft.Log) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type && bytes.Equal(a.Data, b.Data) &&
		bytes.Equal(a.Extensions, b.Extensions) && a.AppendedAt.Equal(b.AppendedAt)
}

// logBuf collects slog output so tests can check what recovery reported.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *logBuf) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *logBuf) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func opts(level SyncLevel, seg int64, w *logBuf) Options {
	o := Options{SyncLevel: level, SegmentSize: seg}
	if w != nil {
		o.Logger = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return o
}

func openLog(t *testing.T, dir string, o Options) *Log {
	t.Helper()
	l, err := OpenLog(dir, o)
	if err != nil {
		t.Fatalf("OpenLog: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func store(t *testing.T, l *Log, logs []*raft.Log) {
	t.Helper()
	if err := l.StoreLogs(logs); err != nil {
		t.Fatalf("StoreLogs %d..%d: %v", logs[0].Index, logs[len(logs)-1].Index, err)
	}
}

// storeInBatches appends from..to in batches of n.
func storeInBatches(t *testing.T, l *Log, from, to, term uint64, n int) {
	t.Helper()
	for i := from; i <= to; i += uint64(n) {
		store(t, l, entries(i, min(i+uint64(n)-1, to), term))
	}
}

// expectRange checks bounds and every entry; termOf gives the term each index was written in.
func expectRange(t *testing.T, l *Log, first, last uint64, termOf func(uint64) uint64) {
	t.Helper()
	f, err1 := l.FirstIndex()
	la, err2 := l.LastIndex()
	if err1 != nil || err2 != nil || f != first || la != last {
		t.Fatalf("bounds = %d..%d (%v, %v), want %d..%d", f, la, err1, err2, first, last)
	}
	if first == 0 {
		return
	}
	for i := first; i <= last; i++ {
		var got raft.Log
		if err := l.GetLog(i, &got); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		if want := entry(i, termOf(i)); !sameLog(&got, want) {
			t.Fatalf("GetLog(%d) = %+v, want %+v", i, got, *want)
		}
	}
	for _, i := range []uint64{first - 1, last + 1, last + 1000} {
		if i == 0 {
			continue
		}
		if err := l.GetLog(i, new(raft.Log)); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("GetLog(%d) outside %d..%d = %v, want raft.ErrLogNotFound", i, first, last, err)
		}
	}
}

func term1(uint64) uint64 { return 1 }

// termFrom: term 1 below index from, term t from there on.
func termFrom(from, t uint64) func(uint64) uint64 {
	return func(i uint64) uint64 {
		if i >= from {
			return t
		}
		return 1
	}
}

func segFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "log-*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

func TestRoundTrip(t *testing.T) {
	l := openLog(t, t.TempDir(), opts(SyncData, 0, nil))
	expectRange(t, l, 0, 0, term1)
	if err := l.GetLog(1, new(raft.Log)); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog on empty log = %v, want raft.ErrLogNotFound", err)
	}
	if err := l.StoreLog(entry(1, 1)); err != nil {
		t.Fatal(err)
	}
	store(t, l, entries(2, 50, 1))
	expectRange(t, l, 1, 50, term1)

	// GetLog must overwrite every field of a reused struct.
	got := raft.Log{Data: []byte("stale"), Extensions: []byte("stale"), AppendedAt: time.Now()}
	if err := l.GetLog(3, &got); err != nil || !sameLog(&got, entry(3, 1)) {
		t.Fatalf("GetLog(3) into a used struct = %+v, %v", got, err)
	}
	st := l.Stats()
	if st.Entries != 50 || st.Batches != 2 || st.Bytes <= 50*headerSize || st.Segments != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestReopenAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, opts(SyncNone, 4096, nil))
	storeInBatches(t, l, 1, 1500, 1, 37)
	if n := l.Stats().Segments; n < 10 {
		t.Fatalf("%d segments; want many with a 4 KiB segment size", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.LastIndex(); !errors.Is(err, ErrClosed) {
		t.Fatalf("LastIndex after Close = %v, want ErrClosed", err)
	}
	l = openLog(t, dir, opts(SyncNone, 4096, nil))
	expectRange(t, l, 1, 1500, term1)
	if st := l.Stats(); st.TornBytes != 0 || st.Segments != len(segFiles(t, dir)) {
		t.Fatalf("clean reopen stats = %+v", st)
	}
	storeInBatches(t, l, 1501, 1600, 1, 10)
	expectRange(t, l, 1, 1600, term1)
}

func TestStoreLogsRejectsOutOfOrder(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, opts(SyncNone, 0, nil))
	store(t, l, entries(1, 10, 1))
	for name, batch := range map[string][]*raft.Log{
		"gap":          entries(12, 13, 1),
		"overlap":      entries(10, 11, 1),
		"inside batch": {entry(11, 1), entry(13, 1)},
		"index zero":   {{Index: 0}},
	} {
		if err := l.StoreLogs(batch); !errors.Is(err, ErrOutOfOrder) {
			t.Errorf("%s: StoreLogs = %v, want ErrOutOfOrder", name, err)
		}
	}
	l.Close()
	expectRange(t, openLog(t, dir, opts(SyncNone, 0, nil)), 1, 10, term1)
}

func TestOptionsValidated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "never")
	for _, o := range []Options{{SyncLevel: 3}, {SyncLevel: -1}, {SegmentSize: 100}} {
		if _, err := OpenLog(dir, o); err == nil || !strings.Contains(err.Error(), "Options.") {
			t.Errorf("OpenLog(%+v) = %v, want an error naming the field", o, err)
		}
		if _, err := OpenStable(dir, o); err == nil {
			t.Errorf("OpenStable(%+v) succeeded", o)
		}
	}
	if _, err := OpenLog(dir, Options{SyncLevel: 7}); !errors.Is(err, ErrBadSyncLevel) {
		t.Errorf("level 7: %v, want ErrBadSyncLevel", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bad options created %s (%v)", dir, err)
	}
	f, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for lvl := SyncNone; lvl <= SyncFull; lvl++ {
		if err := Sync(f, lvl); err != nil {
			t.Errorf("Sync level %d: %v", lvl, err)
		}
		if err := SyncDir(filepath.Dir(f.Name()), lvl); err != nil {
			t.Errorf("SyncDir level %d: %v", lvl, err)
		}
	}
	if err := Sync(f, 3); !errors.Is(err, ErrBadSyncLevel) {
		t.Errorf("Sync level 3 = %v", err)
	}
	if err := SyncDir(t.TempDir(), 9); !errors.Is(err, ErrBadSyncLevel) {
		t.Errorf("SyncDir level 9 = %v", err)
	}
}

func TestDirectoryLocked(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, opts(SyncNone, 0, nil))
	if _, err := OpenLog(dir, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second OpenLog = %v, want ErrLocked", err)
	}
	l.Close()
	openLog(t, dir, Options{}) // released by Close
}

// lastRecord returns the newest segment and the offset and size of its final record.
func lastRecord(t *testing.T, dir string) (path string, off, size int64) {
	t.Helper()
	l := openLog(t, dir, opts(SyncNone, 0, nil))
	defer l.Close()
	s := l.segs[len(l.segs)-1]
	off = int64(s.offsets[len(s.offsets)-1])
	return s.path, off, s.size - off
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// A crash mid-write leaves the newest record cut short, zero-filled or garbled: open cuts it off,
// says so, and the log takes that index again.
func TestTornTailIsCut(t *testing.T) {
	type damage func(t *testing.T, path string, off, size int64)
	truncateAt := func(keep func(off, size int64) int64) damage {
		return func(t *testing.T, path string, off, size int64) {
			if err := os.Truncate(path, keep(off, size)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name     string
		damage   damage
		wantLast uint64
	}{
		{"cut in header", truncateAt(func(off, _ int64) int64 { return off + 7 }), 99},
		{"cut in payload", truncateAt(func(off, size int64) int64 { return off + size/2 }), 99},
		{"one byte short", truncateAt(func(off, size int64) int64 { return off + size - 1 }), 99},
		{"flipped payload byte", func(t *testing.T, p string, off, size int64) { flipByte(t, p, off+size-3) }, 99},
		{"flipped header byte", func(t *testing.T, p string, off, _ int64) { flipByte(t, p, off+9) }, 99},
		{"zero-filled tail", func(t *testing.T, p string, _, _ int64) {
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(make([]byte, 4096))
			f.Close()
		}, 100},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, opts(SyncData, 0, nil))
			for i := uint64(1); i <= 100; i++ {
				store(t, l, entries(i, i, 1))
			}
			l.Close()
			path, off, size := lastRecord(t, dir)
			c.damage(t, path, off, size)

			var w logBuf
			l = openLog(t, dir, opts(SyncData, 0, &w))
			expectRange(t, l, 1, c.wantLast, term1)
			if st := l.Stats(); st.TornBytes == 0 {
				t.Errorf("TornBytes = 0 after recovering a torn tail")
			}
			t.Log(w.String())
			if out := w.String(); !strings.Contains(out, "torn tail") || !strings.Contains(out, filepath.Base(path)) {
				t.Errorf("recovery not logged with the file name:\n%s", out)
			}
			store(t, l, entries(c.wantLast+1, 101, 2))
			l.Close()
			l = openLog(t, dir, opts(SyncData, 0, nil))
			expectRange(t, l, 1, 101, termFrom(c.wantLast+1, 2))
			if l.Stats().TornBytes != 0 {
				t.Errorf("second reopen cut bytes again")
			}
		})
	}
}

// The pages of the last, unsynced batch may reach the disk out of order: a hole inside that batch
// with more of the same batch after it is still a torn tail.
func TestHoleInLastBatchIsTorn(t *testing.T) {
	for _, hole := range []uint64{21, 23, 28} { // first, middle and last record of the batch
		t.Run(fmt.Sprint("hole=", hole), func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, opts(SyncData, 0, nil))
			store(t, l, entries(1, 20, 1))
			store(t, l, entries(21, 28, 1))
			s := l.segs[0]
			holeAt, holeEnd := int64(s.offsets[hole-1]), s.size
			if hole < 28 {
				holeEnd = int64(s.offsets[hole])
			}
			l.Close()
			f, err := os.OpenFile(s.path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt(make([]byte, holeEnd-holeAt), holeAt) // this record never reached the disk
			f.Close()
			expectRange(t, openLog(t, dir, opts(SyncData, 0, nil)), 1, hole-1, term1)
		})
	}
}

func fileBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Damage with acknowledged entries after it is an error naming the file and offset, and the
// failed open changes nothing on disk.
func TestCorruptionBeforeTheTailIsAnError(t *testing.T) {
	cases := []struct {
		name   string
		seg    int64
		damage func(t *testing.T, l *Log) (path string, off int64)
	}{
		{"flipped byte in an earlier record", 0, func(t *testing.T, l *Log) (string, int64) {
			s := l.segs[0]
			off := int64(s.offsets[50])
			flipByte(t, s.path, off+headerSize+4)
			return s.path, off
		}},
		{"flipped header of the second-to-last record", 0, func(t *testing.T, l *Log) (string, int64) {
			s := l.segs[0]
			off := int64(s.offsets[len(s.offsets)-2])
			flipByte(t, s.path, off)
			return s.path, off
		}},
		{"hole in an older batch", 0, func(t *testing.T, l *Log) (string, int64) {
			s := l.segs[0]
			off, end := int64(s.offsets[80]), int64(s.offsets[81])
			f, err := os.OpenFile(s.path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			f.WriteAt(make([]byte, end-off), off) // later batches follow it intact
			return s.path, off
		}},
		{"flipped byte in an older segment", 4096, func(t *testing.T, l *Log) (string, int64) {
			s := l.segs[1]
			off := int64(s.offsets[len(s.offsets)-1]) // even its last record: the segment is sealed
			flipByte(t, s.path, off+headerSize+2)
			return s.path, off
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, opts(SyncNone, c.seg, nil))
			for i := uint64(1); i <= 100; i++ {
				store(t, l, entries(i, i, 1))
			}
			path, off := c.damage(t, l)
			l.Close()
			before := fileBytes(t, path)

			_, err := OpenLog(dir, opts(SyncNone, c.seg, nil))
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("OpenLog = %v, want ErrCorrupt", err)
			}
			t.Log(err)
			if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, fmt.Sprintf("offset %d", off)) {
				t.Fatalf("error %q does not name %s and offset %d", msg, path, off)
			}
			if !bytes.Equal(before, fileBytes(t, path)) {
				t.Fatalf("failed open modified %s", path)
			}
		})
	}
}

func TestGetLogDetectsCorruptionAtRest(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, opts(SyncNone, 0, nil))
	store(t, l, entries(1, 10, 1))
	flipByte(t, l.segs[0].path, int64(l.segs[0].offsets[4])+headerSize+1)
	if err := l.GetLog(5, new(raft.Log)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), l.segs[0].path) {
		t.Fatalf("GetLog of a damaged record = %v, want ErrCorrupt naming the file", err)
	}
}

// Raft's two deletions: a conflicting suffix on a follower, and compaction after a snapshot.
func TestDeleteRangeSuffix(t *testing.T) {
	for _, cut := range []uint64{57, 0} { // 0: exactly at a segment's first index
		t.Run(fmt.Sprint("cut=", cut), func(t *testing.T) {
			dir := t.TempDir()
			o := opts(SyncData, 4096, nil)
			l := openLog(t, dir, o)
			storeInBatches(t, l, 1, 300, 1, 9)
			if cut == 0 {
				cut = l.segs[len(l.segs)/2].base
			}
			nseg := len(segFiles(t, dir))
			if err := l.DeleteRange(cut, 300); err != nil {
				t.Fatal(err)
			}
			expectRange(t, l, 1, cut-1, term1)
			if n := len(segFiles(t, dir)); n >= nseg || n != l.Stats().Segments {
				t.Fatalf("%d segment files after suffix delete (had %d, open %d)", n, nseg, l.Stats().Segments)
			}
			termOf := termFrom(cut, 2)
			for i := cut; i <= 320; i += 5 {
				store(t, l, entries(i, min(i+4, 320), 2))
			}
			expectRange(t, l, 1, 320, termOf)
			l.Close()
			expectRange(t, openLog(t, dir, o), 1, 320, termOf)
		})
	}
}

func TestDeleteRangePrefix(t *testing.T) {
	dir := t.TempDir()
	o := opts(SyncData, 4096, nil)
	l := openLog(t, dir, o)
	storeInBatches(t, l, 1, 300, 1, 9)
	nseg := len(segFiles(t, dir))
	// raft passes its FirstIndex as min; a min below it must work too.
	if err := l.DeleteRange(0, 140); err != nil {
		t.Fatal(err)
	}
	expectRange(t, l, 141, 300, term1)
	files := segFiles(t, dir)
	if len(files) >= nseg || files[0] > filepath.Join(dir, segName(141)) {
		t.Fatalf("after compaction to 141: files %v", files)
	}
	if err := l.DeleteRange(100, 90); err != nil { // empty range: no-op
		t.Fatal(err)
	}
	if err := l.DeleteRange(150, 160); err == nil {
		t.Fatal("DeleteRange inside the log succeeded; it would leave a gap")
	}
	l.Close()
	l = openLog(t, dir, o)
	expectRange(t, l, 141, 300, term1)
	storeInBatches(t, l, 301, 310, 1, 4)
	if err := l.DeleteRange(141, 305); err != nil {
		t.Fatal(err)
	}
	expectRange(t, l, 306, 310, term1)
	l.Close()
	expectRange(t, openLog(t, dir, o), 306, 310, term1)
}

// After a snapshot install raft (for a monotonic store) deletes the whole log and appends from
// the snapshot index on.
func TestDeleteAllThenRestart(t *testing.T) {
	for _, restart := range []uint64{5000, 3} {
		t.Run(fmt.Sprint("at=", restart), func(t *testing.T) {
			dir := t.TempDir()
			o := opts(SyncFull, 4096, nil)
			l := openLog(t, dir, o)
			storeInBatches(t, l, 1, 200, 1, 16)
			if err := l.DeleteRange(1, 200); err != nil {
				t.Fatal(err)
			}
			expectRange(t, l, 0, 0, term1)
			if n := len(segFiles(t, dir)); n != 0 {
				t.Fatalf("%d segment files left after deleting everything", n)
			}
			l.Close()
			l = openLog(t, dir, o)
			expectRange(t, l, 0, 0, term1)
			store(t, l, entries(restart, restart+20, 3))
			l.Close()
			expectRange(t, openLog(t, dir, o), restart, restart+20, func(uint64) uint64 { return 3 })
		})
	}
}

// A compaction writes the meta file, then unlinks; if the process dies between the two, open
// finishes the job. Simulated by putting the unlinked files back.
func TestInterruptedDeleteIsFinishedAtOpen(t *testing.T) {
	for _, c := range []struct {
		name        string
		lo, hi      uint64
		first, last uint64
	}{{"prefix", 1, 150, 151, 200}, {"everything", 1, 200, 0, 0}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			o := opts(SyncData, 4096, nil)
			l := openLog(t, dir, o)
			storeInBatches(t, l, 1, 200, 1, 10)
			saved := map[string][]byte{}
			for _, p := range segFiles(t, dir) {
				saved[p] = fileBytes(t, p)
			}
			if err := l.DeleteRange(c.lo, c.hi); err != nil {
				t.Fatal(err)
			}
			l.Close()
			for p, b := range saved {
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			l = openLog(t, dir, o)
			expectRange(t, l, c.first, c.last, term1)
			if n := len(segFiles(t, dir)); n != l.Stats().Segments {
				t.Fatalf("%d segment files, %d open: leftovers not removed", n, l.Stats().Segments)
			}
		})
	}
}

// Group commit: one sync per StoreLogs batch at levels 1 and 2 (plus a directory sync when the
// batch starts a new segment file), none at level 0.
func TestSyncsPerBatch(t *testing.T) {
	for _, level := range []SyncLevel{SyncNone, SyncData, SyncFull} {
		t.Run(level.String(), func(t *testing.T) {
			l := openLog(t, t.TempDir(), opts(level, 64<<10, nil))
			perSync := int64(level.min1())
			syncs := func() int64 { return l.Stats().Syncs }

			store(t, l, entries(1, 64, 1)) // creates the first segment
			if got, want := syncs(), 2*perSync; got != want {
				t.Fatalf("first batch: %d syncs, want %d (file + directory)", got, want)
			}
			next := uint64(65)
			for b := 0; b < 5; b++ {
				before := syncs()
				store(t, l, entries(next, next+63, 1))
				next += 64
				if got := syncs() - before; got != perSync {
					t.Fatalf("batch of 64: %d syncs, want %d", got, perSync)
				}
			}
			before := syncs()
			if err := l.StoreLog(entry(next, 1)); err != nil {
				t.Fatal(err)
			}
			if got := syncs() - before; got != perSync {
				t.Fatalf("StoreLog: %d syncs, want %d", got, perSync)
			}
			next++
			// Fill past the 64 KiB segment: the batch that rotates adds one directory sync.
			for l.Stats().Segments == 1 {
				before = syncs()
				store(t, l, entries(next, next+63, 1))
				next += 64
			}
			if got := syncs() - before; got != 2*perSync {
				t.Fatalf("rotating batch: %d syncs, want %d", got, 2*perSync)
			}
			if st := l.Stats(); (st.SyncNanos > 0) != (level > SyncNone) {
				t.Fatalf("level %d: SyncNanos = %d", level, st.SyncNanos)
			}
		})
	}
}

// min1 is 1 for a level that syncs, 0 for level 0.
func (l SyncLevel) min1() int {
	if l == SyncNone {
		return 0
	}
	return 1
}

// Raft reads (replication, FSM apply) while it appends and compacts; run with -race.
func TestConcurrentReadersDuringWrites(t *testing.T) {
	l := openLog(t, t.TempDir(), opts(SyncNone, 8192, nil))
	store(t, l, entries(1, 10, 1))
	done := make(chan struct{})
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				first, _ := l.FirstIndex()
				last, _ := l.LastIndex()
				for i := last; i >= first && i+20 > last; i-- {
					var got raft.Log
					err := l.GetLog(i, &got)
					if errors.Is(err, raft.ErrLogNotFound) {
						continue // compacted meanwhile
					}
					if err != nil || !sameLog(&got, entry(i, 1)) {
						errc <- fmt.Errorf("GetLog(%d) = %+v, %v", i, got, err)
						return
					}
				}
			}
		}()
	}
	for i := uint64(11); i <= 3000; i += 10 {
		store(t, l, entries(i, i+9, 1))
		if i%500 == 1 {
			if err := l.DeleteRange(0, i-200); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(done)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
}

// The set of segment files must be contiguous; only an empty newest file (a crash right after
// creating it) is tidied away.
func TestSegmentSetChecks(t *testing.T) {
	setup := func(t *testing.T) (string, Options) {
		dir := t.TempDir()
		o := opts(SyncNone, 4096, nil)
		l := openLog(t, dir, o)
		storeInBatches(t, l, 1, 300, 1, 9)
		l.Close()
		return dir, o
	}
	t.Run("empty newest segment", func(t *testing.T) {
		dir, o := setup(t)
		empty := filepath.Join(dir, segName(301))
		if err := os.WriteFile(empty, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		l := openLog(t, dir, o)
		expectRange(t, l, 1, 300, term1)
		if _, err := os.Stat(empty); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("empty newest segment kept (%v)", err)
		}
		store(t, l, entries(301, 310, 1))
	})
	t.Run("missing middle segment", func(t *testing.T) {
		dir, o := setup(t)
		files := segFiles(t, dir)
		if err := os.Remove(files[len(files)/2]); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenLog(dir, o); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "starts at") {
			t.Fatalf("OpenLog with a segment missing = %v, want ErrCorrupt about the gap", err)
		}
	})
	t.Run("stray segment name", func(t *testing.T) {
		dir, o := setup(t)
		stray := filepath.Join(dir, "log-12.seg")
		if err := os.WriteFile(stray, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenLog(dir, o); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), stray) {
			t.Fatalf("OpenLog with %s = %v, want ErrCorrupt naming it", stray, err)
		}
	})
}

// OnSync hears of every sync the stores make, with the file or folder and the level, and of none
// at level 0: what the engine records as its log's forces.
func TestOnSyncHearsEverySync(t *testing.T) {
	for _, level := range []SyncLevel{SyncNone, SyncData, SyncFull} {
		t.Run(level.String(), func(t *testing.T) {
			var mu sync.Mutex
			var got []SyncSpan
			o := opts(level, 64<<10, nil)
			o.OnSync = func(s SyncSpan) {
				mu.Lock()
				got = append(got, s)
				mu.Unlock()
			}
			dir := t.TempDir()
			l := openLog(t, dir, o)
			st, err := OpenStable(filepath.Join(dir, "stable"), o)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			got = nil // opening may sync the folders
			before := time.Now()
			store(t, l, entries(1, 64, 1))
			store(t, l, entries(65, 70, 1))
			if err := st.SetUint64([]byte("CurrentTerm"), 2); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if level == SyncNone {
				if len(got) != 0 {
					t.Fatalf("level 0: %d syncs heard, want none", len(got))
				}
				return
			}
			// first batch: segment file + folder; second: the segment; stable: its file + folder
			want := []struct {
				dir   bool
				level SyncLevel
			}{{false, level}, {true, SyncFull}, {false, level}, {false, level}, {true, SyncFull}}
			if len(got) != len(want) {
				t.Fatalf("%d syncs heard, want %d: %+v", len(got), len(want), got)
			}
			for i, s := range got {
				isDir := !strings.HasSuffix(s.Path, ".seg") && !strings.HasSuffix(s.Path, ".tmp")
				if isDir != want[i].dir || s.Level != want[i].level {
					t.Errorf("sync %d: %s at %s, want a %s at %s", i, s.Path, s.Level, map[bool]string{true: "folder", false: "file"}[want[i].dir], want[i].level)
				}
				if s.Start.Before(before) || s.Dur < 0 || s.Start.Add(s.Dur).After(time.Now()) {
					t.Errorf("sync %d: start %v dur %v, not within the calls", i, s.Start, s.Dur)
				}
			}
			if !strings.HasPrefix(got[0].Path, dir) || !strings.HasSuffix(got[0].Path, segName(1)) {
				t.Errorf("first sync's path %s, want the segment %s in %s", got[0].Path, segName(1), dir)
			}
		})
	}
}
