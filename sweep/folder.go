package sweep

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rig-dev/rig/internal/untrusted"
)

// A sweep folder is read and rewritten by rig run --resume, rig report and rig compare long after
// the rig made it, and whoever could write to it in between may have left symlinks or edited
// sweep.json. What the rig reads or writes there must stay inside it: sweep.json is read through
// an os.Root of the folder (a symlink leading out is refused), and before anything else reads or
// writes, checkFolder refuses a run folder, attempts folder or plots folder that is not a plain
// folder of the sweep (the rig never makes links there) and two runs naming one folder.

// ErrNotConfined classifies a sweep folder whose paths would lead the rig out of it, or make it
// read one run folder twice.
var ErrNotConfined = errors.New("sweep folder not as the rig made it")

// maxSweepFile bounds sweep.json: the rig writes it, 1,000 runs (the most a plan has) with their
// earlier tries and the resolved playbook come to well under this.
const maxSweepFile = 16 << 20

// readSweepFile reads dir/sweep.json through an os.Root of dir: a regular file of at most
// maxSweepFile bytes, never one a symlink leads to outside the folder.
func readSweepFile(dir string) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("open sweep folder: %w", err)
	}
	defer root.Close()
	b, err := untrusted.ReadFileIn(root, FileName, filepath.Join(dir, FileName), FileName, maxSweepFile)
	if err != nil && escapes(err) {
		return nil, fmt.Errorf("%w: %s leads out of the sweep folder: %w", ErrNotConfined, filepath.Join(dir, FileName), err)
	}
	return b, err
}

// escapes tells os.Root's refusal of a path that leads out of the root, which the os package
// does not export ("path escapes from parent").
func escapes(err error) bool {
	return err != nil && strings.Contains(err.Error(), "escapes from parent")
}

// checkFolder refuses, naming the path, what would make the rig leave dir or count a run twice:
// two runs (or two earlier tries) naming one folder, and a run folder, earlier try's folder,
// attempts folder or plots folder (the sweep's or a run's) that is a symlink or not a folder.
// Paths that do not exist are fine: a run that never started has no folder.
func checkFolder(dir string, s *Sweep) error {
	file := filepath.Join(dir, FileName)
	seen := map[string]int{}
	claim := func(rel string, index int) error {
		if prev, dup := seen[rel]; dup {
			return fmt.Errorf("%w: %s: runs %d and %d both name the folder %s; each run has a folder of its own", ErrNotConfined, file, prev, index, rel)
		}
		seen[rel] = index
		return nil
	}
	for _, r := range s.Runs {
		if err := claim(r.Dir, r.Index); err != nil {
			return err
		}
		if err := plainDirs(dir, r.Dir, filepath.Join(r.Dir, PlotsDir)); err != nil {
			return err
		}
		for _, e := range r.Earlier {
			if e.Dir == "" {
				continue
			}
			if err := claim(e.Dir, r.Index); err != nil {
				return err
			}
			// attempts, attempts/N and attempts/N/rNN, each a plain folder if it is there.
			parts := strings.Split(e.Dir, "/")
			for i := range parts {
				if err := plainDirs(dir, filepath.Join(parts[:i+1]...)); err != nil {
					return err
				}
			}
		}
	}
	return plainDirs(dir, AttemptsDir, PlotsDir)
}

// plainDirs refuses each of rels (relative to dir) that exists and is not a folder: a symlink
// (wherever it points), a file, a device.
func plainDirs(dir string, rels ...string) error {
	for _, rel := range rels {
		p := filepath.Join(dir, rel)
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return fmt.Errorf("%w: %w", ErrNotConfined, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			to, _ := os.Readlink(p)
			return fmt.Errorf("%w: %s is a symlink (to %s); the rig makes every folder of a sweep itself and follows no link out of it: "+
				"put the folder itself there, or remove the link", ErrNotConfined, p, to)
		case !fi.IsDir():
			return fmt.Errorf("%w: %s is not a folder (%s)", ErrNotConfined, p, fi.Mode().Type())
		}
	}
	return nil
}
