package loadgen

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHoldPIDFile: the pid file holds this process's pid until released, and is gone after; a
// relative path is refused before anything is written.
func TestHoldPIDFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "loadgen.pid")
	release, err := HoldPIDFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("pid file %q, %v; want %d", b, err, os.Getpid())
	}
	release()
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file still there after release: %v", err)
	}
	if _, err := HoldPIDFile("loadgen.pid"); !errors.Is(err, ErrBadOptions) {
		t.Errorf("relative path: %v, want ErrBadOptions", err)
	}
	if _, err := os.Stat("loadgen.pid"); err == nil {
		t.Error("a relative pid file was written")
	}
}
