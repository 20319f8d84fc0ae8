package replica

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/engine/book"
	"github.com/rig-dev/rig/engine/replica/store"
	"github.com/rig-dev/rig/engine/snapshot"
	"github.com/rig-dev/rig/engine/wire"
)

// typeSnapshotMarker is the first byte of the replicated SNAPSHOT entry. It is outside the
// client protocol's types, so no client frame can be mistaken for it.
const typeSnapshotMarker byte = 0x80

// Result is what Apply returns through raft's ApplyFuture.
type Result struct {
	Resp     wire.Response
	Snapshot *engine.Snapshot // set for a snapshot marker: this node's take
}

// fsm applies the replicated log to the book on raft's single FSM goroutine. A snapshot marker
// is taken inside Apply, so every node snapshots the same state at the same index and the book
// applies nothing while it is written: the take stops the book exactly as in an Aeron service.
type fsm struct {
	mu   sync.Mutex // held while applying; readers of the book (state hash) take it
	book *book.Book
	log  *slog.Logger

	snapDir       string
	syncLevel     store.SyncLevel
	blockSize     int
	encodeThreads int
	// check stops the node on a fatal storage error; refused says whether it has stopped
	// (fatal.go).
	check   func(error) error
	refused func() error

	applied   atomic.Uint64 // the FSM's own last applied index (commands and markers)
	orders    atomic.Int64  // resting orders after the last apply, readable without the lock
	busy      atomic.Bool   // inside Apply
	restoring atomic.Bool
	lastSnap  atomic.Pointer[engine.Snapshot]
	phases    *phaseLog // nil: not recorded

	req wire.Request // scratch, only touched on the FSM goroutine

	// held: the single orders applied since the restored snapshot (at index knownFrom, 0 for
	// none), for GET /orders; under mu.
	held      idRanges
	knownFrom uint64
}

func (f *fsm) Apply(l *raft.Log) any {
	f.busy.Store(true)
	defer f.busy.Store(false)
	if l.Index <= f.applied.Load() {
		// Already in the snapshot this node restored from: replay skips it.
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer func() {
		f.orders.Store(int64(f.book.Orders()))
		f.applied.Store(l.Index)
	}()
	if len(l.Data) > 0 && l.Data[0] == typeSnapshotMarker {
		s, err := f.take(l.Index, l.Term)
		if err != nil {
			// A node that cannot persist its snapshot must not pretend it did. On a fatal storage
			// error (a full disk) it stops (fatal.go), answering the snapshot request with the
			// cause first; otherwise it keeps serving from its log, and the error is visible in
			// its log and in /status (no new snapshot).
			f.log.Error("snapshot failed", "index", l.Index, "err", err)
			f.check(err)
			return &Result{Resp: wire.Response{Status: wire.StatusError, Index: l.Index, Text: err.Error()}}
		}
		return &Result{Resp: wire.Response{Status: wire.StatusOK, Index: l.Index}, Snapshot: s}
	}
	return &Result{Resp: f.applyCommand(l.Index, l.Data)}
}

func (f *fsm) applyCommand(index uint64, data []byte) wire.Response {
	r := &f.req
	resp := wire.Response{Index: index}
	if err := wire.DecodeRequest(data, r); err != nil {
		resp.Status, resp.Text = wire.StatusRejected, err.Error()
		return resp
	}
	resp.Type, resp.Corr = r.Type, r.Corr
	switch r.Type {
	case wire.TypeOrder:
		res, err := f.book.Submit(toBook(r.Order), nil)
		if err != nil {
			resp.Status, resp.Text = wire.StatusRejected, err.Error()
			return resp
		}
		resp.Filled, resp.Rested = res.Filled, res.Rested
		f.held.add(r.Order.ID)
	case wire.TypeCancel:
		if err := f.book.Cancel(r.Cancel); err != nil {
			resp.Status, resp.Text = wire.StatusRejected, err.Error()
		}
	case wire.TypeBatch:
		var rejected int
		for _, o := range r.Batch {
			res, err := f.book.Submit(toBook(o), nil)
			if err != nil {
				rejected++
				continue
			}
			resp.Filled += res.Filled
			resp.Rested += res.Rested
		}
		if rejected > 0 {
			resp.Status, resp.Text = wire.StatusRejected, fmt.Sprintf("%d of %d orders rejected", rejected, len(r.Batch))
		}
	}
	return resp
}

func toBook(o wire.Order) book.Order {
	return book.Order{ID: o.ID, Instrument: o.Instrument, Side: book.Side(o.Side), Price: o.Price, Qty: o.Qty, TIF: book.TIF(o.TIF), Market: o.Market}
}

// take writes the book to snapshots/snap-<index>.bin through the block writer, syncing after
// every block at sync level > 0, then makes the file durable and visible (rename + dir sync).
func (f *fsm) take(index, term uint64) (*engine.Snapshot, error) {
	if err := f.refused(); err != nil {
		return nil, fmt.Errorf("snapshot at index %d: %w", index, err)
	}
	start := time.Now()
	st, err := WriteSnapshotFile(f.snapDir, f.book, snapshot.Meta{LogIndex: index, Term: term},
		SnapshotWrite{SyncLevel: f.syncLevel, BlockSize: f.blockSize, Threads: f.encodeThreads})
	if err != nil {
		return nil, err
	}
	encode, persisted := st.Encode, st.Persisted
	f.prune(index)
	// All of it ran on the FSM goroutine, so the book stood still for the whole take.
	end := time.Now()
	f.phases.add(engine.WorkSnapshotCapture, engine.BlocksApply, start, start.Add(encode),
		fmt.Sprintf("snapshot at index %d: %d orders encoded into %d bytes, %d sync(s), on the apply goroutine", index, st.Orders, st.Bytes, st.Syncs))
	f.phases.add(engine.WorkSnapshotPersist, engine.BlocksApply, start.Add(encode), end,
		fmt.Sprintf("snapshot at index %d: file synced, renamed into place, folder synced, older snapshots removed, on the apply goroutine", index))
	s := &engine.Snapshot{
		Index: index, Term: term, Bytes: st.Bytes, Orders: &st.Orders, Syncs: &st.Syncs,
		EncodeMs: ms(encode), PersistedMs: ms(persisted), TakeMs: ms(end.Sub(start)),
	}
	f.lastSnap.Store(s)
	f.log.Info("snapshot taken", "index", index, "orders", st.Orders, "bytes", st.Bytes, "take_ms", s.TakeMs, "encode_ms", s.EncodeMs, "persisted_ms", s.PersistedMs, "syncs", st.Syncs)
	return s, nil
}

// SnapshotsKept is how many snapshot files a node keeps: the newest to restore from, and one
// in case it is damaged. While a take writes the next, one more is on disk.
const SnapshotsKept = 2

// prune keeps the newest SnapshotsKept snapshot files.
func (f *fsm) prune(newest uint64) {
	files, _ := snapshotFiles(f.snapDir)
	for i := 0; i+SnapshotsKept < len(files); i++ {
		os.Remove(files[i].path)
	}
}

type snapFile struct {
	index uint64
	path  string
}

// snapshotFiles lists published snapshots, oldest first.
func snapshotFiles(dir string) ([]snapFile, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []snapFile
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "snap-") || !strings.HasSuffix(name, ".bin") {
			continue
		}
		idx, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, "snap-"), ".bin"), 10, 64)
		if err != nil {
			continue
		}
		out = append(out, snapFile{idx, filepath.Join(dir, name)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].index < out[j].index })
	return out, nil
}

