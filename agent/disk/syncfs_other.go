//go:build !linux

package disk

import "os/exec"

// syncfs falls back to sync(1) where syncfs(2) does not exist; the agent runs on Linux nodes.
func syncfs(string) error { return exec.Command("sync").Run() }
