package store

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/raft"
)

const (
	// DefaultSegmentSize is where a segment file stops taking new batches.
	DefaultSegmentSize = 64 << 20
	minSegmentSize     = 4 << 10
	// Record offsets are kept as uint32, and a segment may overrun its target by one batch.
	maxSegmentSize = 1 << 31

	segPrefix = "log-"
	segSuffix = ".seg"
	lockName  = "log.lock"
)

// Options configure OpenLog and OpenStable.
type Options struct {
	SyncLevel   SyncLevel    // 0 none, 1 fdatasync, 2 fsync
	SegmentSize int64        // bytes per segment file before a new one is started; 0 = 64 MiB
	Logger      *slog.Logger // recovery and compaction events; nil = discard
	// OnSync, where set, is called with every sync syscall the store makes, on the goroutine that
	// made it (raft's, for a write it waits on), as the call returns: it must not block.
	OnSync func(SyncSpan)
}

func (o Options) withDefaults() (Options, error) {
	if err := o.SyncLevel.valid(); err != nil {
		return o, fmt.Errorf("Options.SyncLevel: %w", err)
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.SegmentSize < minSegmentSize || o.SegmentSize > maxSegmentSize {
		return o, fmt.Errorf("Options.SegmentSize %d: must be between %d and %d bytes (0 = %d)",
			o.SegmentSize, minSegmentSize, maxSegmentSize, DefaultSegmentSize)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// Stats are cumulative since open.
type Stats struct {
	Syncs     int64 // sync syscalls (file and directory); 0 at level 0
	SyncNanos int64 // total time spent inside them
	Bytes     int64 // bytes appended to segment files
	Entries   int64 // log entries appended
	Batches   int64 // StoreLog/StoreLogs calls that appended something
	Segments  int   // segment files now open
	TornBytes int64 // bytes cut off the tail at open (a crash mid-write)
	Reads     int64 // entries read back from the segment files (GetLog's preads)
}

// Log is a raft.LogStore (and raft.MonotonicLogStore) over append-only segment files named
// log-<first index>.seg. Every record is CRC-checked; an in-memory table maps each index to its
// file offset, so a read is one pread. StoreLogs writes a whole batch with one write and syncs
// once at the sync level (group commit).
type Log struct {
	dir  string
	opts Options
	log  *slog.Logger
	lock *os.File

	// wmu serialises writers (raft appends from its main loop and compacts from its snapshot
	// goroutine). It is held across write+sync; mu is not, so reads go on during a sync.
	wmu    sync.Mutex
	buf    []byte // encode buffer, guarded by wmu
	rel    []uint32
	broken error // guarded by wmu

	mu        sync.RWMutex // guards segs (and their offsets/size), metaFirst, closed
	segs      []*segment   // ascending, contiguous, none empty
	metaFirst uint64       // entries below this were deleted (prefix compaction); 0 = none
	closed    bool

	stats counters
}

type segment struct {
	base    uint64 // index of the file's first record (also in its name)
	path    string
	f       *os.File
	offsets []uint32 // offsets[i] = file offset of index base+i
	size    int64    // end of the last record
}

func (s *segment) last() uint64 { return s.base + uint64(len(s.offsets)) - 1 }

func segName(base uint64) string { return fmt.Sprintf("%s%020d%s", segPrefix, base, segSuffix) }

var _ interface {
	raft.LogStore
	raft.MonotonicLogStore
	io.Closer
} = (*Log)(nil)

// OpenLog opens (creating if needed) the log in dir and recovers it: a torn or checksum-failing
// tail of the newest segment, left by a crash mid-write, is cut off and logged; damage anywhere
// else fails with ErrCorrupt naming the file and offset. Only one process may hold dir.
func OpenLog(dir string, opts Options) (*Log, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("open raft log in %s: %w", dir, err)
	}
	if err := ensureDir(dir, opts.SyncLevel); err != nil {
		return nil, fmt.Errorf("open raft log in %s: %w", dir, err)
	}
	lock, err := lockFile(filepath.Join(dir, lockName))
	if err != nil {
		return nil, fmt.Errorf("open raft log in %s: %w", dir, err)
	}
	l := &Log{dir: dir, opts: opts, log: opts.Logger.With("component", "raft-log", "dir", dir), lock: lock}
	l.stats.onSync = opts.OnSync
	if err := l.recover(); err != nil {
		l.closeFilesLocked()
		return nil, fmt.Errorf("open raft log in %s: %w", dir, err)
	}
	first, last := l.boundsLocked()
	l.log.Info("raft log opened", "first", first, "last", last, "segments", len(l.segs),
		"sync_level", int(opts.SyncLevel), "torn_bytes", l.stats.tornBytes.Load())
	return l, nil
}

// ensureDir creates dir if missing and, at level > 0, makes its name durable in the parent.
func ensureDir(dir string, level SyncLevel) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(filepath.Clean(dir)), level)
}

