package archive_test

import (
	"bytes"
	"context"
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

	"github.com/rig-dev/rig/archive"
	"github.com/rig-dev/rig/archive/s3dest"
)

// The archive round trip through S3, against an S3-compatible server in the test process.

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
	run := archive.MakeRun(t, 13<<20)
	dest := s3dest.NewS3(fs3.client, "rig-results", "dev/archives", smallParts)

	m, err := archive.Archive(ctx, archive.Options{RunDir: run, Dest: dest})
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
	for _, key := range []string{"dev/archives/" + m.Archive, "dev/archives/" + archive.ManifestName(m.RunID)} {
		if _, err := fs3.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("rig-results"), Key: aws.String(key)}); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
	}

	// Fetch extracts byte-identical files.
	out := t.TempDir()
	if _, err := archive.Fetch(ctx, dest, m.RunID, out); err != nil {
		t.Fatal(err)
	}
	archive.CompareTrees(t, run, filepath.Join(out, m.RunID))
}

func TestS3CorruptionDetected(t *testing.T) {
	ctx := context.Background()
	fs3 := newFakeS3(t, "b")
	run := archive.MakeRun(t, 6<<20)
	dest := s3dest.NewS3(fs3.client, "b", "", smallParts)
	m, err := archive.Archive(ctx, archive.Options{RunDir: run, Dest: dest})
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
		if _, err := archive.Verify(ctx, dest, m.RunID); !errors.Is(err, archive.ErrCorrupt) {
			t.Errorf("%s: want archive.ErrCorrupt, got %v", name, err)
		}
	}
	put(good)
	if _, err := archive.Verify(ctx, dest, m.RunID); err != nil {
		t.Fatalf("restored object: %v", err)
	}
	if _, err := archive.Verify(ctx, dest, "no-such-run"); !errors.Is(err, archive.ErrNotFound) {
		t.Fatalf("missing run: want archive.ErrNotFound, got %v", err)
	}
}

// TestS3ListAndFetchAll: a prefix's archives are listed by run id, and FetchAll unpacks every one
// that matches its manifest and names the one that does not.
func TestS3ListAndFetchAll(t *testing.T) {
	ctx := context.Background()
	fs3 := newFakeS3(t, "team")
	dest := s3dest.NewS3(fs3.client, "team", "rig/archives")
	var ids []string
	for _, id := range []string{"20250601-120000-follower-restart", "20250601-130000-follower-restart"} {
		run := archive.MakeRun(t, 1<<10)
		renamed := filepath.Join(filepath.Dir(run), id)
		if run != renamed {
			if err := os.Rename(run, renamed); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := archive.Archive(ctx, archive.Options{RunDir: renamed, Dest: dest}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, key := range []string{"rig/archives/notes.txt", "rig/archives/sub/x.manifest.json", "rig/other.manifest.json"} {
		if _, err := fs3.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("team"), Key: aws.String(key), Body: bytes.NewReader([]byte("{}"))}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := dest.List(ctx)
	if err != nil || strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Fatalf("List: %v %v, want %v", got, err, ids)
	}
	// The first archive damaged: it is named and skipped, the second fetched.
	if _, err := fs3.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("team"), Key: aws.String("rig/archives/" + archive.ArchiveName(ids[0])),
		Body: bytes.NewReader([]byte("not zstd"))}); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var log bytes.Buffer
	fetched, err := archive.FetchAll(ctx, dest, out, &log)
	if err != nil || len(fetched) != 1 || fetched[0] != ids[1] {
		t.Fatalf("FetchAll: %v %v", fetched, err)
	}
	if !strings.Contains(log.String(), "skipped s3://team/rig/archives/"+archive.ArchiveName(ids[0])) {
		t.Errorf("log: %q", log.String())
	}
	if _, err := os.Stat(filepath.Join(out, ids[0])); !os.IsNotExist(err) {
		t.Errorf("the damaged run was left unpacked: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, ids[1], "manifest.json")); err != nil {
		t.Error(err)
	}
}
