// Package archive packs a run folder (results/<run-id>/) into one tar.zst with a sha256 manifest,
// stores both in a destination (a local folder or S3 through the transfer manager), and reads
// them back to verify that what landed is what was packed.
package archive

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/rig-dev/rig/internal/mdtext"
	"github.com/rig-dev/rig/rundir"
)

// ManifestVersion is the version of the manifest format.
const ManifestVersion = 1

// Manifest describes one archive: its digest and the digest of every file in it.
type Manifest struct {
	Version       int         `json:"version"`
	RunID         string      `json:"run_id"`
	CreatedAt     time.Time   `json:"created_at"`
	Archive       string      `json:"archive"` // object/file name of the tar.zst
	ArchiveSize   int64       `json:"archive_size"`
	ArchiveSHA256 string      `json:"archive_sha256"`
	Files         []FileEntry `json:"files"`
	// Skipped are what the run folder held that is not archived, each with why: sockets and
	// FIFOs a killed run left, mounts (a dead disk model's, or any other filesystem).
	Skipped []Skipped `json:"skipped,omitempty"`
}

// Skipped is a path of the run folder left out of the archive.
type Skipped struct {
	Path string `json:"path"` // <run-id>/relative/path, slash-separated
	Why  string `json:"why"`
}

// FileEntry is one regular file of the run folder, by its path inside the archive.
type FileEntry struct {
	Path   string `json:"path"` // <run-id>/relative/path, slash-separated
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Errors callers act on.
var (
	// ErrCorrupt means what was read back differs from the manifest.
	ErrCorrupt = errors.New("archive does not match its manifest")
	// ErrNotFound means the destination has no such archive or manifest.
	ErrNotFound = errors.New("archive not found")
)

// Dest is where archives are stored: a local folder or an S3 prefix.
type Dest interface {
	// Put stores size bytes from r under name, replacing any previous object.
	Put(ctx context.Context, name string, r io.Reader, size int64) error
	// Get opens the object called name; it returns an error wrapping ErrNotFound when it is absent.
	Get(ctx context.Context, name string) (io.ReadCloser, error)
	// String names the destination for messages, e.g. s3://bucket/prefix/.
	String() string
}

// ArchiveName and ManifestName are the object names of a run's archive and manifest.
func ArchiveName(runID string) string  { return runID + ".tar.zst" }
func ManifestName(runID string) string { return runID + ".manifest.json" }

// Options of Archive.
type Options struct {
	RunDir string // results/<run-id>; its name (once made absolute) is the run id
	Dest   Dest
	TmpDir string // where the archive is staged before upload; "" means os.TempDir()
	Logger *slog.Logger
}

// ArchiveAll archives every run folder to dest in turn, printing one line per verified archive.
func ArchiveAll(ctx context.Context, dest Dest, runs []string, w io.Writer) error {
	for _, run := range runs {
		m, err := Archive(ctx, Options{RunDir: run, Dest: dest})
		if err != nil {
			return err
		}
		for _, s := range m.Skipped {
			fmt.Fprintf(w, "%s: skipped %s: %s\n", mdtext.Plain(run), mdtext.Plain(s.Path), s.Why)
		}
		fmt.Fprintf(w, "%s -> %s%s: %d files, %d bytes, sha256 %s, verified\n",
			mdtext.Plain(run), mdtext.Plain(dest.String()), m.Archive, len(m.Files), m.ArchiveSize, m.ArchiveSHA256)
	}
	return nil
}

// Archive packs RunDir, stores the archive and then its manifest (so a manifest means a complete
// upload), and verifies by reading both back. It returns the manifest.
func Archive(ctx context.Context, o Options) (Manifest, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	runID, err := RunIDOf(o.RunDir)
	if err != nil {
		return Manifest{}, fmt.Errorf("archive %s: %w", o.RunDir, err)
	}
	st, err := os.Stat(o.RunDir)
	if err != nil {
		return Manifest{}, fmt.Errorf("archive %s: %w", o.RunDir, err)
	}
	if !st.IsDir() {
		return Manifest{}, fmt.Errorf("archive %s: not a directory", o.RunDir)
	}
	tmp, err := os.CreateTemp(o.TmpDir, runID+"-*.tar.zst")
	if err != nil {
		return Manifest{}, fmt.Errorf("archive %s: stage: %w", runID, err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	m, err := Pack(ctx, o.RunDir, tmp)
	if err != nil {
		return Manifest{}, fmt.Errorf("archive %s: %w", runID, err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return Manifest{}, fmt.Errorf("archive %s: rewind: %w", runID, err)
	}
	log.Info("archive packed", "run", runID, "files", len(m.Files), "bytes", m.ArchiveSize, "to", o.Dest.String())
	if err := o.Dest.Put(ctx, m.Archive, tmp, m.ArchiveSize); err != nil {
		return Manifest{}, fmt.Errorf("archive %s: upload %s to %s: %w", runID, m.Archive, o.Dest, err)
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, fmt.Errorf("archive %s: manifest: %w", runID, err)
	}
	if err := o.Dest.Put(ctx, ManifestName(runID), strings.NewReader(string(mb)), int64(len(mb))); err != nil {
		return Manifest{}, fmt.Errorf("archive %s: upload manifest to %s: %w", runID, o.Dest, err)
	}
	if _, err := Verify(ctx, o.Dest, runID); err != nil {
		return Manifest{}, fmt.Errorf("archive %s: verify %s: %w", runID, o.Dest, err)
	}
	log.Info("archive verified", "run", runID, "sha256", m.ArchiveSHA256, "at", o.Dest.String())
	return m, nil
}

// RunIDOf is the run id of a run folder: the name of the folder the path leads to (so
// RUN/node-0/.. is RUN), refused unless it is a run id (rundir.CheckRunID): an archive's name
// and every path in it are made of it.
func RunIDOf(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	id := filepath.Base(abs)
	if err := rundir.CheckRunID(id); err != nil {
		return "", fmt.Errorf("the folder's name is %w", err)
	}
	return id, nil
}

// Pack writes dir as a tar.zst to w, every path prefixed with the folder's run id, and returns
// the manifest of what it wrote. Regular files and folders are archived, on dir's own filesystem
// only (as tar --one-file-system). What a run leaves that holds no data is skipped and named in
// Manifest.Skipped: sockets, FIFOs and devices (a killed run's control sockets), a mount that
// no longer answers (ENOTCONN: a dead disk model's) and a folder another filesystem is mounted
// on (a live disk model's: its data is in disk.backing beside it). A symlink is refused rather
// than followed or archived half.
func Pack(ctx context.Context, dir string, w io.Writer) (Manifest, error) {
	runID, err := RunIDOf(dir)
	if err != nil {
		return Manifest{}, err
	}
	m := Manifest{Version: ManifestVersion, RunID: runID, CreatedAt: time.Now().UTC(), Archive: ArchiveName(runID)}
	sum := sha256.New()
	cw := &countWriter{w: io.MultiWriter(w, sum)}
	zw, err := zstd.NewWriter(cw)
	if err != nil {
		return Manifest{}, err
	}
	tw := tar.NewWriter(zw)
	var rootDev uint64
	if st, err := os.Stat(dir); err == nil {
		rootDev = devOf(st)
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		rel, rerr := filepath.Rel(dir, p)
		if rerr != nil {
			return rerr
		}
		name := path.Join(runID, filepath.ToSlash(rel))
		if deadMount(err) && p != dir {
			m.Skipped = append(m.Skipped, Skipped{Path: name, Why: "a dead mount (transport endpoint is not connected): `rig report` of the run detaches a disk model's"})
			return fs.SkipDir
		}
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		info, err := d.Info()
		if deadMount(err) {
			m.Skipped = append(m.Skipped, Skipped{Path: name, Why: "a dead mount (transport endpoint is not connected): `rig report` of the run detaches a disk model's"})
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if err != nil {
			return err
		}
		switch t := info.Mode().Type(); {
		case info.IsDir() && p != dir && devOf(info) != rootDev:
			m.Skipped = append(m.Skipped, Skipped{Path: name, Why: "another filesystem is mounted there"})
			return fs.SkipDir
		case t&(fs.ModeSocket|fs.ModeNamedPipe|fs.ModeDevice|fs.ModeCharDevice) != 0:
			m.Skipped = append(m.Skipped, Skipped{Path: name, Why: "a " + kindOf(t) + ", not data"})
			return nil
		}
		switch {
		case d.IsDir():
			hdr, err := tar.FileInfoHeader(info, "")
			if err != nil {
				return err
			}
			hdr.Name = name + "/"
			return tw.WriteHeader(hdr)
		case d.Type().IsRegular():
			return addFile(tw, p, name, info, &m)
		default:
			return fmt.Errorf("%s: %s is not a regular file or folder", p, info.Mode().Type())
		}
	})
	if err != nil {
		zw.Close()
		return Manifest{}, err
	}
	if err := tw.Close(); err != nil {
		return Manifest{}, err
	}
	if err := zw.Close(); err != nil {
		return Manifest{}, err
	}
	m.ArchiveSize = cw.n
	m.ArchiveSHA256 = hex.EncodeToString(sum.Sum(nil))
	return m, nil
}

// deadMount reports whether err is a FUSE mount whose server is gone (ENOTCONN; ECONNABORTED
// for a request its connection's abort caught).
func deadMount(err error) bool {
	return errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED)
}

// devOf is the device a file is on.
func devOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev)
	}
	return 0
}

