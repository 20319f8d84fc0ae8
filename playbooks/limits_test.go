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
			_, err := Parse("t.yaml", data, testDrivers)
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
	_, err := Open(p, testDrivers) // blocks for ever if it opens the pipe for reading without O_NONBLOCK
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
			_, err := Parse(file, []byte(src), testDrivers)
			var probs Problems
			if !errors.As(err, &probs) {
				t.Fatalf("got %v, want problems", err)
			}
			wantProblem(t, probs, c.at, c.msg)
		})
	}
}

// engine.command.config_template names a file like any other the user hands the rig: before,
// /dev/zero (or a symlink to it) was read until rig validate was OOM-killed at 24 GB. Each
// non-file is refused at the field, naming the path and what it is, without blocking; a file
// over 1 MiB is refused before it is read.
func TestConfigTemplateBounded(t *testing.T) {
	file, _ := commandPlaybook(t, "", "")
	dir := filepath.Dir(file)
	fifo := filepath.Join(dir, "fifo.tmpl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "zero.tmpl")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.tmpl")
	if err := os.WriteFile(big, make([]byte, untrusted.MaxBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ path, msg string }{
		"/dev/zero":       {"/dev/zero", "config template /dev/zero is a character device; want a regular file"},
		"symlink to zero": {link, "config template " + link + " is a character device"},
		"fifo":            {fifo, "is a named pipe (FIFO)"},
		"directory":       {dir, "is a directory"},
		"over 1 MiB":      {big, "a config template may be at most 1048576 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			src := base + "engine:\n  driver: command\n  command: {binary: x, config_template: " + c.path + "}\n"
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := Parse(file, []byte(src), testDrivers)
			runtime.ReadMemStats(&after)
			var probs Problems
			if !errors.As(err, &probs) {
				t.Fatalf("got %v, want problems", err)
			}
			wantProblem(t, probs, file+":7:41", "engine.command.config_template: cannot read the template")
			wantProblem(t, probs, file+":7:41", c.msg)
			if b := after.TotalAlloc - before.TotalAlloc; b > 4<<20 {
				t.Errorf("refusing it allocated %d bytes; want under 4 MiB", b)
			}
		})
	}
}