func (l *Log) recover() error {
	var err error
	if l.metaFirst, err = readMeta(l.dir); err != nil {
		return err
	}
	if err := removeTemp(l.dir, metaName); err != nil {
		return err
	}
	segs, err := listSegments(l.dir)
	if err != nil {
		return err
	}
	removed := false
	// Wholly compacted segments are what a prefix DeleteRange leaves if it crashed after
	// writing the meta file and before unlinking them.
	for len(segs) > 1 && segs[1].base <= l.metaFirst {
		if err := os.Remove(segs[0].path); err != nil {
			return err
		}
		l.log.Info("removed segment left by an interrupted compaction", "file", segs[0].path)
		segs, removed = segs[1:], true
	}
	for i, s := range segs {
		if s.f, err = os.OpenFile(s.path, os.O_RDWR, 0); err != nil {
			return err
		}
		l.segs = append(l.segs, s) // now closed on any error below
		if err := l.scan(s, i == len(segs)-1); err != nil {
			return err
		}
		if i > 0 {
			prev := segs[i-1]
			if len(prev.offsets) == 0 {
				return fmt.Errorf("%w: %s holds no records but later segments follow", ErrCorrupt, prev.path)
			}
			if s.base != prev.last()+1 {
				return fmt.Errorf("%w: %s ends at index %d but %s starts at %d", ErrCorrupt, prev.path, prev.last(), s.path, s.base)
			}
		}
	}
	// A newest segment with no records is a crash between creating it and its first batch
	// reaching the disk (or a tail cut down to nothing).
	if n := len(l.segs); n > 0 && len(l.segs[n-1].offsets) == 0 {
		s := l.segs[n-1]
		s.f.Close()
		l.segs = l.segs[:n-1]
		if err := os.Remove(s.path); err != nil {
			return err
		}
		l.log.Warn("removed empty newest segment", "file", s.path)
		removed = true
	}
	// A full DeleteRange moves the meta file past the last index, then unlinks every segment.
	if n := len(l.segs); n > 0 && l.segs[n-1].last() < l.metaFirst {
		for _, s := range l.segs {
			s.f.Close()
			if err := os.Remove(s.path); err != nil {
				return err
			}
			l.log.Info("removed segment left by an interrupted delete of the whole log", "file", s.path)
		}
		l.segs, removed = nil, true
	}
	if removed {
		return l.stats.syncDir(l.dir, l.opts.SyncLevel)
	}
	return nil
}

func listSegments(dir string) ([]*segment, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var segs []*segment
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, segPrefix) || !strings.HasSuffix(name, segSuffix) {
			continue
		}
		num := strings.TrimSuffix(strings.TrimPrefix(name, segPrefix), segSuffix)
		base, err := strconv.ParseUint(num, 10, 64)
		if err != nil || len(num) != 20 || base == 0 || !e.Type().IsRegular() {
			return nil, fmt.Errorf("%w: %s: not a segment file (want a regular file log-<20-digit first index>.seg)",
				ErrCorrupt, filepath.Join(dir, name))
		}
		segs = append(segs, &segment{base: base, path: filepath.Join(dir, name)})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].base < segs[j].base })
	return segs, nil
}

