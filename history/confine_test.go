package history

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/archive"
	"github.com/rig-dev/rig/archive/archivetest"
)

// A folder of archives with one whose run id is ".." (as `rig archive ..` made them) and one
// with an entry ../../X: the import names both, indexes the good run beside them, writes nothing
// outside its unpack folder and removes only that folder, never the temporary folder it is in.
func TestImportArchiveStaysInItsFolder(t *testing.T) {
	top := t.TempDir()
	tmp := filepath.Join(top, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(tmp, "someone-elses")
	if err := os.WriteFile(keep, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(top, "D")
	good := "20250601-120000-good"
	writeRun(t, filepath.Join(top, "results", good), good, nil, nil)
	if _, err := archive.Archive(context.Background(), archive.Options{RunDir: filepath.Join(top, "results", good), Dest: archive.Dir{Path: d}}); err != nil {
		t.Fatal(err)
	}
	archivetest.Forge(t, d, "..", archivetest.Entry{Name: "../X", Body: []byte("x")})
	archivetest.Forge(t, d, "20250601-120000-evil", archivetest.Entry{Name: "20250601-120000-evil/../../X", Body: []byte("x")})
	x := openTemp(t)
	rep, err := Import(context.Background(), x, d, ImportOptions{TmpDir: tmp})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Added) != 1 || rep.Added[0] != good {
		t.Fatalf("added %v, want only %s", rep.Added, good)
	}
	named := ""
	for _, s := range rep.Skipped {
		named += s.Path + ": " + s.Reason + "\n"
	}
	for _, want := range []string{"D/...tar.zst: ", "not a run id", "D/20250601-120000-evil.tar.zst: ", "not a path inside"} {
		if !strings.Contains(named, want) {
			t.Errorf("skips do not name %q:\n%s", want, named)
		}
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "keep" {
		t.Fatalf("the import removed what its temporary folder held beside it: %v", err)
	}
	ents, _ := os.ReadDir(tmp)
	if len(ents) != 1 {
		t.Fatalf("unpack folders left behind: %v", ents)
	}
	for _, p := range []string{filepath.Join(top, "X"), filepath.Join(top, "tmp", "X"), filepath.Join(top, "..", "X")} {
		if _, err := os.Stat(p); err == nil {
			t.Fatalf("wrote %s", p)
		}
	}
}