func kindOf(t fs.FileMode) string {
	switch {
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeNamedPipe != 0:
		return "FIFO"
	}
	return "device"
}

func addFile(tw *tar.Writer, src, name string, info fs.FileInfo, m *Manifest) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	hdr, err := tar.FileInfoHeader(info, "")
	if err != nil {
		return err
	}
	hdr.Name = name
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tw, h), f)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	if n != info.Size() {
		return fmt.Errorf("%s changed size while archiving (%d -> %d bytes)", src, info.Size(), n)
	}
	m.Files = append(m.Files, FileEntry{Path: name, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))})
	return nil
}

// Verify reads the manifest and the archive back from dest and checks the archive's size and
// sha256 and every file's size and sha256 against the manifest.
func Verify(ctx context.Context, dest Dest, runID string) (Manifest, error) {
	return read(ctx, dest, runID, nil)
}

// Fetch verifies an archive like Verify and extracts it under outDir (as outDir/<run-id>/...),
// through an os.Root of outDir: nothing is written outside it. The run id and every path the
// manifest lists are checked before anything is written; each file is written only after its
// digest matched. A corrupt archive leaves partial output behind, which the returned ErrCorrupt
// says not to trust.
func Fetch(ctx context.Context, dest Dest, runID, outDir string) (Manifest, error) {
	if outDir == "" {
		return Manifest{}, errors.New("fetch: empty output folder")
	}
	if err := rundir.CheckRunID(runID); err != nil {
		return Manifest{}, fmt.Errorf("fetch %s: %w", dest, err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return Manifest{}, fmt.Errorf("fetch %s: %w", runID, err)
	}
	root, err := os.OpenRoot(outDir)
	if err != nil {
		return Manifest{}, fmt.Errorf("fetch %s: %w", runID, err)
	}
	defer root.Close()
	return read(ctx, dest, runID, root)
}

func read(ctx context.Context, dest Dest, runID string, out *os.Root) (Manifest, error) {
	if err := rundir.CheckRunID(runID); err != nil {
		return Manifest{}, fmt.Errorf("read %s: %w", dest, err)
	}
	mr, err := dest.Get(ctx, ManifestName(runID))
	if err != nil {
		return Manifest{}, fmt.Errorf("read manifest of %s: %w", runID, err)
	}
	var m Manifest
	err = json.NewDecoder(mr).Decode(&m)
	mr.Close()
	if err != nil {
		return Manifest{}, fmt.Errorf("%w: manifest of %s: %v", ErrCorrupt, runID, err)
	}
	if m.RunID != runID || m.Archive != ArchiveName(runID) {
		return Manifest{}, fmt.Errorf("%w: manifest names run %q archive %q, want %q", ErrCorrupt, m.RunID, m.Archive, runID)
	}
	for _, f := range m.Files {
		if err := inside(runID, f.Path); err != nil {
			return Manifest{}, fmt.Errorf("%w: manifest of %s: %v", ErrCorrupt, runID, err)
		}
	}
	ar, err := dest.Get(ctx, m.Archive)
	if err != nil {
		return Manifest{}, fmt.Errorf("read %s: %w", m.Archive, err)
	}
	defer ar.Close()
	sum := sha256.New()
	counted := &countReader{r: io.TeeReader(ctxReader{ctx, ar}, sum)} // a signal stops a long unpack
	files, err := checkTar(counted, m, out)
	if err != nil {
		return Manifest{}, err
	}
	// Drain what the tar reader did not need (zstd frame end, padding) so the digest covers it all.
	if _, err := io.Copy(io.Discard, counted); err != nil {
		return Manifest{}, fmt.Errorf("read %s: %w", m.Archive, err)
	}
	if counted.n != m.ArchiveSize {
		return Manifest{}, fmt.Errorf("%w: %s is %d bytes, manifest says %d", ErrCorrupt, m.Archive, counted.n, m.ArchiveSize)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != m.ArchiveSHA256 {
		return Manifest{}, fmt.Errorf("%w: %s sha256 %s, manifest says %s", ErrCorrupt, m.Archive, got, m.ArchiveSHA256)
	}
	if files != len(m.Files) {
		return Manifest{}, fmt.Errorf("%w: %s holds %d files, manifest lists %d", ErrCorrupt, m.Archive, files, len(m.Files))
	}
	return m, nil
}

// inside says why p (slash-separated, as in the archive) is not a path inside the run's folder:
// it must be the folder or below it, written as Pack writes it (clean, relative, no "..").
func inside(runID, p string) error {
	if p != path.Clean(p) || !filepath.IsLocal(filepath.FromSlash(p)) || (p != runID && !strings.HasPrefix(p, runID+"/")) {
		return fmt.Errorf("entry %q is not a path inside %s/", p, runID)
	}
	return nil
}

// checkTar decompresses and walks the archive, comparing every file with the manifest, and
// writes the files under out when it is set.
func checkTar(r io.Reader, m Manifest, out *os.Root) (int, error) {
	want := map[string]FileEntry{}
	for _, f := range m.Files {
		want[f.Path] = f
	}
	// One decoder goroutine: the stream is decoded in this goroutine, so nothing reads r behind
	// the caller's back once this returns.
	zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	seen := 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			if _, err := io.Copy(io.Discard, zr); err != nil {
				return seen, fmt.Errorf("%w: %s: %v", ErrCorrupt, m.Archive, err)
			}
			return seen, nil
		}
		if err != nil {
			return seen, fmt.Errorf("%w: %s: %v", ErrCorrupt, m.Archive, err)
		}
		name := hdr.Name
		if hdr.Typeflag == tar.TypeDir {
			name = strings.TrimSuffix(name, "/")
		}
		if err := inside(m.RunID, name); err != nil {
			return seen, fmt.Errorf("%w: %s: %v", ErrCorrupt, m.Archive, err)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if out != nil {
				if err := out.MkdirAll(name, 0o755); err != nil {
					return seen, err
				}
			}
		case tar.TypeReg:
			fe, ok := want[name]
			if !ok {
				return seen, fmt.Errorf("%w: %s is not in the manifest", ErrCorrupt, name)
			}
			delete(want, name) // a second entry of one path is not in the manifest
			if err := checkFile(tr, fe, hdr, out); err != nil {
				return seen, err
			}
			seen++
		default:
			return seen, fmt.Errorf("%w: entry %q has unsupported type %c", ErrCorrupt, hdr.Name, hdr.Typeflag)
		}
	}
}

