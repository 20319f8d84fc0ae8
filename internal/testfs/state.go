package testfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// State lists every path under dir (links not followed) with its mode, size and mtime, so a
// test can show that a refused command changed nothing there.
func State(t testing.TB, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %v %d %d\n", rel, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
