package archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rig-dev/rig/internal/atomicfile"
)

// ErrBadDest means a --to value is neither s3://bucket[/prefix] nor a folder path.
var ErrBadDest = errors.New("bad archive destination")

// Location is a parsed --to value.
type Location struct {
	Bucket string // set for s3://
	Prefix string // key prefix without leading or trailing slash
	Dir    string // set for a local folder
}

// ParseLocation parses s3://bucket/prefix or a local folder.
func ParseLocation(to string) (Location, error) {
	switch {
	case strings.TrimSpace(to) == "":
		return Location{}, fmt.Errorf("%w: empty; want s3://bucket/prefix or a folder", ErrBadDest)
	case strings.HasPrefix(to, "s3://"):
		bucket, prefix, _ := strings.Cut(strings.TrimPrefix(to, "s3://"), "/")
		if bucket == "" || strings.ContainsAny(bucket, " \t") {
			return Location{}, fmt.Errorf("%w: %q has no bucket; want s3://bucket/prefix", ErrBadDest, to)
		}
		return Location{Bucket: bucket, Prefix: strings.Trim(prefix, "/")}, nil
	case strings.Contains(to, "://"):
		return Location{}, fmt.Errorf("%w: %q: only s3:// URLs and local folders are supported", ErrBadDest, to)
	}
	return Location{Dir: to}, nil
}

// ErrS3 means an S3 location was given to a program that does not link the AWS SDK: S3
// destinations live in archive/s3dest (the stack driver links it; rig hands S3 archives
// to the driver), which keeps the SDK's minute of compile time out of the rig binary.
var ErrS3 = errors.New("S3 destinations need archive/s3dest")

// Open returns the destination of a local-folder location (see s3dest.Open for S3).
func Open(_ context.Context, loc Location, _ string) (Dest, error) {
	if loc.Bucket != "" {
		return nil, fmt.Errorf("%w: s3://%s", ErrS3, loc.Bucket)
	}
	return Dir{Path: loc.Dir}, nil
}

// Dir stores archives in a local folder. Files are written to a temporary name, synced and then
// renamed, so a crash never leaves a half archive under the final name.
type Dir struct{ Path string }

func (d Dir) String() string {
	return strings.TrimSuffix(d.Path, string(filepath.Separator)) + string(filepath.Separator)
}

// Put writes r to Path/name.
func (d Dir) Put(ctx context.Context, name string, r io.Reader, _ int64) error {
	if err := os.MkdirAll(d.Path, 0o755); err != nil {
		return err
	}
	// Archives are read like results (0644), and durable: synced, renamed, the folder synced.
	return atomicfile.Write(filepath.Join(d.Path, name), ctxReader{ctx, r}, atomicfile.Options{Perm: 0o644, Durable: true})
}

// Get opens Path/name.
func (d Dir) Get(_ context.Context, name string) (io.ReadCloser, error) {
	f, err := os.Open(filepath.Join(d.Path, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, filepath.Join(d.Path, name))
	}
	return f, err
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
