package archive_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rig-dev/rig/archive"
	"github.com/rig-dev/rig/archive/archivetest"
	"github.com/rig-dev/rig/internal/testfs"
	"github.com/rig-dev/rig/rundir"
)

// An archive is read back only under a run id of the grammar, and only entries inside its run's
// folder: a hostile folder of archives writes nothing outside the unpack folder, nor in it.
func TestFetchConfinedToItsFolder(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, runID string
		entries     []archivetest.Entry
		want        error
	}{
		{"run id ..", "..", []archivetest.Entry{{Name: "../x", Body: []byte("x")}}, rundir.ErrRunID},
		{"run id .", ".", []archivetest.Entry{{Name: "./x", Body: []byte("x")}}, rundir.ErrRunID},
		{"entry ../../X", "20250601-120000-ok", []archivetest.Entry{
			{Name: "20250601-120000-ok/manifest.json", Body: []byte("{}")},
			{Name: "20250601-120000-ok/../../X", Body: []byte("x")}}, archive.ErrCorrupt},
		{"absolute entry", "20250601-120000-ok", []archivetest.Entry{{Name: "/tmp/X", Body: []byte("x")}}, archive.ErrCorrupt},
		{"entry written unclean", "20250601-120000-ok", []archivetest.Entry{{Name: "20250601-120000-ok//x", Body: []byte("x")}}, archive.ErrCorrupt},
	} {
		t.Run(c.name, func(t *testing.T) {
			top := t.TempDir()
			src := filepath.Join(top, "archives")
			archivetest.Forge(t, src, c.runID, c.entries...)
			out := filepath.Join(top, "a", "b", "unpack")
			if err := os.MkdirAll(out, 0o755); err != nil {
				t.Fatal(err)
			}
			before := testfs.State(t, top)
			_, err := archive.Fetch(ctx, archive.Dir{Path: src}, c.runID, out)
			if !errors.Is(err, c.want) {
				t.Fatalf("want %v, got %v", c.want, err)
			}
			if after := testfs.State(t, top); after != before {
				t.Fatalf("a refused archive changed the tree:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if _, err := archive.Verify(ctx, archive.Dir{Path: src}, c.runID); !errors.Is(err, c.want) {
				t.Fatalf("Verify: want %v, got %v", c.want, err)
			}
		})
	}
}

// FetchAll names an archive whose run id is outside the grammar and fetches the rest.
func TestFetchAllNamesBadRunIDs(t *testing.T) {
	top := t.TempDir()
	src := filepath.Join(top, "archives")
	archivetest.Forge(t, src, "..", archivetest.Entry{Name: "../x", Body: []byte("x")})
	archivetest.Forge(t, src, "20250601-120000-ok", archivetest.Entry{Name: "20250601-120000-ok/manifest.json", Body: []byte("{}")})
	out := filepath.Join(top, "out")
	var w bytes.Buffer
	got, err := archive.FetchAll(context.Background(), archive.Dir{Path: src}, out, &w)
	if err != nil || len(got) != 1 || got[0] != "20250601-120000-ok" {
		t.Fatalf("got %v %v", got, err)
	}
	if !strings.Contains(w.String(), "skipped "+src+"/...tar.zst") || !strings.Contains(w.String(), "not a run id") {
		t.Fatalf("the bad archive is not named: %q", w.String())
	}
	if _, err := os.Stat(filepath.Join(top, "x")); err == nil {
		t.Fatal("wrote outside the unpack folder")
	}
}

// `rig archive ..` from inside a run folder archives the run under its own id; a folder whose
// name is no run id is refused before anything is written.
func TestArchiveRunID(t *testing.T) {
	ctx := context.Background()
	run := archive.MakeRun(t, 10)
	dest := archive.Dir{Path: filepath.Join(t.TempDir(), "archives")}
	m, err := archive.Archive(ctx, archive.Options{RunDir: filepath.Join(run, "node-0", ".."), Dest: dest})
	if err != nil {
		t.Fatal(err)
	}
	if m.RunID != filepath.Base(run) || !strings.HasPrefix(m.Files[0].Path, m.RunID+"/") {
		t.Fatalf("archived as %q (%s), want %q", m.RunID, m.Files[0].Path, filepath.Base(run))
	}
	bad := filepath.Join(t.TempDir(), "a run\nid")
	if err := os.Mkdir(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	dest2 := archive.Dir{Path: filepath.Join(t.TempDir(), "archives")}
	if _, err := archive.Archive(ctx, archive.Options{RunDir: bad, Dest: dest2}); !errors.Is(err, rundir.ErrRunID) {
		t.Fatalf("want ErrRunID, got %v", err)
	}
	if _, err := os.Stat(dest2.Path); err == nil {
		t.Fatal("a refused archive created its destination")
	}
}
