// Package fusefs mounts a disk model (diskmodel.Limits): a FUSE pass-through filesystem
// (go-fuse's loopback) over a real folder. Writes pass at once; an fsync is held until the bytes
// it flushes have got through the throughput and IOPS caps and the sync cost has passed.
package fusefs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/rig-dev/rig/diskmodel"
	"golang.org/x/sys/unix"
)

// Options say where a model is mounted and what it imposes.
type Options struct {
	Backing    string // the real folder every operation passes through to (must exist)
	Mountpoint string // the folder the model is mounted on (created if missing)
	Limits     diskmodel.Limits
	Logger     *slog.Logger
	// Clock is the model's time (nil: the wall clock). The tests of the caps' arithmetic
	// pass a fake one.
	Clock Clock
	// Owner names the mount's holder in its lock file (reclaim.go), e.g. "run <id>": a second
	// model on the same mountpoint is refused naming it, and a dead holder's mount is detached
	// naming it.
	Owner string
	// OnSync, when set, is told of every fsync the model completed (after its hold), on the
	// FUSE request's goroutine, so it must be quick: the run records them per file
	// (rundir.DiskSyncsFile) to count the forces in each window of a run.
	OnSync func(Sync)
	// Passthrough hands every open file's reads and writes to the kernel, which does them on
	// the backing file without the model seeing them (FUSE passthrough, passthrough.go): a
	// write costs what it costs on the bare folder. The model still sees opens, fsyncs (and
	// holds them for SyncLatency) and every change of names or sizes. Mount refuses it with a
	// cap that needs each write's bytes (throughput, iops, sync_per_mib), and DropUnsynced
	// refuses to run on it (ErrPassthrough).
	Passthrough bool
}

// Sync is one completed fsync of a file in the model.
type Sync struct {
	Start time.Time     // the fsync began
	File  string        // path relative to the mountpoint
	Bytes int64         // bytes written since the file's previous fsync: what this one flushed
	Dur   time.Duration // begin to return, the model's hold included
}

// ErrDetached is a Close that found the mount busy and detached it lazily (MNT_DETACH): it is
// gone from the namespace, and the kernel lets it go once its last open file closes.
var ErrDetached = errors.New("disk model was busy: detached lazily")

// Disk is a mounted model.
type Disk struct {
	opts    Options
	srv     *fuse.Server
	m       *model
	once    sync.Once
	err     error
	closed  chan struct{}
	closing atomic.Bool
	lock    *os.File   // the mountpoint's lock (reclaim.go), held until unmounted
	left    []Leftover // dead models' mounts detached from the mountpoint first
	mountID int        // the mount's id in /proc/self/mountinfo
	lost    chan struct{}
	lostErr error // why, once lost is closed
}

// healthEvery is how often a model checks that its mount is still what its mountpoint shows.
const healthEvery = time.Second

// maxWrite is the largest FUSE write request asked for (the kernel's own ceiling is 1 MiB
// with max_pages): smaller requests would split a 1 MiB application write into eight.
const maxWrite = 1 << 20

