package rundir

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

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
	r := bufio.NewReaderSize(f, 64<<10)
	var magic [8]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil || magic != rf.magic {
		return nil, fmt.Errorf("%s: not a %s (bad magic)", path, rf.what)
	}
	var out []T
	b := make([]byte, rf.size)
	for {
		if _, err := io.ReadFull(r, b); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return out, nil
			}
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		out = append(out, rf.get(b))
	}
}
