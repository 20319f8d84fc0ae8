package aeroncluster_test

import (
	"os"
	"sync"
	"testing"
)

var (
	sharedMu   sync.Mutex
	sharedDirs []string
)

// sharedTempDir makes a folder that tests share (the rig binary, the scaffolded module), removed
// when every test has run.
func sharedTempDir(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err == nil {
		sharedMu.Lock()
		sharedDirs = append(sharedDirs, dir)
		sharedMu.Unlock()
	}
	return dir, err
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range sharedDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}