// Mount mounts a model of o.Limits on o.Mountpoint over o.Backing, directly with mount(2)
// (root; no fusermount), and unmounts it when ctx ends or Close is called. It first takes the
// mountpoint's lock: one a live model holds is refused (ErrBusy) naming its holder, and the
// mounts of dead models found on the mountpoint are detached (Reclaimed names them).
func Mount(ctx context.Context, o Options) (*Disk, error) {
	if err := o.Limits.Validate(); err != nil {
		return nil, err
	}
	if o.Passthrough {
		if err := passthroughRefuses(o.Limits); err != nil {
			return nil, err
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	var err error
	if o.Backing, err = filepath.Abs(o.Backing); err != nil {
		return nil, err
	}
	if o.Mountpoint, err = filepath.Abs(o.Mountpoint); err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(o.Backing, &st); err != nil {
		return nil, fmt.Errorf("disk model: backing folder: %w", err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil, fmt.Errorf("disk model: backing %s is not a folder", o.Backing)
	}
	if err := ensureFuseDevice(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(o.Mountpoint), 0o755); err != nil {
		return nil, fmt.Errorf("disk model: mountpoint: %w", err)
	}
	lock, prev, err := lockMountpoint(o.Mountpoint, true)
	if err != nil {
		return nil, fmt.Errorf("disk model: mountpoint %w", err)
	}
	mounted := false
	defer func() {
		if !mounted {
			lock.Close()
		}
	}()
	var left []Leftover
	if n, err := detachModels(o.Mountpoint); err != nil {
		return nil, fmt.Errorf("disk model: %w", err)
	} else if n > 0 {
		left = append(left, Leftover{Mountpoint: o.Mountpoint, LeftBy: prev})
		o.Logger.Warn("detached a dead disk model's mount", "mountpoint", o.Mountpoint, "left_by", prev.String())
	}
	if err := os.MkdirAll(o.Mountpoint, 0o755); err != nil {
		return nil, fmt.Errorf("disk model: mountpoint: %w", err)
	}

	m := newModel(o.Limits, o.Clock)
	m.onSync = o.OnSync
	m.passthrough = o.Passthrough
	m.unpassed = func() {
		o.Logger.Warn("disk model: the kernel refused a backing file, so reads and writes go through the model after all (slower, nothing else changes)", "mountpoint", o.Mountpoint)
	}
	root := &fs.LoopbackRoot{Path: o.Backing, Dev: uint64(st.Dev)}
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, m: m}
	}
	root.RootNode = root.NewNode(root, nil, "", &st)
	sec := time.Second
	srv, err := fs.Mount(o.Mountpoint, root.RootNode, &fs.Options{
		EntryTimeout: &sec, AttrTimeout: &sec,
		MountOptions: fuse.MountOptions{
			DirectMountStrict: true,
			FsName:            o.Backing,
			Name:              fsName,
			MaxWrite:          maxWrite,
			// Only the mounting user (root) may enter: the loopback acts with the server's
			// own rights, so other users would bypass the backing folder's permissions.
			AllowOther:    false,
			MaxStackDepth: stackDepth(o.Passthrough),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("disk model: mount %s on %s: %w", o.Backing, o.Mountpoint, err)
	}
	d := &Disk{opts: o, srv: srv, m: m, closed: make(chan struct{}), lock: lock, left: left, lost: make(chan struct{})}
	if err := writeHolder(lock, o.Owner); err != nil {
		d.Close()
		return nil, fmt.Errorf("disk model: record the holder in %s: %w", LockPath(o.Mountpoint), err)
	}
	if all, err := mountinfo(); err == nil {
		if on := mountsOn(all, o.Mountpoint); len(on) > 0 && on[len(on)-1].fstype == FsType {
			d.mountID = on[len(on)-1].id
		}
	}
	if d.mountID == 0 {
		d.Close()
		return nil, fmt.Errorf("disk model: mounted on %s but not found there in /proc/self/mountinfo", o.Mountpoint)
	}
	if o.Passthrough && srv.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH == 0 {
		d.Close()
		return nil, fmt.Errorf("disk model: %w (Linux 6.9 or later, CONFIG_FUSE_PASSTHROUGH): mount without passthrough", ErrNoPassthrough)
	}
	mounted = true
	go d.watch()
	go func() {
		select {
		case <-ctx.Done():
			if err := d.Close(); err != nil {
				o.Logger.Warn("disk model unmount", "mountpoint", o.Mountpoint, "err", err)
			}
		case <-d.closed:
		}
	}()
	o.Logger.Info("disk model mounted", "mountpoint", o.Mountpoint, "backing", o.Backing, "limits", o.Limits.String())
	return d, nil
}

// Dir is the mountpoint.
func (d *Disk) Dir() string { return d.opts.Mountpoint }

// Limits are what the model imposes.
func (d *Disk) Limits() diskmodel.Limits { return d.opts.Limits }

// Stats are the model's counters since it was mounted.
func (d *Disk) Stats() Stats { return d.m.c.stats() }

// Reclaimed are the dead models' mounts Mount detached from the mountpoint before mounting.
func (d *Disk) Reclaimed() []Leftover { return d.left }

// Lost is closed when the model stopped serving its mountpoint before Close (ErrLost, Err says
// how): unmounted or detached by someone else, its connection aborted, or covered by another
// mount. What is written there from then on does not go through the model.
func (d *Disk) Lost() <-chan struct{} { return d.lost }

// Err is why the model was lost (wrapping ErrLost), nil while it was not.
func (d *Disk) Err() error {
	select {
	case <-d.lost:
		return d.lostErr
	default:
		return nil
	}
}

// watch notices the model being lost: its FUSE server ending (the mount was unmounted, or its
// connection aborted) or its mount no longer on top of the mountpoint (detached, covered).
func (d *Disk) watch() {
	served := make(chan struct{})
	go func() { d.srv.Wait(); close(served) }()
	tick := time.NewTicker(healthEvery)
	defer tick.Stop()
	for {
		var why string
		select {
		case <-d.closed:
			return
		case <-served:
			why = "its FUSE server stopped: the mount was unmounted by someone else or its connection aborted"
		case <-tick.C:
			_, why = d.checkMount()
		}
		if d.closing.Load() {
			return
		}
		if why != "" {
			d.lostErr = fmt.Errorf("%w: %s: %s", ErrLost, d.opts.Mountpoint, why)
			close(d.lost)
			d.opts.Logger.Error("disk model lost", "mountpoint", d.opts.Mountpoint, "why", why)
			return
		}
	}
}

// checkMount says what is wrong with the model's mount ("" when it is on top of the mountpoint),
// and whether another mount covers it.
func (d *Disk) checkMount() (covered bool, why string) {
	all, err := mountinfo()
	if err != nil {
		return false, "" // cannot tell: the server's own end is still watched
	}
	on := mountsOn(all, d.opts.Mountpoint)
	ours := false
	for _, e := range on {
		ours = ours || e.id == d.mountID
	}
	switch {
	case !ours:
		return false, "its mount is gone from the mountpoint (unmounted or detached by someone else)"
	case on[len(on)-1].id != d.mountID:
		top := on[len(on)-1]
		return true, fmt.Sprintf("another mount (%s from %s) covers it", top.fstype, top.source)
	}
	return false, ""
}

// Close unmounts the model; a mount still in use is detached lazily (ErrDetached), so no mount
// outlives Close either way. It then releases the mountpoint's lock. Safe to call more than
// once.
func (d *Disk) Close() error {
	d.once.Do(func() {
		d.closing.Store(true)
		defer close(d.closed)
		if covered, why := d.checkMount(); d.mountID != 0 && covered {
			// Unmounting the path would take the mount on top, not this one.
			d.err = fmt.Errorf("disk model: %s: %s; left mounted under it", d.opts.Mountpoint, why)
			return
		}
		err := d.srv.Unmount() // retries a few times while the kernel drops the last files
		if err == nil {
			d.lock.Close()
			return
		}
		if derr := unix.Unmount(d.opts.Mountpoint, unix.MNT_DETACH); derr != nil && !errors.Is(derr, unix.EINVAL) {
			// Still mounted: the lock stays held until this process ends.
			d.err = fmt.Errorf("disk model: unmount %s: %v; lazy unmount: %w", d.opts.Mountpoint, err, derr)
			return
		}
		d.lock.Close()
		d.err = fmt.Errorf("%w: %s (%v)", ErrDetached, d.opts.Mountpoint, err)
	})
	return d.err
}

// ensureFuseDevice makes /dev/fuse where a container was started without it (misc device
// 10:229, as the kernel's fuse module registers it).
func ensureFuseDevice() error {
	if _, err := os.Stat("/dev/fuse"); err == nil {
		return nil
	}
	if err := unix.Mknod("/dev/fuse", unix.S_IFCHR|0o666, int(unix.Mkdev(10, 229))); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("disk model: /dev/fuse is missing and could not be made (mknod /dev/fuse c 10 229 as root): %w", err)
	}
	return nil
}

// model is the state the caps share across the mount.
type model struct {
	lim         diskmodel.Limits
	bytes, iops *bucket
	ioSize      int64
	clock       Clock
	c           counters
	onSync      func(Sync)
	passthrough bool   // Options.Passthrough: reads and writes never reach the model
	unpassed    func() // told once that one did all the same
	unpassedOne sync.Once

	mu    sync.Mutex
	dirty map[*node]struct{} // files changed since their last fsync (power.go)
	power sync.RWMutex       // a power loss (Lock) waits for the changes being tracked (RLock)
}

// node is a loopback inode that remembers, for its file, the write run (for I/O counting), how
// many bytes were written since the last fsync, and what its content was at that fsync (dirty,
// syncedSize, undo: power.go).
type node struct {
	fs.LoopbackNode
	m *model

	mu       sync.Mutex
	run      ioRun
	unsynced int64
	lands    time.Time // when the caps let the last of those bytes reach the volume
	changes  uint64    // changes made to the file, for an fsync to tell which it covered

	dirty      bool     // changed since its last fsync (or since the mount)
	syncedSize int64    // its size at that fsync, when dirty
	undo       []extent // the synced bytes its changes since then overwrote, oldest first

	ptSize  int64 // with passthrough: its size when last synced or first opened,
	ptKnown bool  // once known
}

var (
	_ fs.NodeOpener    = (*node)(nil)
	_ fs.NodeCreater   = (*node)(nil)
	_ fs.NodeSetattrer = (*node)(nil)
)

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if n.m.passthrough {
		return n.openPassthrough(n.LoopbackNode.Open(ctx, flags))
	}
	if flags&syscall.O_TRUNC != 0 {
		n.m.power.RLock()
		defer n.m.power.RUnlock()
		if errno := n.track(-1, 0, -1); errno != 0 {
			return nil, 0, errno
		}
	}
	fh, ff, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return wrap(fh, n), ff | directIO(flags), 0
}

// directIO asks the kernel to hand a write-only file's writes straight to the model, past the
// mount's page cache (FOPEN_DIRECT_IO): what it saves is copying every write into page-cache
// pages nobody reads through that handle (docs/disks.md, "What it costs"). Every write still
// reaches the model as one request of up to maxWrite bytes, as the caller made it; a direct
// write drops the cached pages it overlaps, so other handles read it. A write-only file cannot
// be read or mapped (mmap needs read access); a readable one keeps the page cache, since a
// direct read would cross into the model for every read call.
func directIO(flags uint32) uint32 {
	if flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		return fuse.FOPEN_DIRECT_IO
	}
	return 0
}

