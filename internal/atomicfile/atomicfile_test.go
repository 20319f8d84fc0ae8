package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.json")
	for _, content := range []string{"first", "second, longer"} {
		if err := WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil || string(b) != content {
			t.Fatalf("read back %q, %v; want %q", b, err, content)
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, %v; want 0644", fi.Mode(), err)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Fatalf("%d entries left in the folder, want only the file", len(es))
	}
	if err := WriteFile(filepath.Join(dir, "missing", "x"), nil, 0o644); err == nil {
		t.Fatal("write into a missing folder succeeded")
	}
}

func TestWriteDurableAndFailedReader(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := Write(path, strings.NewReader("v1"), Options{Perm: 0o600, Durable: true}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	// A reader that fails half way leaves the old content and no temporary file.
	err := Write(path, io.MultiReader(strings.NewReader("v2 partial"), iotest.ErrReader(errors.New("source gone"))), Options{})
	if err == nil || !strings.Contains(err.Error(), "source gone") {
		t.Fatalf("Write from a failing reader: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "v1" {
		t.Fatalf("content after a failed write %q, want v1", b)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Fatalf("%d entries in the folder, want only the file", len(es))
	}
}

func TestWriteFuncAndJSON(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "stats.json")
	if err := WriteJSON(path, map[string]int{"n": 3}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "{\n  \"n\": 3\n}\n" {
		t.Fatalf("WriteJSON wrote %q", b)
	}
	// A fill that fails after writing leaves the old content; its error is wrapped, not lost.
	errCheck := errors.New("checksum differs")
	err := WriteFunc(path, func(w io.Writer) error {
		io.WriteString(w, "half")
		return errCheck
	}, Options{})
	if !errors.Is(err, errCheck) || !strings.Contains(err.Error(), path) {
		t.Fatalf("WriteFunc with a failing fill: %v", err)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), `"n": 3`) {
		t.Fatalf("content after a failed fill %q", b)
	}
	if err := WriteJSON(path, func() {}); err == nil || !strings.Contains(err.Error(), "encode") {
		t.Fatalf("WriteJSON of a func: %v", err)
	}
}
