// Package ctlsock listens on a control socket: a Unix socket in a folder only its owner can
// enter (0700). The agent and the load generator's control API listen on one, so only the
// user who started them (the run's controller, locally or through OpenSSH's stream-local
// forwarding) reaches them; the kernel checks it, not a secret (docs/security.md).
package ctlsock

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// MaxPath is the longest socket path Linux accepts (sun_path is 108 bytes with its NUL).
const MaxPath = 107

// ErrInUse is a socket another live process answers on.
var ErrInUse = errors.New("control socket in use")

// Listen creates the socket's folder 0700 (or checks that an existing one is a folder of ours
// that nobody else can enter), removes a stale socket left by a dead process, listens, and
// makes the socket 0600. When running as root under sudo (SUDO_UID set), the folder and the
// socket belong to the invoking user, so that user's SSH session can reach them and nobody
// else can.
func Listen(path string) (net.Listener, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("control socket %q: want an absolute path", path)
	}
	if len(path) > MaxPath {
		return nil, fmt.Errorf("control socket %s: path is %d bytes, Linux allows %d (use a shorter folder)", path, len(path), MaxPath)
	}
	dir := filepath.Dir(path)
	uid, gid := owner()
	if err := os.Mkdir(dir, 0o700); err == nil {
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, fmt.Errorf("control socket folder %s: %w", dir, err)
		}
	} else if !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("control socket folder: %w", err)
	}
	if err := CheckFolder(dir); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("control socket %s: exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%w: %s: another process answers there", ErrInUse, path)
		}
		os.Remove(path) // stale: its process is gone
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on control socket: %w", err)
	}
	err = os.Chmod(path, 0o600)
	if err == nil {
		err = os.Chown(path, uid, gid)
	}
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	return ln, nil
}

// CheckFolder refuses a socket folder that is a symlink, not a folder, not owned by us (or the
// user sudo ran us for), or open to group or others.
func CheckFolder(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("control socket folder: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch uid, _ := owner(); {
	case !fi.IsDir():
		return fmt.Errorf("control socket folder %s: not a folder (%s)", dir, fi.Mode().Type())
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("control socket folder %s: mode %04o lets others in, want 0700", dir, fi.Mode().Perm())
	case ok && int(st.Uid) != uid && int(st.Uid) != os.Geteuid():
		return fmt.Errorf("control socket folder %s: owned by uid %d, not by uid %d", dir, st.Uid, uid)
	}
	return nil
}

// owner is who the socket is for: the user sudo ran us for, else ourselves.
func owner() (uid, gid int) {
	uid, gid = os.Geteuid(), os.Getegid()
	if uid != 0 {
		return uid, gid
	}
	u, err1 := strconv.Atoi(os.Getenv("SUDO_UID"))
	g, err2 := strconv.Atoi(os.Getenv("SUDO_GID"))
	if err1 != nil || err2 != nil {
		return uid, gid
	}
	return u, g
}
