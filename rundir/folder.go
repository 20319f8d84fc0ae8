package rundir

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rig-dev/rig/internal/untrusted"
)

// ErrOutside classifies a run-folder name that leads out of the run folder: a symlink (or a
// folder on the way that is one) pointing elsewhere. The rig makes no symlinks in a run folder.
var ErrOutside = errors.New("leads outside the run folder")

// Folder is a run folder as rig report reads it back and rewrites its outputs. Every file under
// it is reached through an os.Root of Dir, so a symlink leading out of the folder is refused with
// an error naming the file (ErrOutside), never followed: a folder the user names may hold
// anything. Names are slash-separated and relative to Dir. Each call opens the root afresh, so a
// Folder is a plain value with nothing to close.
type Folder struct{ Dir string }

func (f Folder) root() (*os.Root, error) {
	r, err := os.OpenRoot(f.Dir)
	if err != nil {
		return nil, fmt.Errorf("open run folder %s: %w", f.Dir, err)
	}
	return r, nil
}

// in runs op on a root of the folder, and words its refusal of name (confined).
func in[T any](f Folder, name string, op func(r *os.Root) (T, error)) (T, error) {
	r, err := f.root()
	if err != nil {
		var zero T
		return zero, err
	}
	defer r.Close()
	v, err := op(r)
	return v, f.confined(name, err)
}

// Open opens name for reading: a regular file only (a FIFO or a device is refused without
// blocking), inside the folder. what names the file's kind in errors ("events file").
func (f Folder) Open(name, what string) (*os.File, error) {
	return in(f, name, func(r *os.Root) (*os.File, error) { return untrusted.OpenIn(r, name, name, what) })
}

// ReadFile reads name whole, refusing a file over limit bytes before reading it.
func (f Folder) ReadFile(name, what string, limit int64) ([]byte, error) {
	return in(f, name, func(r *os.Root) ([]byte, error) { return untrusted.ReadFileIn(r, name, name, what, limit) })
}

// Stat is os.Stat of name inside the folder.
func (f Folder) Stat(name string) (fs.FileInfo, error) {
	return in(f, name, func(r *os.Root) (fs.FileInfo, error) { return r.Stat(name) })
}

// ReadDir lists the folder name (".": the run folder itself).
func (f Folder) ReadDir(name string) ([]fs.DirEntry, error) {
	return in(f, name, func(r *os.Root) ([]fs.DirEntry, error) { return fs.ReadDir(r.FS(), name) })
}

// readWith opens name in the folder and decodes it with read.
func readWith[T any](f Folder, name, what string, read func(io.Reader) (T, error)) (T, error) {
	fh, err := f.Open(name, what)
	if err != nil {
		var zero T
		return zero, err
	}
	defer fh.Close()
	return read(fh)
}

// Glob is the names matching pattern (path.Match syntax, one component per slash), in
// lexical order. A folder on the way that leads outside is left out and named in the error,
// alongside every match found elsewhere; a folder that cannot be listed for another reason (it
// is missing, it is a file) just matches nothing.
func (f Folder) Glob(pattern string) ([]string, error) {
	r, err := f.root()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	fsys := r.FS()
	parts := strings.Split(pattern, "/")
	cur := []string{"."}
	var errs []error
	for i, part := range parts {
		var next []string
		for _, dir := range cur {
			es, err := fs.ReadDir(fsys, dir)
			if err != nil {
				if err := f.confined(dir, err); errors.Is(err, ErrOutside) {
					errs = append(errs, err)
				}
				continue
			}
			for _, e := range es {
				ok, err := path.Match(part, e.Name())
				if err != nil {
					return nil, fmt.Errorf("glob %s: %w", pattern, err)
				}
				if !ok {
					continue
				}
				name := path.Join(dir, e.Name())
				if i == len(parts)-1 || e.IsDir() || f.symlinkToDir(e, name) {
					next = append(next, name) // a symlink is listed next, and refused if it leads out
				}
			}
		}
		cur = next
	}
	return cur, errors.Join(errs...)
}

// symlinkToDir says whether the entry name is a symlink to a folder, wherever it points: only
// then is it listed as one, so a symlinked file matching a folder's component is not named.
func (f Folder) symlinkToDir(e fs.DirEntry, name string) bool {
	if e.Type()&fs.ModeSymlink == 0 {
		return false
	}
	st, err := os.Stat(filepath.Join(f.Dir, filepath.FromSlash(name)))
	return err == nil && st.IsDir()
}

// WriteFile replaces name with what fill writes, atomically (a temporary file beside it, then a
// rename), creating the folders on the way; all of it inside the run folder.
func (f Folder) WriteFile(name string, fill func(io.Writer) error) error {
	_, err := in(f, name, func(r *os.Root) (struct{}, error) { return struct{}{}, writeIn(r, name, fill) })
	if err != nil && !errors.Is(err, ErrOutside) { // ErrOutside names the file already
		return fmt.Errorf("write %s: %w", name, err)
	}
	return err
}

func writeIn(r *os.Root, name string, fill func(io.Writer) error) error {
	if dir := path.Dir(name); dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	tmp := path.Join(path.Dir(name), "."+path.Base(name)+"."+strconv.FormatUint(rand.Uint64(), 36))
	fh, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer r.Remove(tmp) // a no-op once renamed
	err = fill(fh)
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return r.Rename(tmp, name)
}

// Remove removes name; a name that is not there is not an error.
func (f Folder) Remove(name string) error {
	_, err := in(f, name, func(r *os.Root) (struct{}, error) { return struct{}{}, r.Remove(name) })
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// confined turns the root's refusal of a name that leads outside into ErrOutside, naming the
// symlink and where it points; any other error is returned as it is.
func (f Folder) confined(name string, err error) error {
	if err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, untrusted.ErrNotRegular) {
		return err
	}
	link, target, ok := f.escape(name)
	if !ok {
		return err
	}
	if link == name {
		return fmt.Errorf("%s: %w (a symlink to %s): refused", name, ErrOutside, target)
	}
	return fmt.Errorf("%s: %w (%s is a symlink to %s): refused", name, ErrOutside, link, target)
}

// escape finds the symlink on the way to name that leads out of the folder, following links
// that stay inside. It only words the error: the refusal itself is the root's.
func (f Folder) escape(name string) (link, target string, ok bool) {
	for hops := 0; hops < 40; hops++ {
		parts := strings.Split(path.Clean(name), "/")
		followed := false
		for i := range parts {
			rel := path.Join(parts[:i+1]...)
			full := filepath.Join(f.Dir, filepath.FromSlash(rel))
			st, err := os.Lstat(full)
			if err != nil {
				return "", "", false
			}
			if st.Mode()&fs.ModeSymlink == 0 {
				continue
			}
			t, err := os.Readlink(full)
			if err != nil {
				return "", "", false
			}
			next := path.Join(path.Dir(rel), filepath.ToSlash(t))
			if filepath.IsAbs(t) || !filepath.IsLocal(next) {
				return rel, t, true
			}
			name, followed = path.Join(append([]string{next}, parts[i+1:]...)...), true
			break
		}
		if !followed {
			return "", "", false
		}
	}
	return "", "", false
}
