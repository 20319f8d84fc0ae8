// Package s3dest is the S3 destination of archive: archives go up with aws-sdk-go-v2's
// transfer manager (multipart above its threshold, parts in parallel) and are read back with
// ranged parallel gets for verification. It is its own package so that only the programs that
// upload (the stack driver) pay for the AWS SDK.
package s3dest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/rig-dev/rig/archive"
	"github.com/rig-dev/rig/infra/awsconf"
)

// Open returns the destination of a location: a local folder, or an S3 prefix with the AWS SDK's
// default credentials (region: the given one, else the SDK's configured one).
func Open(ctx context.Context, loc archive.Location, region string) (archive.Dest, error) {
	return OpenTarget(ctx, loc, awsconf.Target{Region: region})
}

// OpenTarget is Open with a stack's AWS configuration (profile and region), the one its
// deployment used.
func OpenTarget(ctx context.Context, loc archive.Location, t awsconf.Target) (archive.Dest, error) {
	if loc.Bucket == "" {
		return archive.Open(ctx, loc, t.Region)
	}
	cfg, err := t.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("load AWS config: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("%w: no AWS region for s3://%s: set AWS_REGION or pass --region", archive.ErrBadDest, loc.Bucket)
	}
	return NewS3(s3.NewFromConfig(cfg), loc.Bucket, loc.Prefix), nil
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

func (d *S3) String() string {
	if d.Prefix == "" {
		return "s3://" + d.Bucket + "/"
	}
	return "s3://" + d.Bucket + "/" + d.Prefix + "/" // names follow it, as a folder's do
}

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
			return nil, fmt.Errorf("%w: s3://%s/%s", archive.ErrNotFound, d.Bucket, d.key(name))
		}
		return nil, err
	}
	out, err := d.TM.GetObject(ctx, &transfermanager.GetObjectInput{Bucket: aws.String(d.Bucket), Key: aws.String(d.key(name))})
	if err != nil {
		return nil, err
	}
	return io.NopCloser(out.Body), nil
}

// List lists the run ids with a manifest under the prefix (archive.Lister).
func (d *S3) List(ctx context.Context) ([]string, error) {
	prefix := d.key("")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	var names []string
	p := s3.NewListObjectsV2Paginator(d.Client, &s3.ListObjectsV2Input{Bucket: aws.String(d.Bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range page.Contents {
			names = append(names, strings.TrimPrefix(aws.ToString(o.Key), prefix))
		}
	}
	return archive.RunIDs(names), nil
}