// flaw is the first record of a segment that failed a check.
type flaw struct {
	off    int64
	reason string
}

// scan verifies every record of s, builds its offset table and, if s is the newest segment,
// cuts off a torn tail.
func (l *Log) scan(s *segment, newest bool) error {
	fi, err := s.f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, 0, size), 1<<20)
	var (
		hb      [headerSize]byte
		payload []byte
		off     int64
		expect  = s.base
		bad     *flaw
	)
	for off < size {
		if size-off < headerSize {
			bad = &flaw{off, fmt.Sprintf("partial header (%d of %d bytes)", size-off, headerSize)}
			break
		}
		if _, err := io.ReadFull(r, hb[:]); err != nil {
			return fmt.Errorf("read %s at offset %d: %w", s.path, off, err)
		}
		h, err := parseHeader(hb[:])
		if err != nil {
			bad = &flaw{off, err.Error()}
			break
		}
		end := off + headerSize + int64(h.length)
		if end > size {
			bad = &flaw{off, fmt.Sprintf("record of %d bytes runs past the end of the file (%d bytes)", end-off, size)}
			break
		}
		if cap(payload) < int(h.length) {
			payload = make([]byte, h.length)
		}
		payload = payload[:h.length]
		if _, err := io.ReadFull(r, payload); err != nil {
			return fmt.Errorf("read %s at offset %d: %w", s.path, off, err)
		}
		if err := h.checkPayload(payload); err != nil {
			bad = &flaw{off, err.Error()}
			break
		}
		if h.index != expect {
			return fmt.Errorf("%w: %s: offset %d: record holds index %d where %d belongs", ErrCorrupt, s.path, off, h.index, expect)
		}
		if off > math.MaxUint32 {
			return fmt.Errorf("%w: %s: record at offset %d is past the 4 GiB a segment may hold", ErrCorrupt, s.path, off)
		}
		s.offsets = append(s.offsets, uint32(off))
		off, expect = end, expect+1
	}
	s.size = off
	if bad == nil {
		return nil
	}
	if !newest {
		return fmt.Errorf("%w: %s: offset %d (index %d): %s; only the newest segment's tail can be torn",
			ErrCorrupt, s.path, bad.off, expect, bad.reason)
	}
	// Torn or damaged? Records after the flaw that belong to the same batch (its batch began at
	// or before the missing index) can be a batch whose pages reached the disk out of order
	// before its sync; that batch was never acknowledged. A record from a later batch means the
	// flawed one was synced (a later batch is only written after the earlier one's sync), so
	// dropping it would lose acknowledged entries.
	at, h, found, err := findLaterBatch(s.f, bad.off, size, expect)
	if err != nil {
		return fmt.Errorf("read %s after offset %d: %w", s.path, bad.off, err)
	}
	if found {
		return fmt.Errorf("%w: %s: offset %d (index %d): %s, yet index %d from a later batch follows at offset %d; "+
			"refusing to drop acknowledged entries", ErrCorrupt, s.path, bad.off, expect, bad.reason, h.index, at)
	}
	torn := size - bad.off
	if err := s.f.Truncate(bad.off); err != nil {
		return fmt.Errorf("truncate torn tail of %s at offset %d: %w", s.path, bad.off, err)
	}
	if err := l.stats.sync(s.f, l.opts.SyncLevel); err != nil {
		return err
	}
	l.stats.tornBytes.Add(torn)
	l.log.Warn("cut torn tail off raft log (crash mid-write)", "file", s.path, "offset", bad.off,
		"bytes", torn, "reason", bad.reason, "kept_through_index", expect-1)
	return nil
}

