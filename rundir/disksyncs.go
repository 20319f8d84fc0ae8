package rundir

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/rig-dev/rig/internal/untrusted"
)

// DiskSyncsFile, in a node's folder, is every fsync the node's disk model completed
// (diskmodel/fusefs), one DiskSync JSON line each in completion order, so the analysis can count
// the forces, the bytes they flushed and the time they took in any window of the run (a
// snapshot's, the rest). Written where the rig runs the model (the local target).
const DiskSyncsFile = "disk-syncs.ndjson"

// DiskSync is one completed fsync of a file on a disk model.
type DiskSync struct {
	AtNs  int64  `json:"at_ns"`  // the fsync began, ns since the Unix epoch
	File  string `json:"file"`   // path relative to the model's mountpoint (the engine's data folder)
	Bytes int64  `json:"bytes"`  // bytes written to the file since its previous fsync: what this one flushed
	DurNs int64  `json:"dur_ns"` // begin to return, the model's hold included
}

// DiskSyncWriter appends DiskSync lines to a file; safe for concurrent use.
type DiskSyncWriter struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	enc *json.Encoder
	err error
}

// CreateDiskSyncs creates (truncates) a disk syncs file.
func CreateDiskSyncs(path string) (*DiskSyncWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create disk syncs file: %w", err)
	}
	w := bufio.NewWriterSize(f, 64<<10)
	return &DiskSyncWriter{f: f, w: w, enc: json.NewEncoder(w)}, nil
}

// Write appends one record; the first error sticks (Flush, Close return it).
func (w *DiskSyncWriter) Write(s DiskSync) {
	w.mu.Lock()
	if w.err == nil {
		w.err = w.enc.Encode(s)
	}
	w.mu.Unlock()
}

// Flush pushes buffered records to the file.
func (w *DiskSyncWriter) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}

// Close flushes and closes.
func (w *DiskSyncWriter) Close() error {
	err := w.Flush()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReadDiskSyncs reads a disk syncs file. A line that does not decode (the torn last line of a
// killed writer) is skipped. The file is a run folder's: refused unless a regular file.
func ReadDiskSyncs(path string) ([]DiskSync, error) {
	f, err := untrusted.Open(path, "disk syncs file")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readDiskSyncs(f)
}

func readDiskSyncs(r io.Reader) ([]DiskSync, error) {
	var out []DiskSync
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var s DiskSync
		if json.Unmarshal(sc.Bytes(), &s) == nil {
			out = append(out, s)
		}
	}
	return out, sc.Err()
}