// The model has no extended attributes (ENOSYS: the kernel stops asking, as from a filesystem
// without them). Else the kernel asks for security.capability before every write to a file
// (to clear it, file_remove_privs), one more round trip into the model per write request.
func (n *node) Getxattr(context.Context, string, []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}
func (n *node) Setxattr(context.Context, string, []byte, uint32) syscall.Errno {
	return syscall.ENOSYS
}
func (n *node) Removexattr(context.Context, string) syscall.Errno { return syscall.ENOSYS }
func (n *node) Listxattr(context.Context, []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	in, fh, ff, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	child, ok := in.Operations().(*node)
	if !ok { // every inode of the mount is a node (NewNode): not reached
		return in, fh, ff, 0
	}
	if n.m.passthrough {
		fh, ff, errno := child.openPassthrough(fh, ff, 0)
		return in, fh, ff, errno
	}
	return in, wrap(fh, child), ff | directIO(flags), 0
}

// file passes every call through to the loopback file, holding writes and fsyncs as the model
// says. It deliberately does not implement fs.FilePassthroughFder: with kernel passthrough
// (Linux 6.9+) reads and writes would go straight to the backing file, past the caps and the
// power loss's undo log; ptFile does, for a model mounted with Options.Passthrough.
type file struct {
	lf *fs.LoopbackFile
	n  *node
}