// findLaterBatch looks at every byte offset after from for a whole, checksummed record whose
// batch began after expect. Only runs when a tail looks torn, so a full read is fine.
func findLaterBatch(f *os.File, from, size int64, expect uint64) (at int64, h header, found bool, err error) {
	buf := make([]byte, size-from)
	if _, err := f.ReadAt(buf, from); err != nil {
		return 0, header{}, false, err
	}
	for p := 1; p+headerSize <= len(buf); {
		h, err := parseHeader(buf[p : p+headerSize])
		if err == nil {
			end := p + headerSize + int(h.length)
			if end <= len(buf) && h.checkPayload(buf[p+headerSize:end]) == nil {
				if h.batchFirst() > expect {
					return from + int64(p), h, true, nil
				}
				p = end
				continue
			}
		}
		p++
	}
	return 0, header{}, false, nil
}

// boundsLocked returns the first and last index, (0, 0) when empty. Caller holds mu (or is
// the only user, during open).
func (l *Log) boundsLocked() (first, last uint64) {
	if len(l.segs) == 0 {
		return 0, 0
	}
	return max(l.segs[0].base, l.metaFirst), l.segs[len(l.segs)-1].last()
}

// FirstIndex implements raft.LogStore.
func (l *Log) FirstIndex() (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, ErrClosed
	}
	first, _ := l.boundsLocked()
	return first, nil
}

// LastIndex implements raft.LogStore.
func (l *Log) LastIndex() (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, ErrClosed
	}
	_, last := l.boundsLocked()
	return last, nil
}

// IsMonotonic tells raft the log never has gaps: after a snapshot restore raft empties the log
// (DeleteRange over all of it) instead of relying on a gap.
func (l *Log) IsMonotonic() bool { return true }

// GetLog implements raft.LogStore; a missing index is raft.ErrLogNotFound.
func (l *Log) GetLog(index uint64, out *raft.Log) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	first, last := l.boundsLocked()
	if len(l.segs) == 0 || index < first || index > last {
		return raft.ErrLogNotFound
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > index }) - 1
	s := l.segs[i]
	k := index - s.base
	off, end := int64(s.offsets[k]), s.size
	if k+1 < uint64(len(s.offsets)) {
		end = int64(s.offsets[k+1])
	}
	buf := make([]byte, end-off)
	l.stats.reads.Add(1)
	if _, err := s.f.ReadAt(buf, off); err != nil {
		return fmt.Errorf("read log index %d from %s at offset %d: %w", index, s.path, off, err)
	}
	h, err := parseHeader(buf)
	if err == nil && (h.index != index || headerSize+int64(h.length) != end-off) {
		err = fmt.Errorf("record is index %d, %d bytes; expected index %d, %d bytes", h.index, headerSize+h.length, index, end-off)
	}
	if err == nil {
		err = h.checkPayload(buf[headerSize:])
	}
	if err == nil {
		err = decodePayload(h, buf[headerSize:], out)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: offset %d (index %d): %v", ErrCorrupt, s.path, off, index, err)
	}
	return nil
}

// StoreLog implements raft.LogStore.
func (l *Log) StoreLog(e *raft.Log) error { return l.StoreLogs([]*raft.Log{e}) }

