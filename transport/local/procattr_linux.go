package local

import "syscall"

// procAttr: its own process group (a Ctrl-C reaches the controller only, which stops it in
// order), and a TERM when the controller dies, so a load generator flushes and exits rather
// than running on, unwatched, until its duration ends.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
