//go:build unix && !linux

package supervise

import (
	"os/exec"
	"syscall"
)

// Without PR_SET_PDEATHSIG (Linux only) an engine outlives a killed agent; the rig's nodes are
// Linux, this file only keeps the package building elsewhere.

func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func startCmd(cmd *exec.Cmd) error { return cmd.Start() }

// waitExited is a no-op here: cmd.Wait reaps, with the small pid-reuse window that implies.
func waitExited(pid int) {}
