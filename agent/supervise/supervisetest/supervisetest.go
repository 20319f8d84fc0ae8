// Package supervisetest builds the engine test double (agent/supervise/testdata/testengine.go):
// a process that serves the engine contract's admin API with scripted phases, for tests of the
// supervisor and the agent. End-to-end tests use the real engine.
package supervisetest

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
)

// BuildEngine compiles the test engine into dir and returns its path.
func BuildEngine(dir string) (string, error) {
	_, self, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(self), "..", "testdata", "testengine.go")
	bin := filepath.Join(dir, "testengine")
	if out, err := exec.Command("go", "build", "-o", bin, src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("build test engine: %v\n%s", err, out)
	}
	return bin, nil
}