// checkFile reads one archived file and checks it against its manifest entry; with out it also
// writes it there, under its final name only once it checked out.
func checkFile(r io.Reader, fe FileEntry, hdr *tar.Header, out *os.Root) error {
	check := func(w io.Writer) error {
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(h, w), r)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, fe.Path, err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); n != fe.Size || got != fe.SHA256 {
			return fmt.Errorf("%w: %s is %d bytes sha256 %s, manifest says %d bytes sha256 %s", ErrCorrupt, fe.Path, n, got, fe.Size, fe.SHA256)
		}
		return nil
	}
	if out == nil {
		return check(io.Discard)
	}
	dir, base := path.Split(fe.Path)
	if err := out.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The unpack folder is the caller's own: a fixed temporary name, created exclusively.
	tmp := dir + "." + base + ".part"
	f, err := out.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, hdr.FileInfo().Mode().Perm())
	if err != nil {
		return err
	}
	err = check(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = out.Rename(tmp, fe.Path)
	}
	if err != nil {
		out.Remove(tmp)
	}
	return err
}

// RunsForStack lists the run folders under resultsDir whose manifest.json has the given "stack"
// (the runner records "target" and "stack" at the top level), sorted by name.
func RunsForStack(resultsDir, stack string) ([]string, error) {
	entries, err := os.ReadDir(resultsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list runs in %s: %w", resultsDir, err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(resultsDir, e.Name(), "manifest.json"))
		if err != nil {
			continue // not a run folder (or one that never started)
		}
		var head struct {
			Target string `json:"target"`
			Stack  string `json:"stack"`
		}
		if err := json.Unmarshal(b, &head); err != nil {
			return nil, fmt.Errorf("read %s: %w", filepath.Join(resultsDir, e.Name(), "manifest.json"), err)
		}
		if head.Stack == stack {
			out = append(out, filepath.Join(resultsDir, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
