//go:build linux

package store

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync goes through SyscallConn so the descriptor stays valid for the call and f keeps
// its non-blocking setup (f.Fd() would switch it to blocking mode).
func fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = unix.Fdatasync(int(fd))
			if !errors.Is(serr, unix.EINTR) {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}

// lockFile takes an exclusive, non-blocking flock on path (created if missing). The kernel
// drops it when the process dies, so a kill -9 never leaves a stale lock behind.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		for {
			lerr = unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB)
			if !errors.Is(lerr, unix.EINTR) {
				return
			}
		}
	}); err != nil {
		f.Close()
		return nil, err
	}
	if errors.Is(lerr, unix.EWOULDBLOCK) {
		f.Close()
		return nil, ErrLocked
	}
	if lerr != nil {
		f.Close()
		return nil, &os.PathError{Op: "flock", Path: path, Err: lerr}
	}
	return f, nil
}
