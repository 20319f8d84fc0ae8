package fusefs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Who owns a mountpoint. A model's FUSE server lives in the process that mounted it, so when
// that process dies (SIGKILL of the controller) its mounts stay, dead: every access fails with
// ENOTCONN. Each mount is therefore made under an flock on <mountpoint>.lock that records its
// holder; the kernel drops the lock with the process however it ends, so a model mount whose
// lock is free has no live server, and whoever takes the lock may detach it. A mountpoint whose
// lock is held is another live model's, refused naming its holder.

// FsType is a disk model's filesystem type in /proc/self/mountinfo ("fuse." and the mount's
// Name option).
const FsType = "fuse." + fsName

const fsName = "rigdisk"

// ErrBusy is a mountpoint a live disk model holds (its lock is taken).
var ErrBusy = errors.New("held by a live disk model")

// ErrLost is a model that stopped serving its mountpoint while its holder still had it mounted:
// unmounted or detached by someone else, or covered by another mount. Writes meant for it go
// elsewhere or fail (ENOTCONN).
var ErrLost = errors.New("disk model lost")

// LockPath is the lock file of a model mounted on mountpoint: beside it, on the filesystem
// under the mount.
func LockPath(mountpoint string) string { return filepath.Clean(mountpoint) + ".lock" }

// Holder is who holds (or last held) a mountpoint's lock, as its lock file records it.
type Holder struct {
	Owner string // Options.Owner, e.g. "run 20260101-120000-disk"
	PID   int
}

func (h Holder) String() string {
	switch {
	case h.Owner == "" && h.PID == 0:
		return "an unknown holder"
	case h.Owner == "":
		return fmt.Sprintf("pid %d", h.PID)
	}
	return fmt.Sprintf("%s (pid %d)", h.Owner, h.PID)
}

// Leftover is a dead model's mount that was detached.
type Leftover struct {
	Mountpoint string
	LeftBy     Holder // the process that mounted it and died
}

func (l Leftover) String() string {
	return fmt.Sprintf("%s (mounted by %s, which is gone)", l.Mountpoint, l.LeftBy)
}

// lockMountpoint takes mountpoint's lock, refusing with ErrBusy naming the holder when a live
// process has it. create: make the lock file when it is missing.
func lockMountpoint(mountpoint string, create bool) (*os.File, Holder, error) {
	p := LockPath(mountpoint)
	flags := os.O_RDWR | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(p, flags, 0o644)
	if err != nil {
		return nil, Holder{}, fmt.Errorf("lock %s: %w", p, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, Holder{}, fmt.Errorf("lock %s: not a regular file", p)
	}
	prev := readHolder(f)
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, prev, fmt.Errorf("%s is %w: %s (lock %s)", mountpoint, ErrBusy, prev, p)
		}
		return nil, prev, fmt.Errorf("lock %s: %w", p, err)
	}
	return f, prev, nil
}

func readHolder(f *os.File) Holder {
	b, _ := io.ReadAll(io.LimitReader(io.NewSectionReader(f, 0, 512), 512))
	s := strings.TrimSpace(string(b))
	var h Holder
	if i := strings.LastIndex(s, " (pid "); i >= 0 && strings.HasSuffix(s, ")") {
		h.PID, _ = strconv.Atoi(s[i+len(" (pid ") : len(s)-1])
		s = s[:i]
	}
	h.Owner = s
	return h
}

func writeHolder(f *os.File, owner string) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(Holder{Owner: owner, PID: os.Getpid()}.String()+"\n"), 0)
	return err
}

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	id, parent int
	dev        string // major:minor
	mountpoint string
	fstype     string
	source     string
}

