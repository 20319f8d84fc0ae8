//go:build !linux

package local

import "syscall"

// procAttr: its own process group (no parent-death signal outside Linux).
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
