package agent

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/rig-dev/rig/engine"
	"github.com/rig-dev/rig/internal/atomicfile"
	"github.com/rig-dev/rig/rundir"
)

// DefaultCollectMaxFile: a file inside an engine data folder (raft log store, snapshots) larger
// than this is left out of a collect unless all=1. Logs, transitions and samples are always in.
const DefaultCollectMaxFile = 8 << 20

// CollectSkippedFile is added to the archive, listing what the size limit left out.
const CollectSkippedFile = "collect-skipped.json"

// CollectOptions select what GET /v1/collect sends.
type CollectOptions struct {
	All     bool  // include engine data files of any size
	MaxFile int64 // size limit for engine data files (0: DefaultCollectMaxFile)
}

// CollectSkip is one file the size limit left out.
type CollectSkip struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

func (s *Server) handleCollect(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	opts := CollectOptions{All: q.Get("all") == "1" || q.Get("all") == "true", MaxFile: DefaultCollectMaxFile}
	if v := q.Get("max_file"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("max_file %q: want a size in bytes", v))
			return
		}
		opts.MaxFile = n
	}
	w.Header().Set("Content-Type", "application/gzip")
	w.WriteHeader(http.StatusOK)
	// Once streaming has begun an error can only cut the archive short; the reader sees a
	// truncated gzip stream and fails, which is the signal.
	if err := writeCollect(r.Context(), w, s.opts.Dir, s.dataDirs(), opts, s.log); err != nil {
		s.log.Error("collect", "dir", s.opts.Dir, "err", err)
	}
}

// dataDirs lists the engine data folders to apply the size limit to: every one configured
// since the agent started, and the one in the engine.json a previous agent left.
func (s *Server) dataDirs() []string {
	s.engine.mu.Lock()
	var out []string
	for d := range s.engine.dataDirs {
		out = append(out, d)
	}
	s.engine.mu.Unlock()
	if b, err := os.ReadFile(filepath.Join(s.opts.Dir, rundir.EngineConfigFile)); err == nil {
		var c engine.Config
		if json.Unmarshal(b, &c) == nil && c.Dir != "" {
			out = append(out, c.Dir)
		}
	}
	return out
}

// writeCollect streams root as a gzip'd tar. Files are not followed through symlinks; sockets
// and devices are left out.
func writeCollect(ctx context.Context, w io.Writer, root string, dataDirs []string, opts CollectOptions, log *slog.Logger) error {
	if opts.MaxFile == 0 {
		opts.MaxFile = DefaultCollectMaxFile
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	prefixes := make([]string, len(dataDirs))
	for i, d := range dataDirs {
		if !filepath.IsAbs(d) {
			d = filepath.Join(root, d)
		}
		prefixes[i] = filepath.Clean(d) + string(filepath.Separator)
	}
	gz, err := gzip.NewWriterLevel(w, gzip.BestSpeed) // logs compress well even at the fastest level
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	var skipped []CollectSkip
	walkErr := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			// A folder or file that vanished or cannot be read: note it and go on.
			log.Warn("collect: skip", "path", path, "err", err)
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		link := ""
		switch {
		case info.Mode().IsRegular():
			if !opts.All && info.Size() > opts.MaxFile && inAny(path, prefixes) {
				skipped = append(skipped, CollectSkip{Path: filepath.ToSlash(rel), Bytes: info.Size()})
				return nil
			}
		case info.IsDir():
		case info.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(path); err != nil {
				return nil
			}
		default:
			return nil
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return fmt.Errorf("collect %s: %w", rel, err)
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("collect %s: %w", rel, err)
		}
		if info.Mode().IsRegular() {
			return copyFileEntry(tw, path, hdr.Size)
		}
		return nil
	})
	if walkErr != nil {
		return walkErr
	}
	if len(skipped) > 0 {
		b, _ := json.MarshalIndent(map[string]any{"max_file": opts.MaxFile, "skipped": skipped}, "", "  ")
		hdr := &tar.Header{Name: CollectSkippedFile, Mode: 0o644, Size: int64(len(b)), ModTime: time.Now(), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func inAny(path string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(path, d) {
			return true
		}
	}
	return false
}

// copyFileEntry writes exactly size bytes: a log still being appended is cut at the size its
// header announced, and one that shrank meanwhile is padded with zeros.
func copyFileEntry(tw *tar.Writer, path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		// Gone between the walk and the open: keep the entry well-formed.
		_, err = io.CopyN(tw, zeros{}, size)
		return err
	}
	defer f.Close()
	n, err := io.CopyN(tw, f, size)
	if errors.Is(err, io.EOF) {
		_, err = io.CopyN(tw, zeros{}, size-n)
	}
	if err != nil {
		return fmt.Errorf("collect %s: %w", path, err)
	}
	return nil
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// ExtractCollect unpacks a collect archive into dir (created if needed). Entries that would land
// outside dir are refused; symlinks are not recreated.
func ExtractCollect(r io.Reader, dir string) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("extract collect: %w", err)
	}
	defer gz.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("extract collect: %w", err)
	}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("extract collect into %s: %w", dir, err)
		}
		name := filepath.FromSlash(hdr.Name)
		if !filepath.IsLocal(name) {
			return fmt.Errorf("extract collect: entry %q would land outside %s", hdr.Name, dir)
		}
		dst := filepath.Join(dir, name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return fmt.Errorf("extract collect: %w", err)
			}
		case tar.TypeReg:
			if err := extractFile(tr, dst, hdr); err != nil {
				return err
			}
		}
	}
}

func extractFile(r io.Reader, dst string, hdr *tar.Header) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("extract collect: %w", err)
	}
	if err := atomicfile.Write(dst, r, atomicfile.Options{Perm: fs.FileMode(hdr.Mode).Perm() | 0o600}); err != nil {
		return fmt.Errorf("extract collect %s: %w", hdr.Name, err)
	}
	os.Chtimes(dst, hdr.ModTime, hdr.ModTime)
	return nil
}