// ErrCorruptSnapshot classifies a snapshot that fails strict restore: the node refuses to start
// rather than serve a partial book.
var ErrCorruptSnapshot = errors.New("corrupt snapshot")

// restore loads the newest snapshot, if any. Restore is strict: the newest file must decode
// completely, or the node refuses to start (an operator decides, the engine does not guess).
func (f *fsm) restore() error {
	files, err := snapshotFiles(f.snapDir)
	if err != nil || len(files) == 0 {
		return err
	}
	f.restoring.Store(true)
	defer f.restoring.Store(false)
	newest := files[len(files)-1]
	start := time.Now()
	file, err := os.Open(newest.path)
	if err != nil {
		return fmt.Errorf("open snapshot: %w", err)
	}
	defer file.Close()
	b, meta, err := snapshot.Read(bufio.NewReaderSize(file, 1<<20))
	if errors.Is(err, snapshot.ErrCorrupt) {
		return fmt.Errorf("%w: %s: %v", ErrCorruptSnapshot, newest.path, err)
	}
	if err != nil {
		return fmt.Errorf("read snapshot %s: %w", newest.path, err) // I/O, not the file's content
	}
	if meta.LogIndex != newest.index {
		return fmt.Errorf("%w: %s holds log index %d, its name says %d", ErrCorruptSnapshot, newest.path, meta.LogIndex, newest.index)
	}
	var size int64
	if fi, err := file.Stat(); err == nil {
		size = fi.Size()
	}
	if _, err := io.Copy(io.Discard, file); err != nil {
		return err
	}
	f.mu.Lock()
	f.book = b
	f.held, f.knownFrom = idRanges{}, meta.LogIndex
	f.mu.Unlock()
	f.applied.Store(meta.LogIndex)
	f.orders.Store(int64(b.Orders()))
	d := time.Since(start)
	f.phases.add(engine.WorkRestore, engine.BlocksReady, start, start.Add(d),
		fmt.Sprintf("snapshot at index %d: %d orders, %d bytes read", meta.LogIndex, b.Orders(), size))
	f.lastSnap.Store(&engine.Snapshot{Index: meta.LogIndex, Term: meta.Term, Bytes: size, Orders: new(int64(b.Orders())), Restored: true, RestoreMs: ms(d)})
	f.log.Info("snapshot restored", "index", meta.LogIndex, "orders", b.Orders(), "restore_ms", ms(d))
	return nil
}

// Snapshot is raft's own snapshot hook. Raft's automatic snapshots are disabled: the engine
// snapshots at replicated markers instead, at one index on every node.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return nil, errors.New("raft snapshots are disabled: the engine snapshots at replicated markers (POST /snapshot)")
}

// Restore is raft's InstallSnapshot path, which cannot happen since no raft snapshot exists.
func (f *fsm) Restore(io.ReadCloser) error {
	return errors.New("raft snapshot install is not supported: the engine's log is never compacted behind a follower")
}

// stateHash reads the book's hash and the index it corresponds to, consistently.
func (f *fsm) stateHash() (uint64, uint64, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.book.StateHash(), f.applied.Load(), f.book.Orders()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
