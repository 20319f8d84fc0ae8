package archive

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// makeRun writes a run folder with a large incompressible file (so the archive needs several
// multipart parts), a few small ones and a nested folder.
func makeRun(t *testing.T, big int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "results", "20250601-120000-follower-restart")
	for _, d := range []string{"node-0", "loadgen", "empty"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	blob := make([]byte, big)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"manifest.json":         []byte(`{"target":"aws","stack":"dev"}`),
		"events.jsonl":          []byte("{\"t\":1}\n{\"t\":2}\n"),
		"node-0/engine.log":     []byte(strings.Repeat("applied\n", 1000)),
		"loadgen/probes.bin":    blob,
		"loadgen/zero-size.txt": nil,
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A manifest that lies about one file's digest is caught even though the archive digest matches.
func TestManifestFileDigestChecked(t *testing.T) {
	ctx := context.Background()
	run := makeRun(t, 1<<10)
	dest := Dir{Path: t.TempDir()}
	m, err := Archive(ctx, Options{RunDir: run, Dest: dest})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dest.Path, ManifestName(m.RunID)))
	if err != nil {
		t.Fatal(err)
	}
	forged := strings.Replace(string(b), m.Files[0].SHA256, strings.Repeat("0", 64), 1)
	if err := os.WriteFile(filepath.Join(dest.Path, ManifestName(m.RunID)), []byte(forged), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(ctx, dest, m.RunID); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), m.Files[0].Path) {
		t.Fatalf("want ErrCorrupt naming %s, got %v", m.Files[0].Path, err)
	}
}

func TestDirRoundTrip(t *testing.T) {
	ctx := context.Background()
	run := makeRun(t, 256<<10)
	dest := Dir{Path: filepath.Join(t.TempDir(), "archives")}
	m, err := Archive(ctx, Options{RunDir: run, Dest: dest})
	if err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(dest.Path, ".*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left behind: %v", left)
	}
	out := t.TempDir()
	if _, err := Fetch(ctx, dest, m.RunID, out); err != nil {
		t.Fatal(err)
	}
	compareTrees(t, run, filepath.Join(out, m.RunID))
}

func TestPackRefusesSymlinks(t *testing.T) {
	run := makeRun(t, 10)
	if err := os.Symlink("/etc/passwd", filepath.Join(run, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := Pack(context.Background(), run, io.Discard); err == nil || !strings.Contains(err.Error(), "link") {
		t.Fatalf("want a refusal naming the link, got %v", err)
	}
}

func TestParseLocation(t *testing.T) {
	for in, want := range map[string]Location{
		"s3://b":                {Bucket: "b"},
		"s3://b/runs/dev/":      {Bucket: "b", Prefix: "runs/dev"},
		"archives":              {Dir: "archives"},
		"/var/tmp/rig-archives": {Dir: "/var/tmp/rig-archives"},
	} {
		got, err := ParseLocation(in)
		if err != nil || got != want {
			t.Errorf("%s: %+v %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "s3://", "s3:///x", "gs://bucket/x"} {
		if _, err := ParseLocation(bad); !errors.Is(err, ErrBadDest) {
			t.Errorf("%q: want ErrBadDest, got %v", bad, err)
		}
	}
}

func TestRunsForStack(t *testing.T) {
	root := t.TempDir()
	write := func(run, body string) {
		if err := os.MkdirAll(filepath.Join(root, run), 0o755); err != nil {
			t.Fatal(err)
		}
		if body != "" {
			if err := os.WriteFile(filepath.Join(root, run, "manifest.json"), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("r2", `{"target":"aws","stack":"dev","playbook":{}}`)
	write("r1", `{"target":"aws","stack":"dev"}`)
	write("r3", `{"target":"aws","stack":"prod"}`)
	write("r4", `{"target":"local","stack":""}`)
	write("r5", "")
	got, err := RunsForStack(root, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || filepath.Base(got[0]) != "r1" || filepath.Base(got[1]) != "r2" {
		t.Fatalf("got %v", got)
	}
	if got, err := RunsForStack(filepath.Join(root, "missing"), "dev"); err != nil || got != nil {
		t.Fatalf("missing results folder: %v %v", got, err)
	}
}

func compareTrees(t *testing.T, want, got string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(want, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(want, p)
		gp := filepath.Join(got, rel)
		if d.IsDir() {
			if st, err := os.Stat(gp); err != nil || !st.IsDir() {
				t.Errorf("%s: folder missing", rel)
			}
			return nil
		}
		a, _ := os.ReadFile(p)
		b, err := os.ReadFile(gp)
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs (%v)", rel, err)
		}
		n++
		return nil
	})
	if err != nil || n == 0 {
		t.Fatalf("walk: %v (%d files)", err, n)
	}
}
