// Package atomicfile writes a file so that a reader (or a crash) sees either the old content or
// the new one, never half of it: a temporary file in the same folder, then a rename over path.
// It is the one such writer for reports, manifests, stats, state and config files, and uploads.
// (The engine's own storage, engine/replica, syncs by its configured level and keeps its own.)
package atomicfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Options say how a file is written.
type Options struct {
	Perm os.FileMode // mode of the new file (default 0644)
	// Durable syncs the file before the rename and the folder after it, so that once Write
	// returns the new content survives a crash; without it a crash may leave either version.
	Durable bool
}

// WriteFile replaces path with data (mode perm), atomically for readers, not synced.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return Write(path, bytes.NewReader(data), Options{Perm: perm})
}

// Write replaces path with everything read from r. If r fails, path is left as it was.
func Write(path string, r io.Reader, o Options) error {
	return WriteFunc(path, func(w io.Writer) error {
		_, err := io.Copy(w, r)
		return err
	}, o)
}

// WriteFunc replaces path with what fill writes. If fill fails, path is left as it was and
// the error wraps fill's.
func WriteFunc(path string, fill func(io.Writer) error, o Options) error {
	if o.Perm == 0 {
		o.Perm = 0o644
	}
	if err := write(path, fill, o); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func write(path string, fill func(io.Writer) error, o Options) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	err = tmp.Chmod(o.Perm)     // CreateTemp makes it 0600
	if err == nil {
		err = fill(tmp)
	}
	if err == nil && o.Durable {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if o.Durable {
		return SyncDir(dir)
	}
	return nil
}

// SyncDir makes a folder's entries (a rename, a removal) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// WriteJSON replaces path with v as indented JSON and a final newline (mode 0644): the one
// writer of the JSON files rig keeps (manifests, stats, summaries, configs).
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return WriteFile(path, append(b, '\n'), 0o644)
}
