package spec

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/rig-dev/rig/internal/untrusted"
)

// A stack config gets the limits of every user input: a FIFO is refused without blocking, a
// 50 MB file by its size without being read, a nested one before the parser sees it.
func TestStackConfigLimits(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "Pulumi.fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadStackConfig(fifo); !errors.Is(err, ErrStackConfig) || !errors.Is(err, untrusted.ErrNotRegular) {
		t.Errorf("FIFO: got %v", err)
	}

	big := filepath.Join(dir, "Pulumi.big.yaml")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 50<<20); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := ReadStackConfig(big)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, untrusted.ErrTooLarge) || !strings.Contains(err.Error(), "52428800 bytes; a stack config may be at most 1048576") {
		t.Errorf("50 MB: got %v", err)
	}
	if b := after.TotalAlloc - before.TotalAlloc; b > 256<<10 {
		t.Errorf("refusing 50 MB allocated %d bytes: it was read", b)
	}

	// two mappings, then brackets from column 14: the 63rd, at 76, is level 65
	deep := []byte("config:\n  rig:owner: " + strings.Repeat("[", 400_000) + "\n")
	_, err = ParseStackConfig(filepath.Join(dir, "Pulumi.deep.yaml"), deep)
	if !errors.Is(err, ErrStackConfig) || !strings.Contains(err.Error(), "Pulumi.deep.yaml:2:76: nested more than 64 levels deep") {
		t.Errorf("nested: got %v", err)
	}
}
