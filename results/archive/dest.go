package archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
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

// Open returns the destination of a location: a local folder, or an S3 prefix with the AWS SDK's
// default credentials (region: the given one, else the SDK's configured one).
func Open(ctx context.Context, loc Location, region string) (Dest, error) {
	if loc.Bucket == "" {
		return Dir{Path: loc.Dir}, nil
	}
	var opts []func(*config.LoadOptions) error
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS config: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("%w: no AWS region for s3://%s: set AWS_REGION or pass --region", ErrBadDest, loc.Bucket)
	}
	return NewS3(s3.NewFromConfig(cfg), loc.Bucket, loc.Prefix), nil
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
	f, err := os.CreateTemp(d.Path, "."+name+".*")
	if err != nil {
		return err
	}
	defer func() {
		f.Close()
		os.Remove(f.Name()) // no-op after the rename
	}()
	if _, err := io.Copy(f, ctxReader{ctx, r}); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil { // CreateTemp makes 0600; archives are read like results
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), filepath.Join(d.Path, name)); err != nil {
		return err
	}
	// Make the rename itself durable.
	dir, err := os.Open(d.Path)
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}

// Get opens Path/name.
func (d Dir) Get(_ context.Context, name string) (io.ReadCloser, error) {
	f, err := os.Open(filepath.Join(d.Path, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, filepath.Join(d.Path, name))
	}
	return f, err
}

// S3 stores archives under a bucket prefix with the transfer manager: multipart above its
// threshold, parts in parallel, and ranged parallel reads for verification.
type S3 struct {
	Client *s3.Client
	TM     *transfermanager.Client
	Bucket string
	Prefix string
}

// NewS3 builds an S3 destination. tmOpts tune the transfer manager (part size, threshold).
func NewS3(client *s3.Client, bucket, prefix string, tmOpts ...func(*transfermanager.Options)) *S3 {
	return &S3{Client: client, TM: transfermanager.New(client, tmOpts...), Bucket: bucket, Prefix: strings.Trim(prefix, "/")}
}

func (d *S3) key(name string) string {
	if d.Prefix == "" {
		return name
	}
	return path.Join(d.Prefix, name)
}

func (d *S3) String() string { return "s3://" + d.Bucket + "/" + d.key("") }

// Put uploads r; a seekable r (the staged archive file) lets the manager size the parts.
func (d *S3) Put(ctx context.Context, name string, r io.Reader, size int64) error {
	_, err := d.TM.UploadObject(ctx, &transfermanager.UploadObjectInput{
		Bucket:        aws.String(d.Bucket),
		Key:           aws.String(d.key(name)),
		Body:          r,
		ContentLength: aws.Int64(size),
	})
	return err
}

// Get checks the object exists, then reads it with the manager's ranged parallel getter.
func (d *S3) Get(ctx context.Context, name string) (io.ReadCloser, error) {
	_, err := d.Client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(d.Bucket), Key: aws.String(d.key(name))})
	if err != nil {
		var nf *s3types.NotFound
		var apiErr smithy.APIError
		if errors.As(err, &nf) || (errors.As(err, &apiErr) && (apiErr.ErrorCode() == "NotFound" || apiErr.ErrorCode() == "NoSuchKey")) {
			return nil, fmt.Errorf("%w: s3://%s/%s", ErrNotFound, d.Bucket, d.key(name))
		}
		return nil, err
	}
	out, err := d.TM.GetObject(ctx, &transfermanager.GetObjectInput{Bucket: aws.String(d.Bucket), Key: aws.String(d.key(name))})
	if err != nil {
		return nil, err
	}
	return io.NopCloser(out.Body), nil
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
