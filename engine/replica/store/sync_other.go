//go:build !linux

package store

import "os"

// fdatasync falls back to fsync where x/sys has no fdatasync; the rig's nodes run Linux, so
// level 1 is only distinct from level 2 there.
func fdatasync(f *os.File) error { return f.Sync() }

// lockFile is advisory and Linux-only; elsewhere the directory is not locked.
func lockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
}
