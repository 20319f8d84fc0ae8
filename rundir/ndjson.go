package rundir

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
)

// lineWriter appends one JSON line per record to a run-folder file (disk syncs, inside spans);
// safe for concurrent use. The first error sticks: Flush and Close return it.
type lineWriter[T any] struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	enc *json.Encoder
	err error
}

// openLines opens path with flag (os.O_TRUNC to start over, os.O_APPEND to add) for writing.
func openLines[T any](path string, flag int, what string) (*lineWriter[T], error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|flag, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", what, err)
	}
	w := bufio.NewWriterSize(f, 64<<10)
	return &lineWriter[T]{f: f, w: w, enc: json.NewEncoder(w)}, nil
}

// Write appends one record.
func (w *lineWriter[T]) Write(v T) {
	w.mu.Lock()
	if w.err == nil {
		w.err = w.enc.Encode(v)
	}
	w.mu.Unlock()
}

// Flush pushes buffered records to the file.
func (w *lineWriter[T]) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}

// Close flushes and closes.
func (w *lineWriter[T]) Close() error {
	err := w.Flush()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readLines decodes one record per line; a line that does not decode (the torn last line of a
// killed writer) is skipped.
func readLines[T any](r io.Reader) ([]T, error) {
	var out []T
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var v T
		if json.Unmarshal(sc.Bytes(), &v) == nil {
			out = append(out, v)
		}
	}
	return out, sc.Err()
}