func wrap(fh fs.FileHandle, n *node) fs.FileHandle {
	lf, ok := fh.(*fs.LoopbackFile)
	if !ok {
		return fh
	}
	return &file{lf: lf, n: n}
}

var (
	_ fs.FileReader    = (*file)(nil)
	_ fs.FileWriter    = (*file)(nil)
	_ fs.FileFsyncer   = (*file)(nil)
	_ fs.FileReleaser  = (*file)(nil)
	_ fs.FileFlusher   = (*file)(nil)
	_ fs.FileGetattrer = (*file)(nil)
	_ fs.FileSetattrer = (*file)(nil)
	_ fs.FileLseeker   = (*file)(nil)
	_ fs.FileAllocater = (*file)(nil)
	_ fs.FileGetlker   = (*file)(nil)
	_ fs.FileSetlker   = (*file)(nil)
	_ fs.FileSetlkwer  = (*file)(nil)
)

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	m, size := f.n.m, int64(len(data))
	if m.passthrough {
		// The kernel refused the backing file and sent it after all. There is no cap or power
		// loss to book it for, and the next fsync counts it in the file's growth (passthrough.go).
		m.notPassed()
		written, errno := f.lf.Write(ctx, data, off)
		m.c.writes.Add(1)
		m.c.bytes.Add(int64(written))
		return written, errno
	}
	fd := -1
	if d, ok := f.lf.PassthroughFd(); ok {
		fd = d
	}
	m.power.RLock()
	defer m.power.RUnlock()
	if errno := f.n.track(fd, off, off+size); errno != 0 {
		return 0, errno
	}
	return f.n.write(off, size, func() (uint32, syscall.Errno) { return f.lf.Write(ctx, data, off) })
}

// fsyncFdatasync is FUSE_FSYNC_FDATASYNC of linux/fuse.h: the caller asked for fdatasync.
const fsyncFdatasync = 1

// Fsync runs the real fsync (fdatasync when asked), held as node.fsync says.
func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return f.n.fsync(ctx, f.lf, func() syscall.Errno {
		if fd, ok := f.lf.PassthroughFd(); ok && flags&fsyncFdatasync != 0 {
			return fs.ToErrno(unix.Fdatasync(fd))
		}
		return f.lf.Fsync(ctx, flags)
	})
}

func (f *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	f.n.m.c.reads.Add(1)
	if f.n.m.passthrough {
		f.n.m.notPassed()
	}
	return f.lf.Read(ctx, buf, off)
}
func (f *file) Release(ctx context.Context) syscall.Errno { return f.lf.Release(ctx) }
func (f *file) Flush(ctx context.Context) syscall.Errno   { return f.lf.Flush(ctx) }
func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.lf.Getattr(ctx, out)
}
func (f *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return f.lf.Setattr(ctx, in, out)
}
func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.lf.Lseek(ctx, off, whence)
}
func (f *file) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	return f.lf.Allocate(ctx, off, size, mode)
}
func (f *file) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	return f.lf.Getlk(ctx, owner, lk, flags, out)
}
func (f *file) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return f.lf.Setlk(ctx, owner, lk, flags)
}
func (f *file) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return f.lf.Setlkw(ctx, owner, lk, flags)
}
