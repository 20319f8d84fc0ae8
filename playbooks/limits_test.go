package playbooks

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

// The playbooks that made `rig validate` grow to 24 GB (nested brackets) and 20 GB (a nested
// mapping) are refused with the position and the limit, having allocated under 1 MiB.
func TestNestedPlaybookRefusedWithBoundedMemory(t *testing.T) {
	var nested strings.Builder
	nested.WriteString(base + "description:\n")
	for i := 1; nested.Len() < 500_000; i++ {
		nested.WriteString(strings.Repeat(" ", i) + "a:\n")
	}
	for name, c := range map[string]struct{ src, at string }{
		// the top-level mapping is level 1, so the 64th bracket (column 14+63) is one too many
		"brackets": {base + "description: " + strings.Repeat("[", 200_000) + "\n", "t.yaml:5:77"},
		"mapping":  {nested.String(), "t.yaml:69:65"}, // description: at 1, its a: at 2...
	} {
		t.Run(name, func(t *testing.T) {
			data := []byte(c.src)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := Parse("t.yaml", data)
			runtime.ReadMemStats(&after)
			var probs Problems
			if !errors.As(err, &probs) {
				t.Fatalf("got %v, want problems", err)
			}
			wantProblem(t, probs, c.at, "nested more than 64 levels deep (mappings and lists); a file may nest at most 64")
			if b := after.TotalAlloc - before.TotalAlloc; b > 1<<20 {
				t.Errorf("refusing it allocated %d bytes; want under 1 MiB", b)
			}
		})
	}
}

func TestFIFOPlaybookRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "p.yaml")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(p) // blocks for ever if it opens the pipe for reading without O_NONBLOCK
	if !errors.Is(err, untrusted.ErrNotRegular) || !strings.Contains(err.Error(), "named pipe") {
		t.Fatalf("got %v", err)
	}
}

// engine.settings_file is user input like the playbook: a settings file that nests too deep is
// refused at its own line and column, a FIFO without hanging, each naming the playbook's field.
func TestSettingsFileBounded(t *testing.T) {
	file, _ := commandPlaybook(t, "", "")
	dir := filepath.Dir(file)
	deep := filepath.Join(dir, "deep.yaml")
	if err := os.WriteFile(deep, []byte("flush: "+strings.Repeat("[", 100)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ path, at, msg string }{
		"deep": {deep, deep + ":1:71", "nested more than 64 levels deep"},
		"fifo": {fifo, file + ":7:18", "engine.settings_file: cannot read the settings file"},
	} {
		t.Run(name, func(t *testing.T) {
			src := base + "engine:\n  driver: command\n  settings_file: " + c.path + "\n  command: {binary: x}\n"
			_, err := Parse(file, []byte(src))
			var probs Problems
			if !errors.As(err, &probs) {
				t.Fatalf("got %v, want problems", err)
			}
			wantProblem(t, probs, c.at, c.msg)
		})
	}
}