// mountinfo lists this process's mount namespace (proc(5): id parent major:minor root
// mountpoint options [optional fields] - type source super-options).
func mountinfo() ([]mountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("list mounts: %w", err)
	}
	defer f.Close()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		sep := -1
		for i := 6; i < len(fs); i++ {
			if fs[i] == "-" {
				sep = i
				break
			}
		}
		if len(fs) < 5 || sep < 0 || sep+2 >= len(fs) {
			continue
		}
		e := mountEntry{dev: fs[2], mountpoint: unescapeMount(fs[4]), fstype: fs[sep+1], source: unescapeMount(fs[sep+2])}
		e.id, _ = strconv.Atoi(fs[0])
		e.parent, _ = strconv.Atoi(fs[1])
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("list mounts: %w", err)
	}
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes of space, tab, newline and backslash.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountsOn are the mounts on mountpoint, bottom first: a mount stacked on another at the same
// place is its child.
func mountsOn(all []mountEntry, mountpoint string) []mountEntry {
	var on []mountEntry
	at := map[int]bool{}
	for _, e := range all {
		if e.mountpoint == mountpoint {
			on = append(on, e)
			at[e.id] = true
		}
	}
	child := map[int]mountEntry{}
	var bottom []mountEntry
	for _, e := range on {
		if at[e.parent] {
			child[e.parent] = e
		} else {
			bottom = append(bottom, e)
		}
	}
	if len(bottom) != 1 || len(child) != len(on)-1 {
		return on // not one stack: as the kernel lists them, which is mount order
	}
	sorted := bottom
	for e, ok := child[bottom[0].id]; ok && len(sorted) < len(on); e, ok = child[e.id] {
		sorted = append(sorted, e)
	}
	return sorted
}

// detachModels detaches every disk model mount stacked on mountpoint, top first, whose
// mountpoint lock the caller holds (so none has a live server). A mount of any other kind on it
// is refused, named, and left alone.
func detachModels(mountpoint string) (int, error) {
	n := 0
	for range 16 { // a bound, should mounts keep appearing
		all, err := mountinfo()
		if err != nil {
			return n, err
		}
		on := mountsOn(all, mountpoint)
		if len(on) == 0 {
			return n, nil
		}
		top := on[len(on)-1]
		if top.fstype != FsType {
			return n, fmt.Errorf("%s is already mounted (%s from %s), not by a disk model: unmount it or mount the model elsewhere", mountpoint, top.fstype, top.source)
		}
		if err := unix.Unmount(mountpoint, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return n, fmt.Errorf("detach the dead disk model on %s: %w", mountpoint, err)
		}
		n++
	}
	return n, fmt.Errorf("%s: mounts keep appearing on it", mountpoint)
}

// Reclaim detaches the mounts of dead disk models (their mountpoint's lock free: the process
// that mounted them is gone) for which want is true, given the mountpoint and who mounted it,
// and returns them; want nil means every one. A model whose lock is held is live and left
// alone: it is returned in held when want is true for it. A model mount without a lock file
// (made before mounts had locks) is not touched.
func Reclaim(want func(mountpoint string, by Holder) bool) (detached []Leftover, held []Leftover, err error) {
	all, err := mountinfo()
	if err != nil {
		return nil, nil, err
	}
	seen := map[string]bool{}
	var errs []error
	for _, e := range all {
		if e.fstype != FsType || seen[e.mountpoint] {
			continue
		}
		seen[e.mountpoint] = true
		f, by, err := lockMountpoint(e.mountpoint, false)
		if want != nil && !want(e.mountpoint, by) {
			if f != nil {
				f.Close()
			}
			continue
		}
		switch {
		case errors.Is(err, ErrBusy):
			held = append(held, Leftover{Mountpoint: e.mountpoint, LeftBy: by})
			continue
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			errs = append(errs, err)
			continue
		}
		n, err := detachModels(e.mountpoint)
		f.Close() // releases the lock
		if err != nil {
			errs = append(errs, err)
		}
		if n > 0 {
			detached = append(detached, Leftover{Mountpoint: e.mountpoint, LeftBy: by})
		}
	}
	return detached, held, errors.Join(errs...)
}
