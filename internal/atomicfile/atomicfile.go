// Package atomicfile writes a file so that a reader (or a crash) sees either the old content or
// the new one, never half of it: a temporary file in the same folder, then a rename over path.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile replaces path with data (mode perm). The rename makes it atomic for readers; it is
// not fsynced, so after a power loss the file may be either version or empty, which is fine for
// the reports, manifests and stats it is used for.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())             // a no-op once renamed
	if err := tmp.Chmod(perm); err != nil { // CreateTemp makes it 0600
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
