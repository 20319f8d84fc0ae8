package archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rig-dev/rig/internal/mdtext"
	"github.com/rig-dev/rig/rundir"
)

// Lister is a destination that can list the archives it holds (a folder, an S3 prefix): what
// `rig history import` reads a whole archive back with.
type Lister interface {
	// List returns the run ids that have a manifest (ManifestName), sorted.
	List(ctx context.Context) ([]string, error)
}

// RunIDs picks the run ids out of object names: those with a manifest, sorted.
func RunIDs(names []string) []string {
	var ids []string
	for _, n := range names {
		if id, ok := strings.CutSuffix(n, ManifestName("")); ok && id != "" && !strings.Contains(id, "/") {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// List lists the folder's archives.
func (d Dir) List(_ context.Context) ([]string, error) {
	ents, err := os.ReadDir(d.Path)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	return RunIDs(names), nil
}

// FetchAll verifies and unpacks every archive dest lists into outDir/<run-id>/, and names on w
// each one it skipped (an archive that does not match its manifest, a manifest without its
// archive): the rest are fetched all the same. It returns the run ids it fetched.
func FetchAll(ctx context.Context, dest Dest, outDir string, w io.Writer) ([]string, error) {
	l, ok := dest.(Lister)
	if !ok {
		return nil, fmt.Errorf("%s cannot list its archives", dest)
	}
	ids, err := l.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dest, err)
	}
	var got []string
	for _, id := range ids {
		if err := rundir.CheckRunID(id); err != nil {
			fmt.Fprintf(w, "skipped %s: %v\n", mdtext.Plain(dest.String()+ArchiveName(id)), mdtext.Plain(err.Error()))
			continue
		}
		if _, err := Fetch(ctx, dest, id, outDir); err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return got, err
			}
			os.RemoveAll(filepath.Join(outDir, id)) // never a half-unpacked run; id is one path element
			fmt.Fprintf(w, "skipped %s%s: %v\n", dest, ArchiveName(id), mdtext.Plain(err.Error()))
			continue
		}
		got = append(got, id)
	}
	return got, nil
}
