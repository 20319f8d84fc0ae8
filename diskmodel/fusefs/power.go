package fusefs

import (
	"context"
	"errors"
	"fmt"
	"github.com/hanwen/go-fuse/v2/fuse"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/rig-dev/rig/diskmodel"
)

// A power loss, as LazyFS models it for Jepsen: every write a file had since its last fsync
// (or fdatasync) is discarded, as if it had lived only in a page cache that lost power. The
// model keeps, for each file changed since its last sync, its size at that sync and the synced
// bytes each later change overwrote (an undo log: appends cost nothing, an overwrite or a
// truncation below the synced size keeps the bytes it replaced); DropUnsynced writes them back
// and cuts the file to its synced size. Names are not modelled: a file created, renamed or
// unlinked since the last directory sync keeps its new name (with its synced content, empty if
// it never was synced); only contents revert.

// extent is a run of synced bytes a change overwrote.
type extent struct {
	off  int64
	data []byte
}

// Dropped is what a power loss discarded.
type Dropped = diskmodel.Dropped

// backing is the file's path in the backing folder.
func (n *node) backing() string {
	return filepath.Join(n.RootData.Path, n.Path(n.Root()))
}

// track is called before a change of [off, end) (end < 0: to the end of the file, a
// truncation) made through fd (-1: by path): on the first change since the last sync it
// records the file's synced size, and it keeps the synced bytes the change will overwrite.
// The caller holds n.m.power (RLock) across track and the change.
func (n *node) track(fd int, off, end int64) syscall.Errno {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.changes++
	if !n.dirty {
		// Through the writer's fd when there is one (no path walk, and right for a file
		// renamed or unlinked since it was opened), else by path.
		var st syscall.Stat_t
		var err error
		if fd >= 0 {
			err = syscall.Fstat(fd, &st)
		} else {
			err = syscall.Lstat(n.backing(), &st)
		}
		if err != nil {
			return fs.ToErrno(err)
		}
		n.dirty, n.syncedSize, n.undo = true, st.Size, nil
		n.m.mu.Lock()
		n.m.dirty[n] = struct{}{}
		n.m.mu.Unlock()
	}
	if end < 0 || end > n.syncedSize {
		end = n.syncedSize
	}
	if off >= end {
		return 0 // beyond what was synced: cutting the file back drops it
	}
	buf := make([]byte, end-off)
	k, err := n.readSynced(fd, buf, off)
	if err != nil {
		return fs.ToErrno(err)
	}
	// Short when an earlier change cut the file: its own extent holds the rest.
	if k > 0 {
		n.undo = append(n.undo, extent{off: off, data: buf[:k]})
	}
	return 0
}

// readSynced reads the bytes about to be overwritten: by path (the writer's fd may be
// write-only), else through fd.
func (n *node) readSynced(fd int, buf []byte, off int64) (int, error) {
	f, err := os.Open(n.backing())
	if err != nil {
		if fd < 0 {
			return 0, err
		}
		k, rerr := syscall.Pread(fd, buf, off)
		if rerr != nil {
			return 0, fmt.Errorf("keep synced bytes of a file unlinked since: %w", rerr)
		}
		return k, nil
	}
	defer f.Close()
	k, err := f.ReadAt(buf, off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return k, err
}

// syncMark is where the file stands as an fsync begins (n.mu held): the sync covers the
// changes made so far, and the file's size now is what it makes durable.
type syncMark struct {
	changes uint64
	undo    int
	size    int64
}

func (n *node) syncMark(lf *fs.LoopbackFile) syncMark {
	mk := syncMark{changes: n.changes, undo: len(n.undo), size: -1}
	if lf == nil { // the caps' tests, which have no file
		return mk
	}
	if fd, ok := lf.PassthroughFd(); ok && n.dirty {
		var st syscall.Stat_t
		if syscall.Fstat(fd, &st) == nil {
			mk.size = st.Size
		}
	}
	return mk
}

// syncDone records a successful fsync begun at mk: the file is clean, unless it changed while
// the sync ran, when only the later changes stay revertible, back to its size at mk.
func (n *node) syncDone(mk syncMark) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.dirty {
		return
	}
	if n.changes == mk.changes || mk.size < 0 {
		if n.changes != mk.changes {
			return // no size at the mark: keep every change revertible (errs towards loss)
		}
		n.dirty, n.undo = false, nil
		n.m.mu.Lock()
		delete(n.m.dirty, n)
		n.m.mu.Unlock()
		return
	}
	n.syncedSize, n.undo = mk.size, append([]extent(nil), n.undo[mk.undo:]...)
}

