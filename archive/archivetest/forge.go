// Package archivetest makes archives by hand for tests: any run id, any entry names, a manifest
// whose digests match, as a hostile or careless sender would leave them in a folder.
package archivetest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/rig-dev/rig/archive"
)

// Entry is one file of a forged archive, by its name in the tar.
type Entry struct {
	Name string
	Body []byte
}

// Forge writes dir/<runID>.tar.zst and its manifest (archive.ArchiveName, archive.ManifestName)
// holding entries as given, with digests that match, and returns the manifest.
func Forge(t testing.TB, dir, runID string, entries ...Entry) archive.Manifest {
	t.Helper()
	var tarball bytes.Buffer
	zw, err := zstd.NewWriter(&tarball)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(zw)
	m := archive.Manifest{Version: archive.ManifestVersion, RunID: runID, Archive: archive.ArchiveName(runID)}
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Name: e.Name, Mode: 0o644, Size: int64(len(e.Body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.Body); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(e.Body)
		m.Files = append(m.Files, archive.FileEntry{Path: e.Name, Size: int64(len(e.Body)), SHA256: hex.EncodeToString(sum[:])})
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(tarball.Bytes())
	m.ArchiveSize, m.ArchiveSHA256 = int64(tarball.Len()), hex.EncodeToString(sum[:])
	mb, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, m.Archive), tarball.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, archive.ManifestName(runID)), mb, 0o644); err != nil {
		t.Fatal(err)
	}
	return m
}