// StoreLogs implements raft.LogStore: the batch must extend the log by consecutive indexes (an
// empty log accepts any start). It is written with one write and synced once at the level.
func (l *Log) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.broken != nil {
		return l.broken
	}
	l.mu.RLock()
	closed, metaFirst := l.closed, l.metaFirst
	_, last := l.boundsLocked()
	var active *segment
	if n := len(l.segs); n > 0 {
		active = l.segs[n-1]
	}
	l.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	for i, e := range logs {
		switch {
		case e.Index == 0:
			return fmt.Errorf("%w: index 0 is not a raft log index", ErrOutOfOrder)
		case i == 0 && active != nil && e.Index != last+1:
			return fmt.Errorf("%w: batch starts at index %d but the log ends at %d", ErrOutOfOrder, e.Index, last)
		case i > 0 && e.Index != logs[i-1].Index+1:
			return fmt.Errorf("%w: batch has index %d after %d", ErrOutOfOrder, e.Index, logs[i-1].Index)
		}
	}

	buf, rel := l.buf[:0], l.rel[:0]
	for i, e := range logs {
		rel = append(rel, uint32(len(buf)))
		var err error
		if buf, err = appendRecord(buf, e, uint32(i)); err != nil {
			return err
		}
	}
	l.buf, l.rel = buf, rel
	where := func() string { return fmt.Sprintf("append log entries %d..%d", logs[0].Index, logs[len(logs)-1].Index) }

	// An emptied log restarting below its recorded first index must lower it first, or a
	// reopen would hide the new entries.
	if active == nil && metaFirst > logs[0].Index {
		if err := writeFileAtomic(l.dir, metaName, encodeMeta(0), l.opts.SyncLevel, &l.stats); err != nil {
			return fmt.Errorf("%s: %w", where(), err)
		}
		l.mu.Lock()
		l.metaFirst = 0
		l.mu.Unlock()
	}

	seg, fresh := active, active == nil || active.size+int64(len(buf)) > l.opts.SegmentSize
	if fresh {
		path := filepath.Join(l.dir, segName(logs[0].Index))
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("%s: %w", where(), err)
		}
		seg = &segment{base: logs[0].Index, path: path, f: f}
	}
	if seg.size+int64(len(buf)) > math.MaxUint32 {
		if fresh {
			discard(seg)
		}
		return fmt.Errorf("%s: %s would pass 4 GiB", where(), seg.path)
	}
	if _, err := seg.f.WriteAt(buf, seg.size); err != nil {
		// Nothing was acknowledged; cut the partial write so the next batch starts clean.
		if fresh {
			discard(seg)
		} else if terr := seg.f.Truncate(seg.size); terr != nil {
			l.broken = fmt.Errorf("%w: %s: write failed (%v) and undoing it failed (%v)", ErrBroken, seg.path, err, terr)
		}
		return fmt.Errorf("%s to %s: %w", where(), seg.path, err)
	}
	err := l.stats.sync(seg.f, l.opts.SyncLevel)
	if err == nil && fresh {
		err = l.stats.syncDir(l.dir, l.opts.SyncLevel)
	}
	if err != nil {
		if fresh {
			seg.f.Close()
		}
		l.broken = fmt.Errorf("%w: %v", ErrBroken, err)
		return fmt.Errorf("%s: %w", where(), l.broken)
	}

	l.mu.Lock()
	base := uint32(seg.size)
	for _, r := range rel {
		seg.offsets = append(seg.offsets, base+r)
	}
	seg.size += int64(len(buf))
	if fresh {
		l.segs = append(l.segs, seg)
	}
	l.mu.Unlock()
	l.stats.bytes.Add(int64(len(buf)))
	l.stats.entries.Add(int64(len(logs)))
	l.stats.batches.Add(1)
	return nil
}

// discard drops a segment StoreLogs just created and could not use.
func discard(s *segment) {
	s.f.Close()
	os.Remove(s.path)
}

// DeleteRange implements raft.LogStore for the two shapes raft uses: a prefix (compaction
// after a snapshot) and a suffix (dropping a follower's conflicting entries). Covering the whole
// log empties it. A range strictly inside the log would leave a gap and is refused.
func (l *Log) DeleteRange(lo, hi uint64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.broken != nil {
		return l.broken
	}
	l.mu.RLock()
	closed, empty := l.closed, len(l.segs) == 0
	first, last := l.boundsLocked()
	l.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	if empty || lo > hi || hi < first || lo > last {
		return nil
	}
	lo, hi = max(lo, first), min(hi, last)
	var err error
	switch {
	case lo == first && hi == last:
		err = l.deletePrefix(last + 1)
	case lo == first:
		err = l.deletePrefix(hi + 1)
	case hi == last:
		err = l.deleteSuffix(lo)
	default:
		return fmt.Errorf("delete log range %d..%d: would leave a gap inside %d..%d; only a prefix or a suffix can go", lo, hi, first, last)
	}
	if err != nil {
		return fmt.Errorf("delete log range %d..%d of %d..%d: %w", lo, hi, first, last, err)
	}
	return nil
}