// DropUnsynced is a power loss: every file of the model reverts to its content at its last
// fsync. Whatever writes through the model must be stopped first (the node killed): a write
// racing the revert would land on either side of it.
func (d *Disk) DropUnsynced() (Dropped, error) {
	m := d.m
	if m.passthrough {
		return Dropped{}, fmt.Errorf("disk model %s: power loss: %w", d.opts.Mountpoint, ErrPassthrough)
	}
	m.power.Lock() // wait out changes in flight (a killed writer's last requests)
	defer m.power.Unlock()
	m.mu.Lock()
	nodes := m.dirty
	m.dirty = map[*node]struct{}{}
	m.mu.Unlock()
	var out Dropped
	var errs []error
	for n := range nodes {
		gone, bytes, err := n.revert()
		switch {
		case err != nil:
			errs = append(errs, err)
		case gone:
			out.Gone++
		default:
			out.Files++
			out.Bytes += bytes
		}
	}
	d.opts.Logger.Info("disk model lost power", "mountpoint", d.opts.Mountpoint, "files", out.Files, "bytes", out.Bytes, "gone", out.Gone)
	if len(errs) > 0 {
		return out, fmt.Errorf("disk model %s: power loss: %w", d.opts.Mountpoint, errors.Join(errs...))
	}
	return out, nil
}

// revert writes back the synced bytes, newest change first so the oldest (the synced ones)
// land last, cuts the file to its synced size and drops the kernel's cached pages of it.
func (n *node) revert() (gone bool, dropped int64, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.dirty {
		return false, 0, nil
	}
	p := n.backing()
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		n.dirty, n.undo = false, nil
		return true, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("revert %s: %w", p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, 0, fmt.Errorf("revert %s: %w", p, err)
	}
	if fi.Size() > n.syncedSize {
		dropped = fi.Size() - n.syncedSize
	}
	for i := len(n.undo) - 1; i >= 0; i-- {
		e := n.undo[i]
		if _, err := f.WriteAt(e.data, e.off); err != nil {
			return false, dropped, fmt.Errorf("revert %s at %d: %w", p, e.off, err)
		}
		dropped += int64(len(e.data))
	}
	if err := f.Truncate(n.syncedSize); err != nil {
		return false, dropped, fmt.Errorf("revert %s to %d bytes: %w", p, n.syncedSize, err)
	}
	// The revert itself is durable: the power came back with this content.
	if err := f.Sync(); err != nil {
		return false, dropped, fmt.Errorf("revert %s: sync: %w", p, err)
	}
	n.dirty, n.undo = false, nil
	n.NotifyContent(0, 0) // drop the kernel's cached pages and size of it (an open does too: no keep_cache)
	return false, dropped, nil
}

// Setattr keeps the synced bytes a truncation cuts off before it does.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok && !n.m.passthrough {
		n.m.power.RLock()
		defer n.m.power.RUnlock()
		fd := -1
		if fh, ok := f.(*file); ok {
			if d, ok := fh.lf.PassthroughFd(); ok {
				fd = d
			}
		}
		if errno := n.track(fd, int64(sz), -1); errno != 0 {
			return errno
		}
	}
	switch fh := f.(type) { // the loopback's Setattr takes its own file handle
	case *file:
		f = fh.lf
	case *ptFile:
		f = fh.lf
	}
	if sz, ok := in.GetSize(); ok && n.m.passthrough {
		defer n.cut(int64(sz))
	}
	return n.LoopbackNode.Setattr(ctx, f, in, out)
}
