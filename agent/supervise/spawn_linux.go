package supervise

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// On Linux the engine gets SIGKILL when its parent dies (PR_SET_PDEATHSIG), so an agent that is
// killed never leaves an engine behind. The kernel ties that signal to the parent THREAD, not the
// process: if the OS thread that forked the engine exits, the engine dies with it. Go threads
// exit when a goroutine locked to one returns without unlocking, so forks run on one goroutine
// locked to its thread for the life of the process; no other goroutine can ever run there.

func sysProcAttr() *syscall.SysProcAttr {
	// Setpgid: the engine leads its own process group, so a signal to -pgid reaches the engine
	// and anything it spawned, and a terminal's ^C to the agent's group does not reach it.
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	spawnOnce sync.Once
	spawnCh   chan spawnReq
)

func spawner() {
	runtime.LockOSThread() // never unlocked: this thread must outlive every engine it forks
	for r := range spawnCh {
		r.done <- r.cmd.Start()
	}
}

// startCmd starts cmd from the dedicated forking thread.
func startCmd(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnCh = make(chan spawnReq)
		go spawner()
	})
	done := make(chan error, 1)
	spawnCh <- spawnReq{cmd: cmd, done: done}
	return <-done
}

// waitExited blocks until pid has exited WITHOUT reaping it (WNOWAIT): until cmd.Wait reaps it
// the pid stays reserved, so the supervisor can close its signal gate first and never signal
// a recycled pid.
func waitExited(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}
