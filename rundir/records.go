package rundir

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/rig-dev/rig/internal/units"
	"github.com/rig-dev/rig/internal/untrusted"
)

// recordFormat is a file of fixed-size little-endian records after an 8-byte magic: probes.bin,
// bursts.bin and acked.bin. Writers append as the load runs; a reader drops a truncated last
// record (a killed writer), so a file is readable whenever it is cut.
type recordFormat[T any] struct {
	magic [8]byte
	size  int
	what  string // for errors: "probe file"
	put   func(b []byte, r T)
	get   func(b []byte) T
}

// RecordWriter appends records to a file of one format.
type RecordWriter[T any] struct {
	f   *os.File
	w   *bufio.Writer
	buf []byte
	put func([]byte, T)
}

func (rf *recordFormat[T]) create(path string) (*RecordWriter[T], error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", rf.what, err)
	}
	w := bufio.NewWriterSize(f, 64<<10)
	w.Write(rf.magic[:])
	return &RecordWriter[T]{f: f, w: w, buf: make([]byte, rf.size), put: rf.put}, nil
}

// Write appends one record.
func (w *RecordWriter[T]) Write(r T) error {
	w.put(w.buf, r)
	_, err := w.w.Write(w.buf)
	return err
}

// Flush pushes buffered records to the file.
func (w *RecordWriter[T]) Flush() error { return w.w.Flush() }

// Close flushes and closes.
func (w *RecordWriter[T]) Close() error {
	if err := w.w.Flush(); err != nil {
		w.f.Close()
		return err
	}
	return w.f.Close()
}

func (rf *recordFormat[T]) read(path string) ([]T, error) {
	f, err := untrusted.Open(path, "record file") // a regular file: never a FIFO or a device
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return rf.decode(f, path, 0)
}

// count is how many whole records a file of size bytes holds.
func (rf *recordFormat[T]) count(size int64) int64 {
	return max(size-int64(len(rf.magic)), 0) / int64(rf.size)
}

// decode reads the magic, then every whole record; n > 0 preallocates for n records.
func (rf *recordFormat[T]) decode(f io.Reader, name string, n int64) ([]T, error) {
	r := bufio.NewReaderSize(f, 64<<10)
	var magic [8]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil || magic != rf.magic {
		return nil, fmt.Errorf("%s: not a %s (bad magic)", name, rf.what)
	}
	out := make([]T, 0, n)
	b := make([]byte, rf.size)
	for {
		if _, err := io.ReadFull(r, b); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return out, nil
			}
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		out = append(out, rf.get(b))
	}
}

// ErrUndeclared classifies a record file of a run folder holding more records than the run
// declared it wrote.
var ErrUndeclared = errors.New("more records than the run declared: refused, not read")

// Declared is how many records a run folder's file may hold, and what says so.
type Declared struct {
	N      int64
	Source string // e.g. "loadgen/stats.json (answered + lost)"
}

// readDeclared reads name in the run folder, refusing it, before anything is read, when it
// holds more records than declared; it never reads past the declared count, so a file that
// grows meanwhile costs nothing more.
func readDeclared[T any](f Folder, rf *recordFormat[T], name string, d Declared) ([]T, error) {
	fh, err := f.Open(name, rf.what)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	n := rf.count(st.Size())
	if n > d.N {
		return nil, fmt.Errorf("%s holds %s records (%s bytes); %s declares %s: %w",
			name, units.Group(strconv.FormatInt(n, 10)), units.Group(strconv.FormatInt(st.Size(), 10)),
			d.Source, units.Group(strconv.FormatInt(d.N, 10)), ErrUndeclared)
	}
	return rf.decode(io.LimitReader(fh, int64(len(rf.magic))+n*int64(rf.size)), name, n)
}

// recordsIn is how many whole records the file name in the run folder holds, by its size.
func recordsIn[T any](f Folder, rf *recordFormat[T], name string) (int64, error) {
	st, err := f.Stat(name)
	if err != nil {
		return 0, err
	}
	return rf.count(st.Size()), nil
}