// deletePrefix makes newFirst the first index: the meta file is made durable first, then the
// segments wholly below it are unlinked (open finishes the job if a crash comes between).
// newFirst past the last index empties the log.
func (l *Log) deletePrefix(newFirst uint64) error {
	if err := writeFileAtomic(l.dir, metaName, encodeMeta(newFirst), l.opts.SyncLevel, &l.stats); err != nil {
		return err
	}
	l.mu.Lock()
	l.metaFirst = newFirst
	var gone []*segment
	for len(l.segs) > 0 && l.segs[0].last() < newFirst {
		gone = append(gone, l.segs[0])
		l.segs = l.segs[1:]
	}
	l.mu.Unlock()
	return l.unlink(gone)
}

// deleteSuffix drops lo..last: later segments are unlinked newest first, then the segment
// holding lo is cut at lo's offset. A crash in between leaves stale entries at the end, never a
// gap; raft never acknowledged the deletion, so it just resolves the conflict again.
func (l *Log) deleteSuffix(lo uint64) error {
	l.mu.Lock()
	k := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > lo }) - 1
	gone := append([]*segment(nil), l.segs[k+1:]...)
	s := l.segs[k]
	cut := int64(-1)
	if lo == s.base {
		gone = append([]*segment{s}, gone...)
		l.segs = l.segs[:k]
	} else {
		cut = int64(s.offsets[lo-s.base])
		s.offsets = s.offsets[:lo-s.base]
		s.size = cut
		l.segs = l.segs[:k+1]
	}
	l.mu.Unlock()
	for i, j := 0, len(gone)-1; i < j; i, j = i+1, j-1 {
		gone[i], gone[j] = gone[j], gone[i]
	}
	if err := l.unlink(gone); err != nil {
		l.broken = fmt.Errorf("%w: %v", ErrBroken, err)
		return l.broken
	}
	if cut < 0 {
		return nil
	}
	err := s.f.Truncate(cut)
	if err == nil {
		err = l.stats.sync(s.f, l.opts.SyncLevel)
	}
	if err != nil {
		// Stale records past the cut would make the next append ambiguous on reopen.
		l.broken = fmt.Errorf("%w: cut %s at offset %d: %v", ErrBroken, s.path, cut, err)
		return l.broken
	}
	return nil
}

// unlink closes and removes segments already detached from l.segs (no reader can reach them),
// in the order given, then syncs the directory.
func (l *Log) unlink(segs []*segment) error {
	if len(segs) == 0 {
		return nil
	}
	for _, s := range segs {
		s.f.Close()
		if err := os.Remove(s.path); err != nil {
			return err
		}
	}
	l.log.Debug("removed segments", "count", len(segs), "first_file", segs[0].path)
	return l.stats.syncDir(l.dir, l.opts.SyncLevel)
}

// Stats returns cumulative counters since open.
func (l *Log) Stats() Stats {
	l.mu.RLock()
	n := len(l.segs)
	l.mu.RUnlock()
	return Stats{
		Syncs:     l.stats.syncs.Load(),
		SyncNanos: l.stats.syncNanos.Load(),
		Bytes:     l.stats.bytes.Load(),
		Entries:   l.stats.entries.Load(),
		Batches:   l.stats.batches.Load(),
		Segments:  n,
		TornBytes: l.stats.tornBytes.Load(),
		Reads:     l.stats.reads.Load(),
	}
}

// Close releases the files and the directory lock. Everything acknowledged is already synced
// at the level, so Close itself does not sync.
func (l *Log) Close() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	return l.closeFilesLocked()
}

func (l *Log) closeFilesLocked() error {
	var errs []error
	for _, s := range l.segs {
		if s.f != nil {
			errs = append(errs, s.f.Close())
		}
	}
	l.segs = nil
	if l.lock != nil {
		errs = append(errs, l.lock.Close())
		l.lock = nil
	}
	return errors.Join(errs...)
}
