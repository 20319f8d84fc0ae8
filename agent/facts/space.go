package facts

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Space is the room on the filesystem that holds a path: what the controller checks a run's
// writes against before it starts any engine.
type Space struct {
	Path       string `json:"path"`      // the path asked about, absolute
	StatPath   string `json:"stat_path"` // the existing folder statfs read (Path or its nearest parent)
	FreeBytes  int64  `json:"free_bytes"`
	TotalBytes int64  `json:"total_bytes"`
	// Filesystem names the filesystem on its machine (boot id and the device number, st_dev),
	// so the controller can tell nodes that share one: on the local target every node writes to
	// the same filesystem, and their writes add up. (Not statfs f_fsid: kernels before 6.7 give
	// every tmpfs the same one, 0.)
	Filesystem string `json:"filesystem"`
}

// DiskSpace reports the space of the filesystem holding path, which need not exist yet (an
// engine's data folder is made when it starts): the nearest existing parent is asked. Free is
// f_bavail, what a writer without the superuser's reserve may still use. root is the root of
// /proc, as in Options.
func DiskSpace(root, path string) (Space, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Space{}, fmt.Errorf("disk space of %s: %w", path, err)
	}
	sp := Space{Path: abs}
	p := abs
	for {
		if _, err := os.Stat(p); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) || p == filepath.Dir(p) {
			return sp, fmt.Errorf("disk space of %s: %w", abs, err)
		}
		p = filepath.Dir(p)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return sp, fmt.Errorf("disk space of %s: statfs %s: %w", abs, p, err)
	}
	var sd unix.Stat_t
	if err := unix.Stat(p, &sd); err != nil {
		return sp, fmt.Errorf("disk space of %s: stat %s: %w", abs, p, err)
	}
	boot, err := readTrim(filepath.Join(root, "proc/sys/kernel/random/boot_id"))
	if err != nil {
		return sp, fmt.Errorf("disk space of %s: %w", abs, err)
	}
	sp.StatPath = p
	unit := st.Frsize // statvfs counts blocks in fragment-size units, as df does
	if unit == 0 {
		unit = st.Bsize
	}
	sp.FreeBytes = int64(st.Bavail) * unit
	sp.TotalBytes = int64(st.Blocks) * unit
	sp.Filesystem = fmt.Sprintf("%s/dev-%d:%d", boot, unix.Major(sd.Dev), unix.Minor(sd.Dev))
	return sp, nil
}
