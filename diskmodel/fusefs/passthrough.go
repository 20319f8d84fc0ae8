package fusefs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/rig-dev/rig/diskmodel"
)

// Passthrough (Options.Passthrough): every open of a file is answered with the backing file's
// descriptor (FOPEN_PASSTHROUGH), and the kernel reads and writes it itself. A write costs what
// it costs on the bare folder, with no request into the model and no copy through it. What the
// model then cannot do, it refuses rather than pretends:
//
//   - The throughput and IOPS caps book each write's bytes and operations as it is made, and
//     sync_per_mib charges an fsync for the bytes it flushes: none of them is seen, so Mount
//     refuses passthrough with any of them.
//   - A power loss reverts what was written since each file's last sync from an undo log kept
//     as each write is made; with passthrough a write overwriting synced bytes would be lost to
//     it, so DropUnsynced refuses (ErrPassthrough) and changes nothing.
//   - sync_latency holds: every fsync still reaches the model, which runs the real one and
//     holds the caller for the latency, as without passthrough.
//   - Sync.Bytes (OnSync) is the file's growth since its previous sync, since the writes
//     themselves are not seen: exact for a file written by appending, short by what rewrote
//     bytes already there. Stats count only the reads and writes that reached the model (none,
//     unless the kernel refused a backing file).
//
// Every open of an inode is passthrough, or none: the kernel refuses a cached open of an inode
// another handle has in passthrough (EINVAL), and a passthrough open of one in cached use
// (ETXTBSY), so the whole mount is one mode or the other.

// ErrPassthrough is a power loss asked of a model mounted with passthrough.
var ErrPassthrough = errors.New("the model was mounted with passthrough, so it never saw the writes a power loss would revert; mount it without passthrough to model power losses")

// ErrNoPassthrough is passthrough asked of a kernel whose FUSE does not offer it.
var ErrNoPassthrough = errors.New("passthrough asked, but this kernel's FUSE does not offer it")

// passthroughRefuses names the caps of l that passthrough could not hold.
func passthroughRefuses(l diskmodel.Limits) error {
	caps := l.PassthroughCaps()
	if len(caps) == 0 {
		return nil
	}
	return fmt.Errorf("%w: passthrough with %s: the kernel makes the writes without the model seeing them, so it could not hold them to that cap; mount without passthrough, or keep only sync_latency",
		diskmodel.ErrLimits, strings.Join(caps, ", "))
}

// ptFile is a file whose reads and writes the kernel does on the backing file: go-fuse
// registers PassthroughFd as the inode's backing file on open. Fsyncs and the rest still come
// to the model, as file's.
type ptFile struct{ file }

var _ fs.FilePassthroughFder = (*ptFile)(nil)

func (f *ptFile) PassthroughFd() (int, bool) { return f.lf.PassthroughFd() }

// Fsync counts what the file grew by since its last sync as the bytes this one flushes, then
// syncs and holds as file.Fsync does.
func (f *ptFile) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	f.n.grown(f.lf)
	return f.file.Fsync(ctx, flags)
}

// openPassthrough wraps what the loopback opened (or created) as a ptFile, first noting the
// file's size, from which its growth counts (again from its size now if an O_TRUNC cut it).
func (n *node) openPassthrough(fh fs.FileHandle, ff uint32, errno syscall.Errno) (fs.FileHandle, uint32, syscall.Errno) {
	if errno != 0 {
		return nil, 0, errno
	}
	lf, ok := fh.(*fs.LoopbackFile)
	if !ok {
		return fh, ff, 0
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if fd, ok := lf.PassthroughFd(); ok {
		var st syscall.Stat_t
		if syscall.Fstat(fd, &st) == nil && (!n.ptKnown || st.Size < n.ptSize) {
			n.ptSize, n.ptKnown = st.Size, true
		}
	}
	return &ptFile{file{lf: lf, n: n}}, ff, 0
}

// grown adds the file's growth since its size was last noted to what its next fsync flushes.
func (n *node) grown(lf *fs.LoopbackFile) {
	fd, ok := lf.PassthroughFd()
	if !ok {
		return
	}
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ptKnown && st.Size > n.ptSize {
		n.unsynced += st.Size - n.ptSize
	}
	n.ptSize, n.ptKnown = st.Size, true
}

// cut notes a truncation to size: the file's growth counts from there.
func (n *node) cut(size int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ptKnown && size < n.ptSize {
		n.ptSize = size
	}
}

// notPassed is a read or write that reached a passthrough model: go-fuse could not register
// the backing file (it then stops trying for the mount), so the mount is slower than asked.
func (m *model) notPassed() {
	if m.unpassed != nil {
		m.unpassedOne.Do(m.unpassed)
	}
}

// stackDepth is the mount's stacking depth. With passthrough the kernel refuses a backing file
// on a filesystem stacked as deep as it: 2, the kernel's most, lets the backing folder be on an
// overlayfs (a container's /tmp) and lets nothing stack on the model in turn.
func stackDepth(passthrough bool) int {
	if passthrough {
		return 2
	}
	return 1 // go-fuse's default
}
