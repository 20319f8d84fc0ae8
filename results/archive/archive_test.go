package archive

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
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

type fakeS3 struct {
	client    *s3.Client
	backend   *s3mem.Backend
	multipart atomic.Int32 // CreateMultipartUpload requests
	parts     atomic.Int32 // UploadPart requests
}

func newFakeS3(t *testing.T, bucket string) *fakeS3 {
	t.Helper()
	f := &fakeS3{backend: s3mem.New()}
	if err := f.backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	faker := gofakes3.New(f.backend)
	h := faker.Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if _, ok := q["uploads"]; ok && r.Method == http.MethodPost {
			f.multipart.Add(1)
		}
		if q.Get("partNumber") != "" && r.Method == http.MethodPut {
			f.parts.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.client = s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
	})
	return f
}

func smallParts(o *transfermanager.Options) {
	o.PartSizeBytes = 5 << 20 // the S3 minimum
	o.MultipartUploadThreshold = 5 << 20
}

func TestS3RoundTripMultipart(t *testing.T) {
	ctx := context.Background()
	fs3 := newFakeS3(t, "rig-results")
	run := makeRun(t, 13<<20)
	dest := NewS3(fs3.client, "rig-results", "dev/archives", smallParts)

	m, err := Archive(ctx, Options{RunDir: run, Dest: dest})
	if err != nil {
		t.Fatal(err)
	}
	if fs3.multipart.Load() != 1 || fs3.parts.Load() < 3 {
		t.Fatalf("want one multipart upload of >= 3 parts, got %d uploads, %d parts", fs3.multipart.Load(), fs3.parts.Load())
	}
	if len(m.Files) != 5 || m.ArchiveSize < 13<<20 {
		t.Fatalf("manifest: %d files, %d bytes", len(m.Files), m.ArchiveSize)
	}
	// The objects are where the prefix says.
	for _, key := range []string{"dev/archives/" + m.Archive, "dev/archives/" + ManifestName(m.RunID)} {
		if _, err := fs3.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("rig-results"), Key: aws.String(key)}); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
	}

	// Fetch extracts byte-identical files.
	out := t.TempDir()
	if _, err := Fetch(ctx, dest, m.RunID, out); err != nil {
		t.Fatal(err)
	}
	compareTrees(t, run, filepath.Join(out, m.RunID))
}

func TestS3CorruptionDetected(t *testing.T) {
	ctx := context.Background()
	fs3 := newFakeS3(t, "b")
	run := makeRun(t, 6<<20)
	dest := NewS3(fs3.client, "b", "", smallParts)
	m, err := Archive(ctx, Options{RunDir: run, Dest: dest})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := dest.Get(ctx, m.Archive)
	if err != nil {
		t.Fatal(err)
	}
	good, err := io.ReadAll(obj)
	if err != nil {
		t.Fatal(err)
	}
	put := func(b []byte) {
		t.Helper()
		if _, err := fs3.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String(m.Archive), Body: bytes.NewReader(b)}); err != nil {
			t.Fatal(err)
		}
	}
	for name, mutate := range map[string]func([]byte) []byte{
		"flipped byte":  func(b []byte) []byte { c := bytes.Clone(b); c[len(c)/2] ^= 0x40; return c },
		"truncated":     func(b []byte) []byte { return bytes.Clone(b[:len(b)-1000]) },
		"extra trailer": func(b []byte) []byte { return append(bytes.Clone(b), 0) },
	} {
		put(mutate(good))
		if _, err := Verify(ctx, dest, m.RunID); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: want ErrCorrupt, got %v", name, err)
		}
	}
	put(good)
	if _, err := Verify(ctx, dest, m.RunID); err != nil {
		t.Fatalf("restored object: %v", err)
	}
	if _, err := Verify(ctx, dest, "no-such-run"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing run: want ErrNotFound, got %v", err)
	}
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
